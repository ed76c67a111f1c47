package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/guide"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/internal/config"
	"github.com/memhost/memhost/internal/hostkey"
	"github.com/memhost/memhost/internal/httpapi"
	"github.com/memhost/memhost/internal/hybrid"
	"github.com/memhost/memhost/internal/mcpserver"
	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/internal/statedb"
	"github.com/memhost/memhost/internal/turntrace"
	"github.com/memhost/memhost/sdk"
	sdkhost "github.com/memhost/memhost/sdk/host"
	"github.com/spf13/cobra"
)

func serveCommand() *cobra.Command {
	var cf configFlag
	var o serveOverrides
	var requireAll bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Start the plugins and serve the HTTP API",
		Long: `Start every configured plugin and serve the HTTP API (and MCP at /mcp).
Without --config memhost runs on its built-in defaults: 127.0.0.1:7077, the
SQLite provider for realm "default", plugins in ./plugins beside the binary,
data in ./memhost-data. Flags win over the config file.

The listen address is bound before any plugin starts, so a busy port fails
at once. SIGINT, SIGTERM or SIGHUP drain requests in flight, then stop the
plugins; a second signal cuts the drain short. A new config takes a restart
(there is no reload).`,
		Example: `  memhost serve
  memhost serve --config memhost.hcl
  memhost serve --listen 127.0.0.1:8080 --data-dir /var/lib/memhost --log-level debug`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cf.load(o.set)
			if err != nil {
				return err
			}
			cfg.Supervisor.RequireAll = requireAll
			return serve(cmd.Context(), cfg)
		},
	}
	cf.register(cmd)
	o.register(cmd)
	cmd.Flags().BoolVar(&requireAll, "require-all", false, "exit when any plugin instance cannot start (by default its realms answer 503 while the others serve, and it is retried)")
	return cmd
}

// serveOverrides are the flags that win over the config file.
type serveOverrides struct {
	listen, logLevel, dataDir, pluginDir string
}

func (o *serveOverrides) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.listen, "listen", "", "listen address host:port")
	cmd.Flags().StringVar(&o.logLevel, "log-level", "", "log level: trace, debug, info, warn or error")
	o.registerDataDir(cmd, "directory for plugin data and the host's state")
	o.registerPluginDir(cmd)
}

func (o *serveOverrides) registerDataDir(cmd *cobra.Command, usage string) {
	cmd.Flags().StringVar(&o.dataDir, "data-dir", "", usage)
}

func (o *serveOverrides) registerPluginDir(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.pluginDir, "plugin-dir", "", "directory holding plugin executables and their manifests (default: the config's)")
}

// set sets the given flags on cfg, before it is checked.
func (o *serveOverrides) set(cfg *config.Config) error {
	if o.listen != "" {
		cfg.Listen = o.listen
		cfg.SetByFlag("listen", "--listen")
	}
	if o.logLevel != "" {
		cfg.LogLevel = o.logLevel
		cfg.SetByFlag("log_level", "--log-level")
	}
	if o.dataDir != "" {
		abs, err := filepath.Abs(o.dataDir)
		if err != nil {
			return fmt.Errorf("--data-dir: %w", err)
		}
		cfg.DataDir = abs
	}
	if o.pluginDir != "" {
		abs, err := filepath.Abs(o.pluginDir)
		if err != nil {
			return fmt.Errorf("--plugin-dir: %w", err)
		}
		cfg.PluginDir = abs
	}
	return nil
}

// host is one running memhost: its plugins, its coordinator and its HTTP
// server.
type host struct {
	logger      hclog.Logger
	state       *statedb.DB
	stores      *sessionStores
	stopExpiry  func() // stops the session expiry loop and waits for it
	supervisor  *pluginhost.Supervisor
	coordinator *coordinator.Coordinator
	server      *httpapi.Server
	traces      *turntrace.Recorder
	console     interface{ Close() } // nil when the console is off
	// semantic is the realms' semantic recall (nil: none has an embedder);
	// stopSemantic stops its backlogs and waits for them.
	semantic     *hybrid.Engine
	stopSemantic func()
	// provider answers the provider serving a realm.
	provider func(realm string) (sdk.Provider, error)
}

// startHost discovers and starts every configured plugin and assembles the
// API on top of them.
func startHost(ctx context.Context, cfg *config.Config, logger hclog.Logger) (*host, error) {
	for _, w := range cfg.Warnings() {
		logger.Warn("config: " + w)
	}
	// A config naming a plugin the directory lacks, or one of another kind,
	// fails here, before the host writes its key or state.
	entries, refusals, err := discoverPlugins(cfg, logger)
	if err != nil {
		return nil, err
	}
	if err := ensureDataDir(cfg); err != nil {
		return nil, err
	}
	// The host's own state first: a data_dir that cannot hold it fails the
	// start before any plugin runs.
	hostKey, err := hostkey.Load(cfg.DataDir, cfg.HostKeyEnv, nil)
	if err != nil {
		return nil, err
	}
	state, err := statedb.Open(ctx, cfg.DataDir)
	if errors.Is(err, statedb.ErrInUse) {
		return nil, &dataDirInUse{dir: cfg.DataDir, addr: servedAddr(cfg.DataDir, "")}
	}
	if err != nil {
		return nil, err
	}
	// Holding the data directory, this host owns its serving.addr: one
	// there now is a killed server's, naming an address nothing answers.
	// A serve notes its own once it serves.
	_ = os.Remove(filepath.Join(cfg.DataDir, servingAddrFile))
	stores, err := openSessionStores(ctx, cfg, state, hostKey)
	if err != nil {
		state.Close()
		return nil, err
	}
	if len(stores.differ) > 0 {
		logger.Warn("another host sharing the session store started with other settings for these realms (provider, archive, embedder, budgets or session bounds): one session is then served by two sets of rules; give every host the same configuration", "realms", strings.Join(stores.differ, ","))
	}
	h := &host{logger: logger, state: state, stores: stores}
	if err := h.start(ctx, cfg, entries, refusals, stores.sessions, hostKey); err != nil {
		_ = stores.close() // the start fails with err; what is unmerged is replayed next time
		state.Close()
		return nil, err
	}
	expiryCtx, cancel := context.WithCancel(context.Background())
	expired := make(chan struct{})
	go func() {
		defer close(expired)
		runExpiry(expiryCtx, stores.expire, min(cfg.Sessions.IdleTTL/4, 10*time.Minute), func(err error) {
			logger.Warn("session expiry", "error", err)
		})
	}()
	h.stopExpiry = func() { cancel(); <-expired }
	return h, nil
}

// start launches the plugins and builds the coordinator and API over them.
func (h *host) start(ctx context.Context, cfg *config.Config, entries []pluginhost.Entry, refusals []error, sessions coordinator.SessionStore, hostKey []byte) error {
	logger := h.logger
	// Set below, before any provider call: the metrics read plugin health
	// from the supervisor, and the supervisor reports call latency to them.
	var metrics *httpapi.Metrics
	sup, err := startPlugins(ctx, cfg, logger, entries, refusals, func(instance, method string, took time.Duration, err error) {
		metrics.PluginCall(instance, method, took, err)
	})
	if err != nil {
		return err
	}
	providerOf, err := realmProviders(cfg, sup)
	if err != nil {
		sup.Close()
		return err
	}
	semantic, err := semanticRecall(cfg, sup, providerOf, logger)
	if err != nil {
		sup.Close()
		return err
	}
	metrics = httpapi.NewMetrics(sup, func(realm string) string {
		if inst, ok := cfg.ProviderForRealm(realm); ok {
			return inst.Name
		}
		return "none"
	})
	// Local state: a compaction records the session reset it owes, and
	// the gate lets the session's next turn complete it. Shared state
	// (PostgreSQL) resets in the compaction's own transaction instead.
	var gate *compaction.SessionGate
	if h.stores.compaction == nil {
		gate = compaction.NewSessionGate(sessions)
		sessions = gate
	}
	traces := turntrace.NewRecorder(h.stores.traces, turntrace.Options{
		Retention: cfg.Trace.Retention, MaxTurnsPerRealm: cfg.Trace.MaxTurnsPerRealm, Logger: logger.Named("trace"),
	})
	metrics.WatchTraces(traces.Dropped)
	coord, err := newCoordinator(cfg, sup, coordinator.ProvidersFunc(providerOf), metrics, logger, sessions, hostKey, traces)
	if err != nil {
		traces.Close()
		sup.Close()
		return err
	}
	comp, err := newCompaction(ctx, cfg, sup, h.state.SQL(), h.stores.compaction, coord, providerOf, logger)
	if err == nil && gate != nil {
		err = gate.Bind(ctx, comp)
	}
	if err != nil {
		coord.Close(ctx)
		traces.Close()
		sup.Close()
		return err
	}
	apiOpts := h.apiOptions(cfg, logger, providerOf, sup, metrics, coord, comp, traces)
	apiOpts.HostKey = hostKey
	if semantic != nil {
		apiOpts.Semantic = semantic
		metrics.WatchSemantic(semantic)
	}
	server := httpapi.New(apiOpts)
	h.supervisor, h.coordinator, h.server, h.provider, h.traces = sup, coord, server, providerOf, traces
	h.semantic, h.stopSemantic = semantic, runSemantic(semantic)
	return nil
}

// apiOptions wires the HTTP API over the started host's parts.
func (h *host) apiOptions(cfg *config.Config, logger hclog.Logger, providerOf func(string) (sdk.Provider, error), sup *pluginhost.Supervisor,
	metrics *httpapi.Metrics, coord *coordinator.Coordinator, comp *compaction.Service, traces *turntrace.Recorder) httpapi.Options {
	realms := make([]string, len(cfg.Realms))
	for i, r := range cfg.Realms {
		realms[i] = r.Name
	}
	var tokens []httpapi.Token
	for _, t := range cfg.Tokens {
		tokens = append(tokens, httpapi.Token{Name: t.Name, Secret: t.Secret, Realms: t.Realms, Role: t.Role, Identities: t.Identities, MaxInFlight: t.MaxInFlight})
	}
	return httpapi.Options{
		Logger:       logger.Named("http"),
		Provider:     providerOf,
		DefaultRealm: cfg.DefaultRealm,
		Realms:       realms,
		Tokens:       tokens,
		Plugins:      sup,
		MaxBodyBytes: cfg.Server.MaxBodyBytes,
		Metrics:      metrics,
		// One reindex may run as long as the supervisor lets its call.
		ReindexTimeout:     cfg.Supervisor.ReindexTimeout,
		Coordinator:        coord,
		Guide:              guide.NewSessions(coord, guide.SessionsOptions{Size: cfg.Coordinator.SessionCacheSize, Logger: logger}),
		Compaction:         comp,
		Proposals:          h.proposalQueue(cfg),
		ProposalRetryAfter: cfg.Proposals.RetryAfter,
		Traces:             traces,
		ReadyChecks:        readyChecks(h.stores),
		MCP: func(bind func(http.Header) (mcpserver.Caller, error)) http.Handler {
			return mcpserver.Handler(mcpserver.Options{Version: version, Provider: providerOf, Coordinator: coord, Bind: bind, Logger: logger.Named("mcp"),
				Proposals: h.proposalQueue(cfg), ProposalRetryAfter: cfg.Proposals.RetryAfter, Traces: traces})
		},
	}
}

// discoverPlugins finds the plugin directory's plugins, logs what their
// manifests say and what was refused, and checks every instance's config
// against its plugin's declared schema, all problems at once, before any
// plugin process starts.
func discoverPlugins(cfg *config.Config, logger hclog.Logger) ([]pluginhost.Entry, []error, error) {
	entries, refusals, err := pluginhost.Discover(cfg.PluginDir)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range refusals {
		logger.Error(r.Error())
	}
	for _, e := range entries {
		for _, w := range e.Manifest.Warnings {
			logger.Warn(w, "plugin", e.Manifest.Name, "manifest", e.ManifestPath)
		}
	}
	if dropAbsentCompactor(cfg, entries) {
		logger.Warn("compaction is off: the default compactor's plugin is not in the plugin directory", "plugin", config.DefaultCompactorPlugin, "plugin_dir", cfg.PluginDir)
	}
	if err := cfg.CheckPlugins(declared(entries, refusals)); err != nil {
		return nil, nil, err
	}
	return entries, refusals, nil
}

// dropAbsentCompactor turns compaction off when the configuration did not
// name a compactor and the default one's plugin is not among entries, as
// serve and plugins verify both do; it reports whether it did.
func dropAbsentCompactor(cfg *config.Config, entries []pluginhost.Entry) bool {
	return !slices.ContainsFunc(entries, func(e pluginhost.Entry) bool { return e.Manifest.Name == config.DefaultCompactorPlugin }) && cfg.DropImplicitCompactor()
}

// declared is what the plugin directory's manifests declare, which the
// config is checked against before anything starts, and why a named
// plugin's manifest was refused, so an instance naming it says why.
func declared(entries []pluginhost.Entry, refusals []error) map[string]config.Plugin {
	plugins := make(map[string]config.Plugin, len(entries))
	for _, err := range refusals {
		var r *pluginhost.Refusal
		if errors.As(err, &r) {
			plugins[r.Plugin] = config.Plugin{Refused: r.Reason}
		}
	}
	// Another manifest of the same name that was not refused is the one
	// the host runs.
	for _, e := range entries {
		plugins[e.Manifest.Name] = config.Plugin{Kinds: e.Manifest.Kinds, Schema: e.Manifest.ConfigSchema}
	}
	return plugins
}

// hostSecretEnv names the variables holding the host's own secrets: its
// tokens', its host key's and the client token (TokenEnv) of `memhost mcp`.
// No plugin needs them, and one holding a token could act on its realms.
func hostSecretEnv(cfg *config.Config) []string {
	names := []string{TokenEnv}
	if cfg.HostKeyEnv != "" {
		names = append(names, cfg.HostKeyEnv)
	}
	for _, t := range cfg.Tokens {
		names = append(names, t.SecretEnv)
	}
	return names
}

// startPlugins starts every configured instance under a supervisor; a
// failure names the instance and joins the directory's refusals.
func startPlugins(ctx context.Context, cfg *config.Config, logger hclog.Logger, entries []pluginhost.Entry, refusals []error, observe pluginhost.CallObserver) (*pluginhost.Supervisor, error) {
	sv := cfg.Supervisor
	sup := pluginhost.New(entries, pluginhost.Options{
		StartOptions: pluginhost.StartOptions{
			Logger: logger.Named("plugin"), Dir: cfg.DataDir, Withhold: hostSecretEnv(cfg),
			Host: sdkhost.Host{Version: version, Capabilities: sdkhost.HostCapabilities()},
		},
		CallTimeout:      sv.CallTimeout,
		HealthInterval:   sv.HealthInterval,
		HealthTimeout:    sv.HealthTimeout,
		KillGrace:        sv.KillGrace,
		MaxBackoff:       sv.MaxBackoff,
		ReindexTimeout:   sv.ReindexTimeout,
		BootWait:         sv.BootWait,
		ConfigureTimeout: sv.ConfigureTimeout,
		ObserveCall:      observe,
		RequireAll:       sv.RequireAll,
	})
	var specs []pluginhost.Spec
	for _, inst := range cfg.Instances {
		spec := pluginhost.Spec{Kind: inst.Kind, Name: inst.Name, Plugin: inst.Plugin, Config: inst.Config}
		if r := inst.Remote; r != nil {
			spec.Remote = &sdkhost.Remote{Address: r.Address, CertFile: r.TLSCert, KeyFile: r.TLSKey, CAFile: r.TLSCA, ServerName: r.ServerName}
		}
		specs = append(specs, spec)
	}
	started := time.Now()
	if err := sup.Start(ctx, specs); err != nil {
		if len(refusals) > 0 {
			err = errors.Join(append([]error{err}, refusals...)...)
		}
		return nil, fmt.Errorf("starting plugins: %w", err)
	}
	logger.Info("plugins started", "count", len(specs), "all_ready", sup.Ready(), "elapsed_ms", time.Since(started).Milliseconds())
	return sup, nil
}

// realmProviders answers the lookup of each realm's supervised provider.
func realmProviders(cfg *config.Config, sup *pluginhost.Supervisor) (func(realm string) (sdk.Provider, error), error) {
	providers := map[string]sdk.Provider{}
	for _, inst := range cfg.InstancesOf(sdk.KindProvider) {
		p, err := sup.Provider(inst.Name)
		if err != nil {
			return nil, err
		}
		providers[inst.Name] = p
	}
	return func(realm string) (sdk.Provider, error) {
		inst, ok := cfg.ProviderForRealm(realm)
		if !ok {
			return nil, fmt.Errorf("no provider serves realm %q: %w", realm, sdk.ErrNotFound)
		}
		return providers[inst.Name], nil
	}, nil
}

// newCoordinator builds the coordinator from the config's coordinator
// settings (already checked by the coordinator's own rules at load) and
// hands it the configured selector and resolvers.
func newCoordinator(cfg *config.Config, sup *pluginhost.Supervisor, providers coordinator.Providers, metrics coordinator.Metrics, logger hclog.Logger, sessions coordinator.SessionStore, hostKey []byte, trace coordinator.TraceSink) (*coordinator.Coordinator, error) {
	cc := cfg.Coordinator
	// The coordinator names its logger itself.
	opts := coordinator.Options{Providers: providers, Logger: logger, Metrics: metrics, Sessions: sessions, HostKey: hostKey, Trace: trace}
	if cc.Selector != "" {
		sel, err := sup.Selector(cc.Selector)
		if err != nil {
			return nil, err
		}
		opts.Selector = sel
	}
	if cc.MobResolver != "" {
		mobs, err := sup.MobResolver(cc.MobResolver)
		if err != nil {
			return nil, err
		}
		opts.MobResolver = mobs
	}
	if cc.OperatorResolver != "" {
		op, err := sup.OperatorResolver(cc.OperatorResolver)
		if err != nil {
			return nil, err
		}
		opts.OperatorResolver = op
	}
	coord, err := coordinator.New(cfg.CoordinatorConfig(), opts)
	if err != nil {
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	return coord, nil
}

func (h *host) close() {
	h.stopPlugins()
	h.closeState()
}

// stopPlugins stops what runs on the plugins, then the plugins: a call
// still waiting on one fails at once (503), which a request still in
// flight at the end of the drain answers. Safe to call more than once.
func (h *host) stopPlugins() {
	// Flush ledger rows and usage marks while the plugins still run.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.coordinator.Close(ctx); err != nil {
		h.logger.Warn("coordinator close", "error", err)
	}
	if h.console != nil {
		h.console.Close()
	}
	h.traces.Close()
	if h.stopSemantic != nil {
		h.stopSemantic()
	}
	h.supervisor.Close()
}

// closeState closes the host's own state, after stopPlugins: sweeps
// finishing during the coordinator's close, and compactions, still write.
func (h *host) closeState() {
	h.stopExpiry()
	if err := h.stores.close(); err != nil {
		h.logger.Warn("session store close: what its journal holds is merged at the next start", "error", err)
	}
	if err := h.state.Close(); err != nil {
		h.logger.Warn("state database close", "error", err)
	}
}

// realmMap renders realm → provider instance for the start-up log line.
func realmMap(cfg *config.Config) string {
	var parts []string
	for _, r := range cfg.Realms {
		parts = append(parts, r.Name+"→"+r.Provider)
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// stopSignals end a command cleanly, whichever runs: SIGHUP (the terminal
// closing, or a reload some service managers send) is a stop like the
// others, not the default's exit on the spot, which skipped the drain and
// left plugins, session journal and a partial export unclosed. There is no
// reload: a new config takes a restart.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// maxHeaderBytes bounds a request's header: far past what a client, a
// proxy or the console's cookie sends, where Go's default (1 MiB) let each
// connection, before any token was checked, hold a megabyte for the read
// header timeout, and a thousand of them a gigabyte.
const maxHeaderBytes = 64 << 10

func serve(ctx context.Context, cfg *config.Config) error {
	logger := newLogger(cfg)
	// The first stop signal cancels ctx (the start, or the serving); a
	// second one, left in sigs, cuts the drain short.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, stopSignals...)
	defer signal.Stop(sigs)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-sigs:
			stop()
		case <-ctx.Done():
		}
	}()

	// Bound first: a busy port must fail before minutes of plugin start.
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		// Go's error repeats the address and names the syscall
		// ("listen tcp ADDR: bind: address already in use").
		return fmt.Errorf("listen on %s: %s", cfg.Listen, plainNetProblem(err))
	}
	defer ln.Close()
	logger.Info("memhost starting", "version", version, "commit", commit, "realms", realmMap(cfg))

	// Served from the start: while the plugins start, every request is
	// answered (503, /healthz alive, /readyz not ready) rather than held
	// unanswered on an accepted connection.
	var api atomic.Pointer[http.Handler]
	starting := httpapi.Starting()
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if h := api.Load(); h != nil {
				(*h).ServeHTTP(w, r)
				return
			}
			starting.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       cfg.Server.ReadTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	h, err := startHost(ctx, cfg, logger)
	var inUse *dataDirInUse
	if errors.As(err, &inUse) {
		err = fmt.Errorf("%w: stop it first, or give this one its own --data-dir", err)
	}
	if err != nil {
		srv.Close()
		if ctx.Err() != nil {
			// SIGTERM while starting: a stop, as once serving, whatever
			// the start under way answered to being cut short.
			logger.Info("shutting down while starting")
			return nil
		}
		return err
	}
	stopPlugins := sync.OnceFunc(h.stopPlugins)
	defer h.closeState()
	defer stopPlugins()
	// Beside the state the host holds, for `memhost mcp` to name when it
	// finds the data directory in use (the config's listen may have been
	// overridden by --listen, or be port 0).
	addrFile := filepath.Join(cfg.DataDir, servingAddrFile)
	if err := os.WriteFile(addrFile, []byte(dialable(ln.Addr())+"\n"), 0o600); err != nil {
		logger.Debug("could not note the address served in the data directory", "error", err)
	}
	defer os.Remove(addrFile)
	handler := h.handler(cfg)
	api.Store(&handler)
	logger.Info("memhost listening", "addr", ln.Addr().String(), "plugin_dir", cfg.PluginDir, "data_dir", cfg.DataDir, "state_db", h.state.Path())
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout)
	defer cancel()
	drained := make(chan error, 1)
	go func() { drained <- srv.Shutdown(shutdownCtx) }()
	var drainErr error
	select {
	case drainErr = <-drained:
		if drainErr != nil {
			logger.Warn("requests still running at the end of the drain (server.shutdown_timeout_ms); stopping the plugins under them",
				"shutdown_timeout_ms", cfg.Server.ShutdownTimeout.Milliseconds())
		}
	case sig := <-sigs:
		// A second signal: the operator will not wait out the drain, as
		// with any server. Once, and said once; later signals are taken
		// and ignored, so the plugins are still stopped.
		logger.Warn("second stop signal: skipping the rest of the drain; stopping the plugins under the requests still running", "signal", sig.String())
		cancel()
		drainErr = <-drained
	}
	if drainErr != nil {
		// What is still running waits on a plugin (a hung one, a long
		// reindex) or on work past the bound. Stopping the plugins fails
		// its calls, and each request answers that (503, or a streamed
		// answer's error line) before its connection closes, rather than
		// lose the connection without a status when the process exits.
		stopPlugins()
		answerCtx, cancelAnswer := context.WithTimeout(context.Background(), answerGrace)
		defer cancelAnswer()
		if err := srv.Shutdown(answerCtx); err != nil {
			logger.Warn("requests still unanswered after the plugins stopped; closing their connections")
			srv.Close()
		}
	}
	return nil
}

// answerGrace bounds how long requests still running at the end of the
// drain may take to answer once the plugins under them have stopped.
const answerGrace = 2 * time.Second

// servingAddrFile, in the data directory, holds the address a running
// serve answers on.
const servingAddrFile = "serving.addr"

// dialable is addr as a client on this machine dials it: an unspecified
// address (0.0.0.0, ::) is reached through loopback.
func dialable(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return addr.String()
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp.Port))
}

// dataDirInUse is a start refused because another memhost holds the
// data directory: said by the directory and the address the holder
// serves on (none when it serves nothing: memhost mcp, a --local
// command), not by the state database's lock file, which the operator
// never named.
type dataDirInUse struct{ dir, addr string }

func (e *dataDirInUse) Error() string {
	if e.addr == "" {
		return fmt.Sprintf("data directory %s is in use by another memhost", e.dir)
	}
	return fmt.Sprintf("data directory %s is in use by another memhost, serving at %s", e.dir, e.addr)
}

func (e *dataDirInUse) Unwrap() error { return statedb.ErrInUse }

// servedAddr answers the address a serve holding dataDir answers on, as
// it noted it, or fallback when it noted none.
func servedAddr(dataDir, fallback string) string {
	b, err := os.ReadFile(filepath.Join(dataDir, servingAddrFile))
	if err != nil {
		return fallback
	}
	addr := strings.TrimSpace(string(b))
	if _, _, err := net.SplitHostPort(addr); err != nil || len(addr) > 256 {
		return fallback
	}
	return addr
}
