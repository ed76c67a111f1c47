package sdk

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	pb "github.com/memhost/memhost/sdk/proto/memhost/plugin/v1"
)

// DefaultStartTimeout bounds how long a plugin may take to hand-shake.
const DefaultStartTimeout = 10 * time.Second

// LaunchOptions says how to start (or reattach to) one plugin process.
type LaunchOptions struct {
	// Name labels the plugin in logs and errors.
	Name string
	// Path is the executable; SHA256 its expected digest, checked by
	// go-plugin before the process starts. Both are required unless
	// Reattach is set.
	Path   string
	SHA256 []byte
	// Reattach connects to an already running plugin (debug or test mode)
	// instead of starting one. AutoMTLS cannot be used when reattaching.
	Reattach *plugin.ReattachConfig
	// Env is added to the host environment for the plugin process.
	Env []string
	// Dir is the plugin's working directory, so relative paths in its
	// configuration resolve there (the host passes its data directory).
	Dir string
	// Logger receives the host-side client logs and the plugin's own log
	// lines (parsed from its stderr), under the plugin's name.
	Logger       hclog.Logger
	StartTimeout time.Duration
}

// Conn is a live connection to one plugin process.
type Conn struct {
	name   string
	client *plugin.Client
	rpc    plugin.ClientProtocol
	meta   pb.PluginClient
	info   Info
	stop   func()
	once   sync.Once
}

// Launch starts the plugin, completes the handshake and asks its Info.
// Every failure names the plugin and says what went wrong in one line.
func Launch(ctx context.Context, opts LaunchOptions) (*Conn, error) {
	logger := opts.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	cfg := &plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{ProtocolVersion: hostPluginSet()},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     timeout,
		Managed:          true,
		Logger:           logger.Named(opts.Name),
		GRPCDialOptions:  grpcDialOptions(),
	}
	label := opts.Name
	if opts.Reattach != nil {
		cfg.Reattach = opts.Reattach
		// go-plugin skips version negotiation when reattaching and reads
		// the unversioned set.
		cfg.Plugins = hostPluginSet()
	} else {
		if opts.Path == "" {
			return nil, fmt.Errorf("plugin %s: no executable path: %w", label, ErrInvalid)
		}
		if len(opts.SHA256) != sha256.Size {
			return nil, fmt.Errorf("plugin %s (%s): no sha256 to verify the executable against: %w", label, opts.Path, ErrInvalid)
		}
		cmd := exec.Command(opts.Path)
		cmd.Env = append(cmd.Env, opts.Env...)
		cmd.Dir = opts.Dir
		cfg.Cmd = cmd
		cfg.SecureConfig = &plugin.SecureConfig{Checksum: opts.SHA256, Hash: sha256.New()}
		cfg.AutoMTLS = true
		label = fmt.Sprintf("%s (%s)", opts.Name, opts.Path)
	}
	client := plugin.NewClient(cfg)
	rpc, err := client.Client()
	if err != nil {
		client.Kill()
		if errors.Is(err, plugin.ErrChecksumsDoNotMatch) {
			return nil, fmt.Errorf("plugin %s: refused: executable sha256 does not match manifest sha256 %x: %w", label, opts.SHA256, ErrPermission)
		}
		return nil, fmt.Errorf("plugin %s: start failed: %s: %w", label, firstLine(err.Error()), ErrUnavailable)
	}
	raw, err := rpc.Dispense(metaPluginName)
	if err != nil {
		client.Kill()
		return nil, fmt.Errorf("plugin %s: no plugin service: %v: %w", label, err, ErrUnavailable)
	}
	c := &Conn{name: opts.Name, client: client, rpc: rpc, meta: raw.(pb.PluginClient)}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := c.meta.Info(ictx, &pb.InfoRequest{})
	if err != nil {
		client.Kill()
		return nil, fmt.Errorf("plugin %s: Info call failed: %w", label, fromStatus(err))
	}
	c.info = infoFromPB(resp)
	return c, nil
}

// Info is what the plugin reported at launch.
func (c *Conn) Info() Info { return c.info }

// Configure hands the plugin its instance configuration (a JSON object).
func (c *Conn) Configure(ctx context.Context, config json.RawMessage) error {
	if len(config) == 0 {
		config = json.RawMessage("{}")
	}
	if _, err := c.meta.Configure(ctx, &pb.ConfigureRequest{ConfigJson: config}); err != nil {
		return fmt.Errorf("plugin %s: configure: %w", c.name, fromStatus(err))
	}
	return nil
}

func (c *Conn) dispense(kind PluginKind) (any, error) {
	if !slices.Contains(c.info.Kinds, kind) {
		return nil, fmt.Errorf("plugin %s does not serve kind %q (it serves %v): %w", c.name, kind, c.info.Kinds, ErrUnsupported)
	}
	raw, err := c.rpc.Dispense(string(kind))
	if err != nil {
		return nil, fmt.Errorf("plugin %s: dispense %s: %v: %w", c.name, kind, err, ErrUnavailable)
	}
	return raw, nil
}

// Provider answers the plugin's provider, with the capabilities it declared.
func (c *Conn) Provider() (*ProviderClient, error) {
	raw, err := c.dispense(KindProvider)
	if err != nil {
		return nil, err
	}
	return NewProviderClient(raw.(pb.ProviderClient), c.info.Capabilities), nil
}

// Selector answers the plugin's selector.
func (c *Conn) Selector() (*SelectorClient, error) {
	raw, err := c.dispense(KindSelector)
	if err != nil {
		return nil, err
	}
	return &SelectorClient{rpc: raw.(pb.SelectorClient)}, nil
}

// Compactor answers the plugin's compactor.
func (c *Conn) Compactor() (*CompactorClient, error) {
	raw, err := c.dispense(KindCompactor)
	if err != nil {
		return nil, err
	}
	return &CompactorClient{rpc: raw.(pb.CompactorClient)}, nil
}

// OperatorResolver answers the plugin's operator resolver.
func (c *Conn) OperatorResolver() (*OperatorResolverClient, error) {
	raw, err := c.dispense(KindOperatorResolver)
	if err != nil {
		return nil, err
	}
	return &OperatorResolverClient{rpc: raw.(pb.OperatorResolverClient)}, nil
}

// MobResolver answers the plugin's mob resolver.
func (c *Conn) MobResolver() (*MobResolverClient, error) {
	raw, err := c.dispense(KindMobResolver)
	if err != nil {
		return nil, err
	}
	return &MobResolverClient{rpc: raw.(pb.MobResolverClient)}, nil
}

// Ping checks the connection (go-plugin's gRPC health service).
func (c *Conn) Ping() error {
	if err := c.rpc.Ping(); err != nil {
		return fmt.Errorf("plugin %s: ping: %v: %w", c.name, err, ErrUnavailable)
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

// ReattachConfig describes how another process could reattach (debug mode).
func (c *Conn) ReattachConfig() *plugin.ReattachConfig { return c.client.ReattachConfig() }

// Close shuts the plugin down gracefully, killing it if it does not stop.
func (c *Conn) Close() {
	c.once.Do(func() {
		c.client.Kill()
		if c.stop != nil {
			c.stop()
		}
	})
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
