package sdk

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"github.com/memhost/memhost/sdk/internal/wire"
	"google.golang.org/grpc"
)

func init() {
	wire.ServeConfigFunc = func(v any, logger hclog.Logger, test *plugin.ServeTestConfig) (*plugin.ServeConfig, error) {
		p, ok := v.(Plugin)
		if !ok {
			return nil, errors.New("the value served is not a memhost plugin (it has no Info and Configure)")
		}
		if err := CheckPlugin(p); err != nil {
			return nil, err
		}
		return serveConfig(p, logger, test), nil
	}
}

// CheckPlugin verifies that p's Info is well formed and that p implements
// every kind and capability it declares. Serve refuses to start otherwise,
// so a plugin author finds the mistake at once, not in production; call it
// from a unit test to find it sooner.
func CheckPlugin(p Plugin) error {
	info := p.Info()
	if err := checkInfo(info); err != nil {
		return err
	}
	for _, k := range info.Kinds {
		i, known := kindEntry(k)
		if !known {
			return fmt.Errorf("Info().Kinds names unknown kind %q", k)
		}
		if !kindTable[i].implements(p) {
			return fmt.Errorf("Info().Kinds declares %q, but the plugin lacks that kind's methods", k)
		}
	}
	for _, c := range info.Capabilities {
		i := capabilityIndex(c)
		if i < 0 {
			return fmt.Errorf("Info().Capabilities names unknown capability %q", c)
		}
		if !capabilityImpls[i].ok(p) {
			return fmt.Errorf("Info().Capabilities declares %q, but the plugin lacks that capability's methods", c)
		}
	}
	return nil
}

// checkInfo verifies the parts of an Info that do not need the plugin's Go
// value: a safe name, a semantic version, protocol 1 and at least one kind.
func checkInfo(info Info) error {
	if err := wire.ValidateToken(info.Name, 64); err != nil {
		return fmt.Errorf("Info().Name %v", err)
	}
	if !wire.IsSemver(info.Version) {
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

// Serve runs p as a plugin process. Call it from main; it returns only
// after the host has shut the plugin down, and closes p if it is an
// io.Closer. It exits the process if the host dies, so no plugin outlives
// its host even after the host was killed with SIGKILL. Started as
// `<plugin> serve --listen ADDR`, it serves hosts that dial it instead
// (remote.go); with --debug, one that reattaches (debug.go).
func Serve(p Plugin) {
	if err := CheckPlugin(p); err != nil {
		fmt.Fprintf(os.Stderr, "memhost plugin %q: %v\n", p.Info().Name, err)
		os.Exit(1)
	}
	if debugRequested() {
		serveDebug(p)
		return
	}
	if remoteRequested() {
		if err := serveRemote(p, os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "%s serve: %v\n", p.Info().Name, err)
			os.Exit(2)
		}
		return
	}
	// Standard error is a pipe to the host. Once the host is gone, a log
	// line written there would kill the process with SIGPIPE before it
	// closed its store; caught, the write just fails. (Caught rather than
	// ignored: an ignored signal stays ignored in a child the plugin runs.)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	logger := hclogTo(stderr)
	stdoutToStderr()
	go exitWithParent(p)
	plugin.Serve(serveConfig(p, logger, nil))
	closePlugin(p)
}

func serveConfig(p Plugin, logger hclog.Logger, test *plugin.ServeTestConfig) *plugin.ServeConfig {
	return &plugin.ServeConfig{
		HandshakeConfig:  wire.Handshake(),
		VersionedPlugins: map[int]plugin.PluginSet{ProtocolVersion: servedPluginSet(p)},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, serverOptions()...)...)
		},
		Logger: logger,
		Test:   test,
	}
}

// serverOptions are every server's: the wire limits and the request id
// interceptors.
func serverOptions() []grpc.ServerOption {
	return append(wire.ServerOptions(), grpc.ChainUnaryInterceptor(requestIDUnary), grpc.ChainStreamInterceptor(requestIDStream))
}

func closePlugin(p Plugin) {
	if c, ok := p.(io.Closer); ok {
		if err := c.Close(); err != nil {
			Logger().Error("close failed", "error", err)
		}
	}
}

// exitWithParent polls for the host's end: the plugin re-parented (its
// parent pid changed), or the host it was started by (wire.EnvHostPID) no
// longer running, which is how a plugin whose host died before it first
// read its parent learns it. Then it closes its store and exits.
func exitWithParent(p Plugin) {
	parent := os.Getppid()
	host, _ := strconv.Atoi(os.Getenv(wire.EnvHostPID))
	for {
		if os.Getppid() != parent || (host > 0 && !running(host)) {
			Logger().Warn("host process is gone; exiting", "parent_pid", parent)
			closePlugin(p)
			removeSocketDir()
			os.Exit(0)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// running reports whether process pid still runs (or cannot be told not
// to, as a process of another user).
func running(pid int) bool {
	proc, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	// Polled for the plugin's life: the pidfd it opened is closed now,
	// not at some later collection.
	defer proc.Release()
	return !errors.Is(proc.Signal(syscall.Signal(0)), os.ErrProcessDone)
}

// removeSocketDir removes the directory the host made for this process's
// socket, which the host, being gone, cannot. A directory the host did not
// make (an operator's PLUGIN_UNIX_SOCKET_DIR) is left alone.
func removeSocketDir() {
	dir := os.Getenv(plugin.EnvUnixSocketDir)
	if dir != "" && strings.HasPrefix(filepath.Base(dir), wire.SocketDirPrefix) {
		_ = os.RemoveAll(dir)
	}
}
