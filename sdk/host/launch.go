// Package host is the host's side of the memhost plugin connection: it
// launches a plugin process and verifies it against its manifest (Launch,
// ParseManifest), and answers clients for the kinds the plugin serves. The
// memhost host and the conformance kit share it; a plugin author needs it
// only in tests (ServeInProcess).
package host

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"github.com/memhost/memhost/sdk"
	pb "github.com/memhost/memhost/sdk/internal/pluginpb"
	"github.com/memhost/memhost/sdk/internal/wire"
)

// DefaultStartTimeout bounds how long a plugin may take to hand-shake.
const DefaultStartTimeout = 10 * time.Second

// DefaultInterpretedStartTimeout is DefaultStartTimeout for a script
// (LaunchOptions.Interpreted): its interpreter loads its libraries (grpc,
// protobuf) before the plugin can hand-shake, seconds of CPU that a busy
// machine hands out slowly.
const DefaultInterpretedStartTimeout = 30 * time.Second

// DefaultStartTimeoutFor is the start timeout of a plugin started with
// interp (nil for a binary) when none is set.
func DefaultStartTimeoutFor(interp *Interpreted) time.Duration {
	if interp != nil {
		return DefaultInterpretedStartTimeout
	}
	return DefaultStartTimeout
}

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
	// Withhold names variables of the host environment the plugin process
	// does not get: the host's own secrets (its tokens, its host key),
	// which no plugin needs and a plugin of a third party must not hold.
	Withhold []string
	// Dir is the plugin's working directory, so relative paths in its
	// configuration resolve there (the host passes its data directory).
	Dir string
	// Logger receives the host-side client logs and the plugin's own log
	// lines (its sdk.Logger lines and anything else it writes to stderr),
	// under Name. The plugin logs at Logger's level.
	Logger hclog.Logger
	// PluginLogger, when set, receives the plugin's own lines instead of
	// Logger (under Name too), so a caller can tell what the plugin said
	// from what the host says about it.
	PluginLogger hclog.Logger
	// StartTimeout bounds the handshake and the Info call that follows;
	// zero means DefaultStartTimeout, or DefaultInterpretedStartTimeout
	// for a script.
	StartTimeout time.Duration
	// Host is what Configure tells the plugin about the host.
	Host Host
	// Interpreted, when set, runs Path (a script) with a pinned
	// interpreter after checking its whole tree (interpreted.go).
	Interpreted *Interpreted
}

// Conn is a live connection to one plugin process.
type Conn struct {
	name string
	// peer is the process (or, for a remote plugin, the connection) the
	// host supervises: whether it is gone, its pid, how to end it.
	peer peer
	rpc  plugin.ClientProtocol
	meta pb.PluginClient
	info sdk.Info
	host Host
	stop func()
	// kill ends the process with SIGKILL. go-plugin's own Kill first asks
	// the plugin to shut down and waits for the answer without a bound,
	// so a stopped (SIGSTOP) or wedged process would never go away.
	kill func()
	// stopping is set once the host ends the process, so its exit (by
	// SIGKILL, say) is not logged as an error.
	stopping *atomic.Bool
	once     sync.Once
	done     chan struct{} // closed once the process is gone (Kill returned)
	// sockets is the directory the plugin's socket is in, removed once
	// the process is gone ("" for a reattached plugin).
	sockets string
	log     hclog.Logger
	// exitStatus tells how the process ended ("" while it runs, or when
	// it exited cleanly or is remote).
	exitStatus func() string
}

// killWait bounds how long Kill waits, after SIGKILL, for go-plugin to
// let go of the process: it waits for the plugin's output to end, which a
// child that left the plugin's process group may hold open for good.
const killWait = 5 * time.Second

// Launch starts the plugin, completes the handshake and asks its Info.
// Every failure names the plugin and says what went wrong in one line; a
// plugin that fails to start is reported with the last lines it wrote.
func Launch(ctx context.Context, opts LaunchOptions) (*Conn, error) {
	return launch(ctx, opts, nil)
}

// starting is one launch under way.
type starting struct {
	opts     LaunchOptions
	label    string // the plugin in errors: its name, and path when it has one
	timeout  time.Duration
	output   *pluginOutput
	client   clientLogger
	stopping *atomic.Bool
	kill     func() // a reattached process is not ours to signal
	sockets  string
	// undialable is set when the handshake named an address the host
	// must not connect to: go-plugin's Kill would dial it to ask the
	// process to exit, so the process is only killed.
	undialable bool
	exe        *verified
	byPath     bool
	// interp is a script plugin's interpreter, verified and open.
	interp       *verified
	interpByPath bool
	// began is when the start began; given is closed once the caller gave
	// up on it (its context done), which kills the process.
	began time.Time
	given <-chan struct{}
	// wrote is what the problem says of a line the process wrote to
	// stdout in place of its handshake, which quotes the line.
	wrote string
}

func newStarting(opts LaunchOptions) *starting {
	logger := opts.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s := &starting{opts: opts, label: opts.Name, timeout: opts.StartTimeout, stopping: new(atomic.Bool), kill: func() {}, byPath: true}
	if s.timeout <= 0 {
		s.timeout = DefaultStartTimeoutFor(opts.Interpreted)
	}
	named := logger.Named(opts.Name)
	s.output = &pluginOutput{log: named}
	if opts.PluginLogger != nil {
		s.output.log = opts.PluginLogger.Named(opts.Name)
	}
	s.client = clientLogger{Logger: named, path: opts.Path, stopping: s.stopping, exit: new(atomic.Value), stdoutTooLong: new(atomic.Bool)}
	return s
}

// launch starts the plugin, or reattaches to one served in-process.
func launch(ctx context.Context, opts LaunchOptions, reattach *plugin.ReattachConfig) (_ *Conn, err error) {
	s := newStarting(opts)
	s.began, s.given = time.Now(), ctx.Done()
	cfg := &plugin.ClientConfig{
		HandshakeConfig:  wire.Handshake(),
		VersionedPlugins: map[int]plugin.PluginSet{wire.ProtocolVersion: hostPluginSet()},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     s.timeout,
		// Not Managed: go-plugin's CleanupClients would then kill every
		// plugin in the process, including those another owner (a second
		// host, the conformance kit) still uses, and its list of managed
		// clients only ever grows. Each Conn's owner closes it.
		// The plugin's stderr reaches the host's log through pluginOutput
		// alone, before the handshake (Stderr) and after it (SyncStderr:
		// what go-plugin forwards once Serve swapped os.Stderr). So does
		// what a Go plugin prints to stdout after it (SyncStdout), as a
		// Python or TypeScript plugin's print does: go-plugin drops it.
		Stderr:          s.output,
		SyncStderr:      streamed{s.output, &s.output.stream},
		SyncStdout:      streamed{s.output, &s.output.stdout},
		GRPCDialOptions: grpcDialOptions(),
	}
	if reattach != nil {
		cfg.Reattach = reattach
		// go-plugin skips version negotiation when reattaching and reads
		// the unversioned set.
		cfg.Plugins = hostPluginSet()
	} else {
		if err := s.prepareExec(cfg); err != nil {
			return nil, err
		}
		defer s.closeExec()
		defer func() {
			if err != nil {
				_ = os.RemoveAll(s.sockets)
			}
		}()
	}
	cfg.Logger = s.client // after prepareExec named the exec target
	client := plugin.NewClient(cfg)
	// The handshake has no context of its own: a caller that gives up (the
	// host shutting down) kills the process, which ends the handshake.
	defer context.AfterFunc(ctx, s.kill)()
	if reattach == nil {
		// The handshake alone, checked before anything is dialled: the
		// plugin names the address, and the host connects only to its
		// own socket directory (or loopback) with the plugin's
		// certificate.
		addr, err := client.Start()
		if err != nil {
			return nil, s.failed(client, s.startProblem(err), sdk.ErrUnavailable)
		}
		if problem := s.handshakeProblem(addr, cfg.TLSConfig); problem != "" {
			s.undialable = true
			return nil, s.failed(client, "start failed: "+problem, sdk.ErrUnavailable)
		}
	}
	rpc, err := client.Client()
	if err != nil {
		return nil, s.failed(client, s.startProblem(err), sdk.ErrUnavailable)
	}
	// The process has exec'd: a file changed in place since the check (or,
	// when exec went by path, swapped) may be what runs.
	if s.exe != nil && !s.exe.unchanged(s.byPath) {
		s.verifier().forget(opts.Path)
		return nil, s.failed(client, "", errChanged)
	}
	if err := s.interpretedUnchanged(); err != nil {
		return nil, s.failed(client, "", err)
	}
	raw, err := rpc.Dispense(wire.MetaPlugin)
	if err != nil {
		return nil, s.failed(client, fmt.Sprintf("no plugin service: %v", err), sdk.ErrUnavailable)
	}
	c := &Conn{name: opts.Name, peer: processPeer{client}, rpc: rpc, meta: raw.(pb.PluginClient), host: opts.Host,
		stopping: s.stopping, done: make(chan struct{}), sockets: s.sockets, log: s.client.Logger, exitStatus: s.client.exitStatus}
	if reattach == nil {
		c.kill = s.kill
	}
	ictx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := c.meta.Info(ictx, &pb.InfoRequest{})
	if err != nil {
		s.stop(client)
		return nil, fmt.Errorf("plugin %s: Info call failed: %w", s.label, fromStatus(ictx, err))
	}
	c.info = infoFromPB(resp)
	return c, nil
}

func (s *starting) verifier() *Verifier {
	if s.opts.Verifier == nil {
		s.opts.Verifier = NewVerifier()
	}
	return s.opts.Verifier
}

// prepareExec checks the executable and sets up its command: the socket
// directory, the environment, and the client certificate for mutual TLS.
// On error nothing is left behind.
func (s *starting) prepareExec(cfg *plugin.ClientConfig) (err error) {
	opts := s.opts
	if opts.Path == "" {
		return fmt.Errorf("plugin %s: no executable path: %w", s.label, sdk.ErrInvalid)
	}
	if len(opts.SHA256) != sha256.Size {
		return fmt.Errorf("plugin %s (%s): no sha256 to verify the executable against: %w", s.label, opts.Path, sdk.ErrInvalid)
	}
	s.label = fmt.Sprintf("%s (%s)", opts.Name, opts.Path)
	v := s.verifier()
	if s.exe, err = v.check(opts.Path, opts.SHA256); err != nil {
		return fmt.Errorf("plugin %s: %w", s.label, err)
	}
	defer func() {
		if err != nil {
			s.closeExec()
		}
	}()
	var interpTarget string
	var interpArgs []string
	if opts.Interpreted != nil {
		if interpTarget, interpArgs, err = s.prepareInterpreter(); err != nil {
			return fmt.Errorf("plugin %s: %w", s.label, err)
		}
	}
	tlsConfig, certPEM, err := clientTLS()
	if err != nil {
		return fmt.Errorf("plugin %s: %w", s.label, err)
	}
	// The plugin's socket goes in a directory of the host's own, so it
	// can be removed once the process is gone: by default go-plugin puts
	// it in the temporary directory, where a plugin that was killed or
	// crashed leaves it for good.
	if s.sockets, err = os.MkdirTemp("", wire.SocketDirPrefix); err != nil {
		return fmt.Errorf("plugin %s: socket directory: %w", s.label, err)
	}
	if v.beforeExec != nil {
		v.beforeExec()
	}
	var target string
	target, s.byPath = s.exe.execTarget()
	args := []string{opts.Path}
	if opts.Interpreted != nil {
		target, args = interpTarget, interpArgs
	}
	s.client.target = target
	// The process lives under its own context: cancelling it is how
	// the host hard-kills the plugin (exec sends SIGKILL, race-free
	// with go-plugin's wait).
	procCtx, cancel := context.WithCancel(context.Background())
	s.kill = cancel
	cmd := exec.CommandContext(procCtx, target)
	cmd.Args = args
	// The host's environment, less its secrets and, for a script, what
	// would make the interpreter load code from outside the hashed tree.
	cfg.SkipHostEnv = true
	drop := opts.Withhold
	if opts.Interpreted != nil {
		drop = append(slices.Clip(drop), codeLoadingEnv...)
	}
	cmd.Env = withoutVars(os.Environ(), drop)
	cmd.Env = append(cmd.Env, opts.Env...)
	cmd.Env = append(cmd.Env, "MEMHOST_LOG_LEVEL="+levelName(s.client.Logger), plugin.EnvUnixSocketDir+"="+s.sockets,
		"PLUGIN_CLIENT_CERT="+certPEM, wire.EnvHostPID+"="+strconv.Itoa(os.Getpid()))
	cmd.Dir = opts.Dir
	ownGroup(cmd)
	cfg.Cmd = cmd
	// Mutual TLS with the host's own client certificate (clientTLS says
	// why not AutoMTLS); go-plugin adds the server's certificate from the
	// handshake line. Verifier checked the executable above: go-plugin's
	// SecureConfig would hash it again on every start.
	cfg.TLSConfig = tlsConfig
	return nil
}

// codeLoadingEnv are the variables an interpreter reads for code to run
// besides its script: a module path or a preload. A script plugin's tree
// is hashed, and what the interpreter runs must be what was hashed.
var codeLoadingEnv = []string{"NODE_OPTIONS", "NODE_PATH", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONINSPECT"}

// withoutVars is env without the variables named in drop.
func withoutVars(env, drop []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(drop, name) {
			out = append(out, kv)
		}
	}
	return out
}

// stop ends a process whose launch failed and waits until it is gone, so
// its last output has been read.
func (s *starting) stop(client *plugin.Client) {
	s.stopping.Store(true)
	s.kill()
	if !s.undialable {
		client.Kill()
	}
	// go-plugin's Kill does not wait for a process that never handed
	// over an address; Exited turns true once its output is all read.
	for deadline := time.Now().Add(2 * time.Second); !client.Exited() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	s.output.flush()
}

// failed stops the process and answers the launch's error: the problem,
// how the process ended, and the last lines it wrote.
func (s *starting) failed(client *plugin.Client, problem string, kind error) error {
	s.stop(client)
	if problem == "" {
		return fmt.Errorf("plugin %s: %w", s.label, kind)
	}
	if status := s.client.exitStatus(); status != "" && status != "signal: killed" {
		problem += " (" + status + ")"
	}
	// What quotes the process's output, each with what a realm's client
	// reads in its place.
	var hide []string
	if s.wrote != "" {
		hide = append(hide, s.wrote, "it wrote a line to stdout")
	}
	output := ""
	if tail := s.output.lastLines(); len(tail) > 0 {
		const show = 5
		if len(tail) > show {
			tail = tail[len(tail)-show:]
		}
		quoted := make([]string, len(tail))
		for i, line := range tail {
			quoted[i] = strconv.Quote(line)
		}
		output = "; its last output: " + strings.Join(quoted, " ")
		hide = append(hide, output, "")
	}
	err := fmt.Errorf("plugin %s: %s%s: %w", s.label, problem, output, kind)
	if len(hide) == 0 {
		return err
	}
	return &outputError{error: err, hide: hide}
}

// outputError is a launch failure that quotes what the process wrote (its
// last lines, a line in place of its handshake): the operator's clue,
// which may name any realm's data the plugin serves, so it is kept out of
// what one realm's client is told (WithoutOutput).
type outputError struct {
	error
	hide []string // pairs: a quote of the output, and what replaces it
}

func (e *outputError) Unwrap() error { return e.error }

// WithoutOutput answers err's text without the plugin output a launch
// failure in it quotes: what a client of one realm may read of why a
// plugin serving several is down. The log and the operator's status keep
// the whole error.
func WithoutOutput(err error) string {
	if err == nil {
		return ""
	}
	var oe *outputError
	if errors.As(err, &oe) {
		return strings.NewReplacer(oe.hide...).Replace(err.Error())
	}
	return err.Error()
}

// startProblem says in one line why go-plugin's start failed. go-plugin
// reports a process that died before the handshake as an unrecognised
// empty stdout line; a plugin that crashed wrote nothing to stdout.
func (s *starting) startProblem(err error) string {
	// exec's own "fork/exec PATH: permission denied" repeats the path
	// the error is labelled with and names the syscall.
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == "fork/exec" {
		return "start failed: it cannot be run: " + pe.Err.Error()
	}
	msg := err.Error()
	first, rest, _ := strings.Cut(msg, "\n")
	switch {
	case strings.HasPrefix(first, "Unrecognized remote plugin message:"):
		line := strings.TrimSpace(strings.TrimPrefix(first, "Unrecognized remote plugin message:"))
		if line == "" && strings.Contains(rest, "Failed to read any lines") {
			// go-plugin's scanner stops at an over-long line as it does
			// at the end of the output.
			if s.client.stdoutTooLong.Load() {
				return "start failed: it wrote a line of over 64 KiB to stdout instead of the handshake (a memhost plugin writes nothing else to stdout)"
			}
			return s.exitedProblem()
		}
		s.wrote = "it wrote " + strconv.Quote(clean(line)) + " to stdout"
		return "start failed: " + s.wrote + " instead of the handshake (a memhost plugin writes nothing else to stdout)"
	case first == "plugin exited before we could connect":
		return s.exitedProblem()
	case strings.HasPrefix(first, "timeout while waiting for plugin to start"):
		return fmt.Sprintf("start failed: no handshake within %s", s.timeout)
	case strings.HasPrefix(first, "error parsing core protocol version"), strings.HasPrefix(first, "Error parsing protocol version"):
		return "start failed: its handshake names a protocol version that is not a number"
	}
	// go-plugin's other refusals quote the handshake line's fields as the
	// plugin wrote them: escaped like its stdout above.
	return "start failed: " + clean(first)
}

// exitedProblem says why a process ended before its handshake: it
// exited, or it was still starting when its time ran out or its caller
// gave up, and was stopped.
func (s *starting) exitedProblem() string {
	waited := time.Since(s.began)
	select {
	case <-s.given:
		return fmt.Sprintf("start failed: no handshake in %s, when the start was given up and the process stopped", waited.Round(100*time.Millisecond))
	default:
	}
	if waited >= s.timeout {
		return fmt.Sprintf("start failed: no handshake within %s", s.timeout)
	}
	return "start failed: it exited before the handshake"
}

// handshakeProblem says what is wrong with the address and certificate a
// started plugin's handshake named ("" when nothing): a Unix socket must
// be one in the directory the host made for the process, a TCP address
// must be on loopback (protocol.md), and the line must carry the server
// certificate the host's TLS trusts. Without the check a plugin could
// point the host at any socket or any machine, and without a certificate
// go-plugin leaves the host trusting the system's roots instead.
func (s *starting) handshakeProblem(addr net.Addr, tlsConfig *tls.Config) string {
	switch a := addr.(type) {
	case *net.UnixAddr:
		path := filepath.Clean(a.Name)
		if filepath.Dir(path) != filepath.Clean(s.sockets) {
			return fmt.Sprintf("its handshake names the socket %s, outside the directory the host made for it (%s)", strconv.Quote(clean(a.Name)), s.sockets)
		}
		// A symlink in the directory could lead anywhere.
		if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != fs.ModeSocket {
			return fmt.Sprintf("its handshake names %s, which is not a socket", strconv.Quote(clean(a.Name)))
		}
	case *net.TCPAddr:
		if !a.IP.IsLoopback() {
			return fmt.Sprintf("its handshake names the address %s, which is not on loopback", strconv.Quote(clean(a.String())))
		}
	default:
		return fmt.Sprintf("its handshake names an address of network %s", strconv.Quote(clean(addr.Network())))
	}
	if tlsConfig != nil && tlsConfig.RootCAs == nil {
		return "its handshake carries no server certificate (the host asks every plugin for mutual TLS, PLUGIN_CLIENT_CERT)"
	}
	return ""
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

// Exited reports whether the plugin process has exited (a remote
// plugin's: whether the host closed the connection).
func (c *Conn) Exited() bool { return c.peer.Exited() }

// ExitStatus says how the plugin process ended, as its exit was reported
// ("exit status 7", "signal: segmentation fault"); "" while it runs, when
// it exited cleanly, or for a remote plugin.
func (c *Conn) ExitStatus() string {
	if c.exitStatus == nil {
		return ""
	}
	return c.exitStatus()
}

// Pid is the plugin's process id (0 when unknown, and for a remote one).
func (c *Conn) Pid() int { return c.peer.Pid() }

// peer is what a Conn is connected to.
type peer interface {
	Exited() bool
	Pid() int
	// Kill ends it: a started process is asked to exit, a remote
	// plugin's connection closed.
	Kill()
}

// processPeer is a process go-plugin started or reattached to.
type processPeer struct{ client *plugin.Client }

func (p processPeer) Exited() bool { return p.client.Exited() }
func (p processPeer) Kill()        { p.client.Kill() }
func (p processPeer) Pid() int {
	if rc := p.client.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

// Close shuts the plugin down gracefully, killing it if it does not stop
// within DefaultKillGrace.
func (c *Conn) Close() { c.Kill(DefaultKillGrace) }

// Kill asks the plugin to exit and sends SIGKILL if it has not within
// grace (at once when grace <= 0). It returns once the process is gone,
// or killWait after SIGKILL when go-plugin still holds on to it.
// A reattached plugin is not the host's to signal: Kill waits for its
// graceful exit. Concurrent and repeated calls are safe.
func (c *Conn) Kill(grace time.Duration) {
	c.once.Do(func() {
		if c.stopping != nil {
			c.stopping.Store(true)
		}
		go func() {
			c.peer.Kill()
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
	if c.kill == nil {
		// Not the host's to signal: it exits when it is asked to.
		<-c.done
		return
	}
	c.kill()
	t := time.NewTimer(killWait)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		if c.log != nil {
			c.log.Error("plugin killed, but its output is still held open (by a process it started that left its process group?); no longer waiting for it")
		}
	}
}
