// Package host is the host's side of the memhost plugin connection: it
// launches a plugin process and verifies it against its manifest (Launch,
// ParseManifest), and answers clients for the kinds the plugin serves. The
// memhost host and the conformance kit share it; a plugin author needs it
// only in tests (ServeInProcess).
package host

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"github.com/memhost/memhost/sdk"
	pb "github.com/memhost/memhost/sdk/internal/pluginpb"
	"github.com/memhost/memhost/sdk/internal/wire"
)

// DefaultStartTimeout bounds how long a plugin may take to hand-shake.
const DefaultStartTimeout = 10 * time.Second

// DefaultKillGrace is how long Close lets a plugin exit cleanly before it
// is killed with SIGKILL.
const DefaultKillGrace = 2 * time.Second

// LaunchOptions says how to start (or reattach to) one plugin process.
type LaunchOptions struct {
	// Name labels the plugin in logs and errors.
	Name string
	// Path is the executable; SHA256 its expected digest, checked before
	// the process starts. Both are required.
	Path   string
	SHA256 []byte
	// Verifier checks Path against SHA256 and remembers the verdict, so a
	// restart does not hash the executable again. Nil hashes it every time.
	Verifier *Verifier
	// Env is added to the host environment for the plugin process.
	Env []string
	// Dir is the plugin's working directory, so relative paths in its
	// configuration resolve there (the host passes its data directory).
	Dir string
	// Logger receives the host-side client logs and the plugin's own log
	// lines (its sdk.Logger lines and anything else it writes to stderr),
	// under Name. The plugin logs at Logger's level.
	Logger       hclog.Logger
	StartTimeout time.Duration
	// Host is what Configure tells the plugin about the host.
	Host Host
}

// Conn is a live connection to one plugin process.
type Conn struct {
	name   string
	client *plugin.Client
	rpc    plugin.ClientProtocol
	meta   pb.PluginClient
	info   sdk.Info
	host   Host
	stop   func()
	// kill ends the process with SIGKILL. go-plugin's own Kill first asks
	// the plugin to shut down and waits for the answer without a bound,
	// so a stopped (SIGSTOP) or wedged process would never go away.
	kill func()
	once sync.Once
	done chan struct{} // closed once the process is gone (Kill returned)
	// sockets is the directory the plugin's socket is in, removed once
	// the process is gone ("" for a reattached plugin).
	sockets string
}

// Launch starts the plugin, completes the handshake and asks its Info.
// Every failure names the plugin and says what went wrong in one line.
func Launch(ctx context.Context, opts LaunchOptions) (*Conn, error) {
	return launch(ctx, opts, nil)
}

// launch starts the plugin, or reattaches to one served in-process.
func launch(ctx context.Context, opts LaunchOptions, reattach *plugin.ReattachConfig) (_ *Conn, err error) {
	logger := opts.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	named := logger.Named(opts.Name)
	cfg := &plugin.ClientConfig{
		HandshakeConfig:  wire.Handshake(),
		VersionedPlugins: map[int]plugin.PluginSet{wire.ProtocolVersion: hostPluginSet()},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     timeout,
		Managed:          true,
		Logger:           stderrLogger{named},
		// Whatever the plugin writes to os.Stderr after Serve started
		// (go-plugin redirects it into the connection) is logged too.
		SyncStderr:      &lineLogger{log: named},
		GRPCDialOptions: grpcDialOptions(),
	}
	label := opts.Name
	kill := func() {} // a reattached process is not ours to signal
	var sockets string
	var exe *verified
	byPath := true
	v := opts.Verifier
	if v == nil {
		v = NewVerifier()
	}
	if reattach != nil {
		cfg.Reattach = reattach
		// go-plugin skips version negotiation when reattaching and reads
		// the unversioned set.
		cfg.Plugins = hostPluginSet()
	} else {
		if opts.Path == "" {
			return nil, fmt.Errorf("plugin %s: no executable path: %w", label, sdk.ErrInvalid)
		}
		if len(opts.SHA256) != sha256.Size {
			return nil, fmt.Errorf("plugin %s (%s): no sha256 to verify the executable against: %w", label, opts.Path, sdk.ErrInvalid)
		}
		label = fmt.Sprintf("%s (%s)", opts.Name, opts.Path)
		if exe, err = v.check(opts.Path, opts.SHA256); err != nil {
			return nil, fmt.Errorf("plugin %s: %w", label, err)
		}
		defer exe.f.Close()
		// The plugin's socket goes in a directory of the host's own, so it
		// can be removed once the process is gone: by default go-plugin puts
		// it in the temporary directory, where a plugin that was killed or
		// crashed leaves it for good.
		if sockets, err = os.MkdirTemp("", wire.SocketDirPrefix); err != nil {
			return nil, fmt.Errorf("plugin %s: socket directory: %w", label, err)
		}
		defer func() {
			if err != nil {
				_ = os.RemoveAll(sockets)
			}
		}()
		if v.beforeExec != nil {
			v.beforeExec()
		}
		var target string
		target, byPath = exe.execTarget()
		// The process lives under its own context: cancelling it is how
		// the host hard-kills the plugin (exec sends SIGKILL, race-free
		// with go-plugin's wait).
		procCtx, cancel := context.WithCancel(context.Background())
		kill = cancel
		cmd := exec.CommandContext(procCtx, target)
		cmd.Args = []string{opts.Path}
		cmd.Env = append(cmd.Env, opts.Env...)
		cmd.Env = append(cmd.Env, "MEMHOST_LOG_LEVEL="+levelName(logger), plugin.EnvUnixSocketDir+"="+sockets)
		cmd.Dir = opts.Dir
		cfg.Cmd = cmd
		// Verifier checked the executable above; go-plugin's SecureConfig
		// would hash it again on every start.
		cfg.AutoMTLS = true
	}
	client := plugin.NewClient(cfg)
	// The handshake has no context of its own: a caller that gives up (the
	// host shutting down) kills the process, which ends the handshake.
	defer context.AfterFunc(ctx, kill)()
	rpc, err := client.Client()
	if err != nil {
		kill()
		client.Kill()
		return nil, fmt.Errorf("plugin %s: start failed: %s: %w", label, firstLine(err.Error()), sdk.ErrUnavailable)
	}
	// The process has exec'd: a file changed in place since the check (or,
	// when exec went by path, swapped) may be what runs.
	if exe != nil && !exe.unchanged(byPath) {
		kill()
		client.Kill()
		v.forget(opts.Path)
		return nil, fmt.Errorf("plugin %s: %w", label, errChanged)
	}
	raw, err := rpc.Dispense(wire.MetaPlugin)
	if err != nil {
		kill()
		client.Kill()
		return nil, fmt.Errorf("plugin %s: no plugin service: %v: %w", label, err, sdk.ErrUnavailable)
	}
	c := &Conn{name: opts.Name, client: client, rpc: rpc, meta: raw.(pb.PluginClient), host: opts.Host, done: make(chan struct{}), sockets: sockets}
	if reattach == nil {
		c.kill = kill
	}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := c.meta.Info(ictx, &pb.InfoRequest{})
	if err != nil {
		kill()
		client.Kill()
		return nil, fmt.Errorf("plugin %s: Info call failed: %w", label, fromStatus(ictx, err))
	}
	c.info = infoFromPB(resp)
	return c, nil
}

// Info is what the plugin reported at launch.
func (c *Conn) Info() sdk.Info { return c.info }

// Host describes the host to a plugin in Configure.
type Host struct {
	// Version is the host's semantic version.
	Version string
	// Capabilities are host features a plugin may rely on.
	Capabilities sdk.HostCapabilities
}

// HostCapabilities are the features every host built on this package has.
func HostCapabilities() sdk.HostCapabilities {
	return sdk.HostCapabilities{sdk.HostFieldErrors, sdk.HostManifestStream, sdk.HostSelectStream}
}

// Configure hands the plugin its instance configuration (a JSON object)
// and tells it who the host is (LaunchOptions.Host). A refused key comes back as a
// *sdk.FieldError whose Field is "config.<key>".
func (c *Conn) Configure(ctx context.Context, config json.RawMessage) error {
	h := c.host
	if len(config) == 0 {
		config = json.RawMessage("{}")
	}
	req := &pb.ConfigureRequest{ConfigJson: config, Host: &pb.HostInfo{
		Version: h.Version, ProtocolVersions: []int32{wire.ProtocolVersion}, Capabilities: toStrings(h.Capabilities),
	}}
	if _, err := c.meta.Configure(ctx, req); err != nil {
		return fmt.Errorf("plugin %s: configure: %w", c.name, withFieldPrefix("config", fromStatus(ctx, err)))
	}
	return nil
}

// Ping checks the connection (go-plugin's gRPC health service).
func (c *Conn) Ping() error {
	if err := c.rpc.Ping(); err != nil {
		return fmt.Errorf("plugin %s: ping: %v: %w", c.name, err, sdk.ErrUnavailable)
	}
	return nil
}

// Exited reports whether the plugin process has exited.
func (c *Conn) Exited() bool { return c.client.Exited() }

// Pid is the plugin's process id (0 when unknown).
func (c *Conn) Pid() int {
	if rc := c.client.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

// Close shuts the plugin down gracefully, killing it if it does not stop
// within DefaultKillGrace.
func (c *Conn) Close() { c.Kill(DefaultKillGrace) }

// Kill asks the plugin to exit and sends SIGKILL if it has not within
// grace (at once when grace <= 0). It returns once the process is gone.
// A reattached plugin is not the host's to signal: Kill waits for its
// graceful exit. Concurrent and repeated calls are safe.
func (c *Conn) Kill(grace time.Duration) {
	c.once.Do(func() {
		go func() {
			c.client.Kill()
			if c.stop != nil {
				c.stop()
			}
			if c.sockets != "" {
				_ = os.RemoveAll(c.sockets)
			}
			close(c.done)
		}()
	})
	if grace > 0 {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-c.done:
			return
		case <-t.C:
		}
	}
	if c.kill != nil {
		c.kill()
	}
	<-c.done
}

// firstLine keeps go-plugin's headline: its start errors append a
// multi-line checklist, and the host reports each refusal as one line.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if strings.HasPrefix(s, "Unrecognized remote plugin message") {
		s += " (the executable wrote to stdout before the handshake, or is not a memhost plugin)"
	}
	return s
}
