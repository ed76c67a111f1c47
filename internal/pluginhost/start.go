package pluginhost

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// StartOptions are the host-wide settings for starting plugin processes.
type StartOptions struct {
	Logger hclog.Logger
	// PluginLogger, when set, receives the plugin's own lines instead of
	// Logger (host.LaunchOptions.PluginLogger).
	PluginLogger hclog.Logger
	StartTimeout time.Duration
	// Dir is the plugins' working directory (the data directory).
	Dir string
	Env []string
	// Withhold names host variables plugins do not get (its secrets; see
	// host.LaunchOptions.Withhold).
	Withhold []string
	// Instance names the plugin in the host's log ("" for the manifest
	// name): every line the plugin logs appears under it.
	Instance string
	// Host is what Configure tells the plugin about this host.
	Host host.Host
	// Verifier checks executables against their manifests and remembers
	// the verdicts; nil hashes every start (a Supervisor makes its own).
	Verifier *host.Verifier
}

// Start verifies e, starts its process and checks its Info against the
// manifest. The returned Conn is not yet configured.
func Start(ctx context.Context, e Entry, opts StartOptions) (*host.Conn, error) {
	// host.Launch checks the executable against the manifest's sha256
	// immediately before exec, from opts.Verifier's verdict when the file
	// is unchanged since it was last hashed.
	name := opts.Instance
	if name == "" {
		name = e.Manifest.Name
	}
	conn, err := launchOrReattach(ctx, e, host.LaunchOptions{
		Name:         name,
		Host:         opts.Host,
		Path:         e.Executable,
		SHA256:       e.Manifest.Checksum(),
		Verifier:     opts.Verifier,
		Logger:       opts.Logger,
		PluginLogger: opts.PluginLogger,
		StartTimeout: opts.StartTimeout,
		Dir:          opts.Dir,
		Env:          opts.Env,
		Withhold:     opts.Withhold,
		Interpreted:  e.Interpreted,
	})
	if err != nil {
		return nil, fmt.Errorf("%w (manifest %s)", err, e.ManifestPath)
	}
	if diff := e.Manifest.Mismatch(conn.Info()); diff != "" {
		conn.Close()
		return nil, refusedf("plugin %s (%s): refused: manifest %s and plugin disagree: %s",
			e.Manifest.Name, e.Executable, e.ManifestPath, diff)
	}
	return conn, nil
}

// WriteManifest starts the executable once, asks its Info, and writes the
// manifest beside it as <name>.plugin.json. It is how `make build` and
// plugin authors produce manifests; the host never trusts a plugin that
// has no manifest. The name is the one the executable reports, so a
// manifest already there that names another executable (another plugin
// claiming that name) is replaced only with force: see Written.
func WriteManifest(ctx context.Context, exe string, logger hclog.Logger, force bool) (Written, error) {
	abs, err := filepath.Abs(exe)
	if err != nil {
		return Written{}, err
	}
	sum, err := FileSHA256(abs)
	if err != nil {
		return Written{}, fmt.Errorf("plugin %s: %w", abs, err)
	}
	m := &host.Manifest{SHA256: sum}
	info, err := infoOf(ctx, host.LaunchOptions{Name: filepath.Base(abs), Path: abs, SHA256: m.Checksum(), Logger: logger, Dir: os.TempDir()})
	if err != nil {
		return Written{}, err
	}
	m = host.ManifestFor(info, filepath.Base(abs), sum)
	if err := m.Validate(); err != nil {
		return Written{}, fmt.Errorf("plugin %s: %w", abs, err)
	}
	return writeManifestFile(filepath.Join(filepath.Dir(abs), info.Name+host.ManifestSuffix), m, force)
}

// infoOf starts a plugin once and answers its checked Info.
func infoOf(ctx context.Context, opts host.LaunchOptions) (sdk.Info, error) {
	conn, err := host.Launch(ctx, opts)
	if err != nil {
		return sdk.Info{}, err
	}
	info := conn.Info()
	conn.Close()
	if err := host.CheckInfo(info); err != nil {
		return sdk.Info{}, fmt.Errorf("plugin %s: %w", opts.Path, err)
	}
	return info, nil
}
