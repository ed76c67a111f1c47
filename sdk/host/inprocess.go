package host

import (
	"context"
	"fmt"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/internal/wire"
)

// ServeInProcess serves p inside this process through go-plugin's test
// mode and answers a Conn to it, exactly as the host would see a launched
// binary (minus the process boundary): every request passes the SDK's
// validation and the wire. Closing the Conn stops serving. The conformance
// kit, plugin tests and benchmarks use it; coverage and debuggers work.
func ServeInProcess(ctx context.Context, p sdk.Plugin, logger hclog.Logger) (*Conn, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	ctx, cancel := context.WithCancel(ctx)
	reattach := make(chan *plugin.ReattachConfig, 1)
	closed := make(chan struct{})
	cfg, err := wire.ServeConfigFunc(p, logger, &plugin.ServeTestConfig{Context: ctx, ReattachConfigCh: reattach, CloseCh: closed})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("plugin %T: %w", p, err)
	}
	go plugin.Serve(cfg)
	var rc *plugin.ReattachConfig
	select {
	case rc = <-reattach:
	case <-time.After(10 * time.Second):
		cancel()
		return nil, fmt.Errorf("plugin %s: in-process serve did not start within 10s: %w", p.Info().Name, sdk.ErrUnavailable)
	}
	conn, err := launch(ctx, LaunchOptions{Name: p.Info().Name, Logger: logger}, rc)
	if err != nil {
		cancel()
		<-closed
		return nil, err
	}
	conn.stop = func() {
		cancel()
		<-closed
	}
	return conn, nil
}
