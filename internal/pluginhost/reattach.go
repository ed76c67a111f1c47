package pluginhost

import (
	"context"
	"fmt"

	"github.com/memhost/memhost/sdk/host"
)

// launchOrReattach starts the plugin, or attaches to the debug process
// MEMHOST_REATTACH_PLUGINS names for the instance or, failing that, for
// the plugin's name.
func launchOrReattach(ctx context.Context, e Entry, opts host.LaunchOptions) (*host.Conn, error) {
	targets, err := host.ReattachTargets()
	if err != nil {
		return nil, err
	}
	t, ok := targets[opts.Name]
	if !ok {
		t, ok = targets[e.Manifest.Name]
	}
	if !ok {
		return host.Launch(ctx, opts)
	}
	if opts.Logger != nil {
		opts.Logger.Warn("attaching to a plugin process the host did not start and does not verify (debug mode)",
			"instance", opts.Name, "plugin", e.Manifest.Name, "pid", t.Pid, "address", t.Address)
	}
	conn, err := host.Reattach(ctx, opts, t)
	if err != nil {
		return nil, fmt.Errorf("%w (from %s)", err, host.ReattachEnv)
	}
	return conn, nil
}
