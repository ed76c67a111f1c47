package pluginhost

import (
	"context"

	"github.com/memhost/memhost/sdk/host"
)

// dial connects to the remote plugin spec names: a sibling of reattach,
// except that the plugin serves over TCP, with mutual TLS off loopback,
// for any number of hosts. No manifest vouches for it: host.Dial checks
// that its Info is well formed and speaks this host's protocol, dispense
// that it serves the instance's kind, and the host never starts or ends
// its process.
func dial(ctx context.Context, spec Spec, opts StartOptions) (*host.Conn, error) {
	return host.Dial(ctx, host.LaunchOptions{
		Name: opts.Instance, Host: opts.Host, Logger: opts.Logger, StartTimeout: opts.StartTimeout,
	}, *spec.Remote)
}
