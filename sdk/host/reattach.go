package host

import (
	"context"
	"fmt"
	"os"

	plugin "github.com/hashicorp/go-plugin"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/internal/wire"
)

// ReattachEnv is the environment variable (MEMHOST_REATTACH_PLUGINS)
// that points the host at plugins started by hand with --debug.
const ReattachEnv = wire.ReattachEnv

// ReattachTarget is where one debug plugin serves.
type ReattachTarget = wire.ReattachTarget

// ReattachTargets reads ReattachEnv from the environment; nil when unset.
func ReattachTargets() (map[string]ReattachTarget, error) {
	v := os.Getenv(ReattachEnv)
	if v == "" {
		return nil, nil
	}
	targets, err := wire.ParseReattach(v)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, sdk.ErrInvalid)
	}
	return targets, nil
}

// Reattach connects to a plugin a developer started with --debug (under a
// debugger, say) instead of starting one: no executable is checked or
// run, and the process is not the host's to signal. Closing the Conn asks
// the plugin to shut down.
func Reattach(ctx context.Context, opts LaunchOptions, t ReattachTarget) (*Conn, error) {
	addr, err := t.Addr()
	if err != nil {
		return nil, fmt.Errorf("plugin %s: reattach: %v: %w", opts.Name, err, sdk.ErrInvalid)
	}
	return launch(ctx, opts, &plugin.ReattachConfig{
		Protocol: plugin.ProtocolGRPC, ProtocolVersion: t.ProtocolVersion, Addr: addr, Pid: t.Pid, Test: true,
	})
}
