package sdk

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
)

// CheckPlugin verifies that p's Info is well formed and that p implements
// every kind and capability it declares. Serve refuses to start otherwise,
// so a plugin author finds the mistake at once, not in production.
func CheckPlugin(p Plugin) error {
	info := p.Info()
	if err := CheckInfo(info); err != nil {
		return err
	}
	for _, k := range info.Kinds {
		known, ok := implements(kindImpls, k, p)
		if !known {
			return fmt.Errorf("Info().Kinds names unknown kind %q", k)
		}
		if !ok {
			return fmt.Errorf("Info().Kinds declares %q but %T does not implement it", k, p)
		}
	}
	for _, c := range info.Capabilities {
		known, ok := implements(capabilityImpls, c, p)
		if !known {
			return fmt.Errorf("Info().Capabilities names unknown capability %q", c)
		}
		if !ok {
			return fmt.Errorf("Info().Capabilities declares %q but %T does not implement it", c, p)
		}
	}
	return nil
}

// CheckInfo verifies the parts of an Info that do not need the plugin's Go
// value: a safe name, a semantic version, protocol 1 and at least one kind.
func CheckInfo(info Info) error {
	if err := validateToken(info.Name, 64); err != nil {
		return fmt.Errorf("Info().Name %v", err)
	}
	if !IsSemver(info.Version) {
		return fmt.Errorf("Info().Version %q is not a semantic version like 1.2.3", info.Version)
	}
	if !slices.Contains(info.Protocols, ProtocolVersion) {
		return fmt.Errorf("Info().Protocols %v does not include protocol %d, the one this SDK serves", info.Protocols, ProtocolVersion)
	}
	if len(info.Kinds) == 0 {
		return fmt.Errorf("Info().Kinds is empty")
	}
	return nil
}

// IsSemver reports whether v looks like MAJOR.MINOR.PATCH with an optional
// pre-release or build suffix.
func IsSemver(v string) bool {
	core := v
	for i, c := range v {
		if c == '-' || c == '+' {
			core = v[:i]
			break
		}
	}
	parts := 0
	digits := 0
	for i := 0; i <= len(core); i++ {
		if i == len(core) || core[i] == '.' {
			if digits == 0 {
				return false
			}
			parts++
			digits = 0
			continue
		}
		if core[i] < '0' || core[i] > '9' {
			return false
		}
		digits++
	}
	return parts == 3
}

// NewPluginLogger is the logger a plugin should use: JSON lines on stderr,
// which the host parses into its own log under the plugin's name. A plugin
// must never write to stdout; go-plugin owns it for the handshake.
func NewPluginLogger(name string) hclog.Logger {
	level := hclog.LevelFromString(os.Getenv("MEMHOST_LOG_LEVEL"))
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: level, JSONFormat: true, Output: os.Stderr})
}

// Serve runs p as a plugin process. Call it from main; it returns only
// after the host has shut the plugin down, and closes p if it is an
// io.Closer. It exits the process if the host dies, so no plugin outlives
// its host even after the host was killed with SIGKILL.
func Serve(p Plugin) {
	if err := CheckPlugin(p); err != nil {
		fmt.Fprintf(os.Stderr, "memhost plugin %T: %v\n", p, err)
		os.Exit(1)
	}
	logger := NewPluginLogger(p.Info().Name)
	go exitWithParent(p, logger)
	plugin.Serve(serveConfig(p, logger, nil))
	closePlugin(p, logger)
}

func serveConfig(p Plugin, logger hclog.Logger, test *plugin.ServeTestConfig) *plugin.ServeConfig {
	return &plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{ProtocolVersion: serverPluginSet(p)},
		GRPCServer:       grpcServer,
		Logger:           logger,
		Test:             test,
	}
}

func closePlugin(p Plugin, logger hclog.Logger) {
	if c, ok := p.(io.Closer); ok {
		if err := c.Close(); err != nil {
			logger.Error("close failed", "error", err)
		}
	}
}

// exitWithParent polls the parent pid: when the host dies the plugin is
// re-parented, and it closes its store and exits.
func exitWithParent(p Plugin, logger hclog.Logger) {
	parent := os.Getppid()
	for range time.Tick(250 * time.Millisecond) {
		if os.Getppid() != parent {
			logger.Warn("host process is gone; exiting", "parent_pid", parent)
			closePlugin(p, logger)
			os.Exit(0)
		}
	}
}

// ServeInProcess serves p inside this process through go-plugin's test
// mode and answers a Conn to it, exactly as the host would see a launched
// binary (minus the process boundary). Closing the Conn stops serving.
// The conformance kit and benchmarks use it; coverage and debuggers work.
func ServeInProcess(ctx context.Context, p Plugin, logger hclog.Logger) (*Conn, error) {
	if err := CheckPlugin(p); err != nil {
		return nil, fmt.Errorf("plugin %T: %w", p, err)
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	ctx, cancel := context.WithCancel(ctx)
	reattach := make(chan *plugin.ReattachConfig, 1)
	closed := make(chan struct{})
	go plugin.Serve(serveConfig(p, logger, &plugin.ServeTestConfig{Context: ctx, ReattachConfigCh: reattach, CloseCh: closed}))
	var rc *plugin.ReattachConfig
	select {
	case rc = <-reattach:
	case <-time.After(10 * time.Second):
		cancel()
		return nil, fmt.Errorf("plugin %s: in-process serve did not start within 10s: %w", p.Info().Name, ErrUnavailable)
	}
	conn, err := Launch(ctx, LaunchOptions{Name: p.Info().Name, Reattach: rc, Logger: logger})
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
