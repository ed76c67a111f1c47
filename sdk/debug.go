package sdk

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"

	plugin "github.com/hashicorp/go-plugin"
	"github.com/memhost/memhost/sdk/internal/wire"
)

// debugRequested reports whether the plugin was started with --debug.
func debugRequested() bool { return slices.Contains(os.Args[1:], "--debug") }

// serveDebug serves p for a host to attach to (MEMHOST_REATTACH_PLUGINS)
// rather than one that started it: started by hand or under a debugger,
// it prints the line to export for memhost and serves until the host
// shuts it down or it is interrupted. It serves on a Unix socket without
// TLS, and does not exit when its parent (the debugger) does anything.
func serveDebug(p Plugin) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	reattach := make(chan *plugin.ReattachConfig, 1)
	closed := make(chan struct{})
	go plugin.Serve(serveConfig(p, hclogTo(stderr), &plugin.ServeTestConfig{Context: ctx, ReattachConfigCh: reattach, CloseCh: closed}))
	select {
	case rc := <-reattach:
		fmt.Println(wire.ReattachLine(p.Info().Name, wire.ReattachTarget{
			Protocol: string(plugin.ProtocolGRPC), ProtocolVersion: wire.ProtocolVersion, Pid: os.Getpid(),
			Network: rc.Addr.Network(), Address: rc.Addr.String(),
		}))
	case <-closed:
	}
	<-closed
	closePlugin(p)
}
