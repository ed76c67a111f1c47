package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// CallObserver is told the duration and outcome of every plugin call, of
// every kind, by instance and method, for the host's latency metrics.
type CallObserver func(instance, method string, took time.Duration, err error)

// observe reports one call; callWithin calls it for every kind alike.
func (i *instance) observe(method string, start time.Time, err error) {
	if i.opts.ObserveCall != nil {
		i.opts.ObserveCall(i.spec.Name, method, time.Since(start), err)
	}
}

// errBackingOff marks a call refused because a crashed plugin is waiting
// out its restart backoff past the call's deadline; it wraps
// sdk.ErrUnavailable for callers.
var errBackingOff = fmt.Errorf("waiting to restart: %w", sdk.ErrUnavailable)

// errExited is the reason recorded when a plugin process is gone.
var errExited = errors.New("process exited")

// State is where an instance is in its life, as /v1/plugins and /readyz
// show it. Every instance has the same states, whether the host starts
// its process, reattaches to one (debug mode) or dials a remote one:
// starting, then ready; when it dies or cannot start, restarting or (with
// the reason in Status.LastError) backoff until the next attempt.
type State string

const (
	StateStarting   State = "starting"   // the host's first start (or connection) is under way
	StateReady      State = "ready"      // a live, configured process serves calls
	StateRestarting State = "restarting" // a new process is being started (a remote one reconnected)
	StateBackoff    State = "backoff"    // unavailable: waiting out the delay before the next attempt
	StateStopped    State = "stopped"    // the host shut the instance down
)

// ErrProviderUnavailable marks a call refused because its provider
// instance is not serving: it could not start (a damaged store, a remote
// plugin out of reach) or is restarting past the call's deadline. The
// API answers it 503 provider_unavailable. Errors that match it also
// match sdk.ErrUnavailable.
var ErrProviderUnavailable = errors.New("provider unavailable")

// downError is an instance's refusal of a call while it does not serve;
// a provider's matches ErrProviderUnavailable, its text unchanged.
type downError struct {
	err      error
	provider bool
}

func (e *downError) Error() string { return e.err.Error() }
func (e *downError) Unwrap() error { return e.err }
func (e *downError) Is(target error) bool {
	return e.provider && target == ErrProviderUnavailable
}

// down marks err as the instance not serving.
func (i *instance) down(err error) error {
	return &downError{err: err, provider: i.spec.Kind == sdk.KindProvider}
}

// instance is one supervised plugin process and its kind client. Its own
// goroutine (run) health-checks it, kills it when it dies or hangs, and
// restarts it; callers never start processes, they wait for one.
type instance struct {
	spec  Spec
	entry Entry
	opts  *Options
	kick  chan struct{} // wakes run at once (buffered, never blocks)

	mu       sync.Mutex
	conn     *host.Conn
	client   any // the kind's host-side client
	info     sdk.Info
	changed  chan struct{} // closed and replaced whenever conn or state changes
	dying    []*host.Conn  // retired processes run has still to kill
	state    State
	closed   bool
	restarts int
	failures int // failed start attempts since the last good start
	// startedLong is set when the host stopped waiting for the first
	// start (Options.BootWait): calls fail fast until it ends.
	startedLong bool
	lastErr     error
	backoff     time.Duration // the delay the next backoff will wait
	wait        time.Duration // the delay before nextAttempt, for Status
	crashes     int           // crashes since the process last stayed up a minute
	nextAttempt time.Time
	upSince     time.Time
	warnings    warnings   // the latest warnings its processes logged
	badConn     *host.Conn // the process whose broken answer was last logged
	retriedConn *host.Conn // the process whose death under a call was last kept
	// peers are the supervisor's other instances (nil outside one): a
	// store another process holds is most often held by one of them.
	peers func() []*instance
}

func newInstance(spec Spec, e Entry, opts *Options) *instance {
	return &instance{spec: spec, entry: e, opts: opts, kick: make(chan struct{}, 1),
		changed: make(chan struct{}), state: StateStarting, backoff: opts.MinBackoff}
}

// startTimeout is how long one start may take: the host's setting, else
// the SDK's default for a binary or, longer, for a script.
func (i *instance) startTimeout() time.Duration {
	if i.opts.StartTimeout > 0 {
		return i.opts.StartTimeout
	}
	return host.DefaultStartTimeoutFor(i.entry.Interpreted)
}

// hostLog is the host's logger for lines about the instance: its warnings
// and errors are kept for /v1/plugins too, as the start's are.
func (i *instance) hostLog() hclog.Logger {
	return warnLogger{Logger: i.opts.Logger, w: &i.warnings}
}

// launch starts, verifies and configures a fresh process under ctx (the
// boot context, or the supervisor's own lifetime: never a caller's).
func (i *instance) launch(ctx context.Context) (*host.Conn, any, error) {
	startCtx, cancel := context.WithTimeout(ctx, i.startTimeout())
	defer cancel()
	opts := i.opts.StartOptions
	opts.Instance = i.spec.Name // the plugin's log lines carry the instance name
	opts.PluginLogger = warnLogger{Logger: opts.Logger, w: &i.warnings, fromPlugin: true}
	opts.Logger = warnLogger{Logger: opts.Logger, w: &i.warnings}
	if i.spec.Remote != nil {
		// A remote plugin configured itself where it runs: several hosts
		// share it, and it is not this host's to configure.
		conn, err := dial(startCtx, i.spec, opts)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %q: %w", i.spec.Kind, i.spec.Name, err)
		}
		return i.dispense(conn)
	}
	conn, err := Start(startCtx, i.entry, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %q: %w", i.spec.Kind, i.spec.Name, err)
	}
	// Configure opens the plugin's store, which may load a large index
	// (a 50k-file markdown root takes seconds), so it has its own bound.
	configCtx, cancelConfig := context.WithTimeout(ctx, i.opts.ConfigureTimeout)
	defer cancelConfig()
	// A Configure that takes long holds the host's start (or this
	// instance's restart): the log says which plugin it waits for, and
	// again as long as it waits, so a migration of minutes is not silence
	// (the plugin's own lines say what it does).
	stopNotices := i.configureNotices(time.Now())
	err = conn.Configure(configCtx, i.spec.Config)
	stopNotices()
	if err != nil && errors.Is(err, sdk.ErrUnavailable) && ctx.Err() == nil && (conn.Exited() || pingWithin(ctx, conn, i.opts.HealthTimeout) != nil) {
		// The process died configuring: how it ended says more than
		// its dropped connection ("error reading from server: EOF").
		if reason := downReason(conn, err); errors.Is(reason, errExited) {
			conn.Kill(0)
			return nil, nil, fmt.Errorf("%s %q: configure: %w: %w", i.spec.Kind, i.spec.Name, reason, sdk.ErrUnavailable)
		}
	}
	if err != nil {
		conn.Kill(0)
		// outOfTime, not configCtx.Err(): under load the plugin's copy of
		// the deadline can end the call (RST_STREAM CANCEL) before the
		// host's own timer has cancelled configCtx.
		if outOfTime(configCtx) && ctx.Err() == nil {
			return nil, nil, fmt.Errorf("%s %q: the plugin did not finish configuring (opening its store) within %s; a store that opens slower (a migration at an upgrade) needs a higher supervisor.configure_timeout_ms: %w",
				i.spec.Kind, i.spec.Name, i.opts.ConfigureTimeout, sdk.ErrUnavailable)
		}
		err = i.named(err)
		if held := i.peerProcesses(); held != "" && errors.Is(err, sdk.ErrConflict) {
			return nil, nil, fmt.Errorf("%s %q: %w (this host's other plugin processes: %s)", i.spec.Kind, i.spec.Name, err, held)
		}
		return nil, nil, fmt.Errorf("%s %q: %w", i.spec.Kind, i.spec.Name, err)
	}
	return i.dispense(conn)
}

// statedError is a refusal of a call in its own words, which say what
// err (its class, or the error the call met) would only repeat.
type statedError struct {
	msg string
	err error
}

func (e *statedError) Error() string { return e.msg }
func (e *statedError) Unwrap() error { return e.err }

// cause says why the instance is down, for a call it refuses, whose
// message names the plugin already: last less the plugin's output (any
// realm's data), the labels its start wrapped it in (kind and name, the
// executable's and manifest's paths) and the class the call's error
// carries anyway.
func (i *instance) cause(last error) string {
	if last == nil {
		return "not started yet"
	}
	msg := host.WithoutOutput(last)
	msg = strings.TrimPrefix(msg, fmt.Sprintf("%s %q: ", i.spec.Kind, i.spec.Name))
	where := i.entry.Executable
	if i.spec.Remote != nil {
		where = i.spec.Remote.Address
	}
	msg = strings.TrimPrefix(msg, fmt.Sprintf("plugin %s (%s): ", i.spec.Name, where))
	msg = strings.TrimSuffix(msg, fmt.Sprintf(" (manifest %s)", i.entry.ManifestPath))
	for _, class := range []error{sdk.ErrUnavailable, sdk.ErrPermission, sdk.ErrInvalid, sdk.ErrConflict} {
		if trimmed, ok := strings.CutSuffix(msg, ": "+class.Error()); ok && errors.Is(last, class) {
			return trimmed
		}
	}
	return msg
}

// roundBound rounds a call's time left, read a moment after its deadline
// was set, to the bound as configured (3s, not 2.999871s). Time left is
// never rounded to none: 4ms left reads as 4ms, not 0s.
func roundBound(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}

// callBound answers the bound a call has at now: the caller's deadline
// dl when it has one sooner than timeout, rounded (roundBound), else
// timeout; and whether the caller's deadline had already passed, giving
// the call no time at all (a flush whose earlier write used up their
// shared bound), which is said so, not as "no answer within 0s", which
// blamed the plugin. Whether it passed is read before rounding: a caller
// with 4ms left gave the call 4ms.
func callBound(now, dl time.Time, hasDeadline bool, timeout time.Duration) (bound time.Duration, spent bool) {
	if !hasDeadline {
		return timeout, false
	}
	left := dl.Sub(now)
	if left >= timeout {
		return timeout, false
	}
	if left <= 0 {
		return 0, true
	}
	return roundBound(left), false
}

// outOfTime reports whether ctx's deadline has passed, or all but: the
// plugin's side of a call, told the deadline, may end it a moment before
// the host's own timer fires.
func outOfTime(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < 500*time.Millisecond
}

// configureNotice is how long a Configure runs before the host logs that
// it waits for it; configureNoticeEvery is how often it says so again.
const (
	configureNotice      = 5 * time.Second
	configureNoticeEvery = 30 * time.Second
)

// configureNotices logs, from configureNotice after start and every
// configureNoticeEvery then, that the host still waits for the plugin's
// Configure, how long it has and which setting bounds it, until the
// returned func is called.
func (i *instance) configureNotices(start time.Time) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTimer(configureNotice)
		defer t.Stop()
		msg := "waiting for the plugin to configure (open its store)"
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			waited := time.Since(start)
			i.opts.Logger.Info(msg, "instance", i.spec.Name, "plugin", i.spec.source(),
				"waited_ms", waited.Milliseconds(), "limit_ms", i.opts.ConfigureTimeout.Milliseconds(),
				"setting", "supervisor.configure_timeout_ms")
			msg = "still waiting for the plugin to configure (open its store)"
			t.Reset(configureNoticeEvery)
		}
	}()
	return sync.OnceFunc(func() { close(done) })
}

// named answers err without the "plugin <instance>: " its connection put in
// front, for a message that names the instance already ("provider
// "main": plugin main: configure: ...").
func (i *instance) named(err error) error {
	rest, ok := strings.CutPrefix(err.Error(), "plugin "+i.spec.Name+": ")
	if !ok {
		return err
	}
	return &renamedError{msg: rest, err: err}
}

// renamedError is err said otherwise.
type renamedError struct {
	msg string
	err error
}

func (e *renamedError) Error() string { return e.msg }
func (e *renamedError) Unwrap() error { return e.err }

// peerProcesses names the running processes of the other instances, so a
// store "locked by another process (pid N)" can be told apart from another
// host's: two instances configured onto one store.
func (i *instance) peerProcesses() string {
	if i.peers == nil {
		return ""
	}
	var held []string
	for _, p := range i.peers() {
		if p == i {
			continue
		}
		p.mu.Lock()
		if p.conn != nil && !p.conn.Exited() {
			held = append(held, fmt.Sprintf("%s %q pid %d", p.spec.Kind, p.spec.Name, p.conn.Pid()))
		}
		p.mu.Unlock()
	}
	return strings.Join(held, ", ")
}

// dispense answers conn's client of the instance's kind; a plugin that
// does not serve the kind is refused.
func (i *instance) dispense(conn *host.Conn) (*host.Conn, any, error) {
	client, err := conn.Dispense(i.spec.Kind)
	if err != nil {
		conn.Kill(0)
		return nil, nil, fmt.Errorf("%s %q: %w", i.spec.Kind, i.spec.Name, err)
	}
	return conn, client, nil
}

// install makes conn the live process. It refuses (and the caller kills
// conn) when the host shut down meanwhile.
func (i *instance) install(conn *host.Conn, client any, restart bool) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return false
	}
	i.conn, i.client, i.info, i.lastErr, i.upSince = conn, client, conn.Info(), nil, time.Now()
	i.state, i.failures, i.nextAttempt, i.wait = StateReady, 0, time.Time{}, 0
	if restart {
		i.restarts++
	}
	i.changedLocked()
	return true
}

// changedLocked wakes every caller waiting for a change; i.mu is held.
func (i *instance) changedLocked() {
	close(i.changed)
	i.changed = make(chan struct{})
}

func (i *instance) wake() {
	select {
	case i.kick <- struct{}{}:
	default:
	}
}

// run supervises the instance until ctx ends: one goroutine per plugin,
// so a hung plugin never delays another's health check or restart.
func (i *instance) run(ctx context.Context) {
	t := time.NewTimer(i.opts.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-i.kick:
		case <-t.C:
		}
		t.Reset(i.step(ctx))
	}
}

// step does one round of supervision and answers when the next is due:
// kill what was retired, probe the live process, or start a new one when
// its backoff allows.
func (i *instance) step(ctx context.Context) time.Duration {
	for {
		i.mu.Lock()
		conn, dying, closed := i.conn, i.dying, i.closed
		i.dying = nil
		i.mu.Unlock()
		for _, d := range dying {
			// The old process must be gone before a new one starts: it
			// may hold its store's lock.
			d.Kill(i.opts.KillGrace)
		}
		if closed || ctx.Err() != nil {
			return time.Hour
		}
		if conn == nil {
			break
		}
		err := i.probe(ctx, conn)
		if err == nil || ctx.Err() != nil {
			return i.opts.HealthInterval
		}
		if err = downReason(conn, err); i.retire(conn, err) {
			i.hostLog().Warn("plugin failed its health check; killing it", "instance", i.spec.Name, "plugin", i.spec.source(), "error", err)
		}
	}

	i.mu.Lock()
	if d := time.Until(i.nextAttempt); d > 0 {
		i.mu.Unlock()
		return d
	}
	i.state = StateRestarting
	i.changedLocked()
	i.mu.Unlock()

	conn, client, err := i.launch(ctx)
	if ctx.Err() != nil {
		if conn != nil {
			conn.Kill(0)
		}
		return time.Hour
	}
	if err != nil {
		wait, failures := i.backOff(err)
		i.hostLog().Error("plugin restart failed", "instance", i.spec.Name, "plugin", i.spec.source(), "failures", failures, "retry_in_ms", wait.Milliseconds(), "error", err)
		return wait
	}
	i.mu.Lock()
	// A plugin never up before (its first starts failed) declared
	// nothing: what it declares now changes nothing.
	before, served, closed := i.info.Capabilities, i.info.Name != "", i.closed
	i.mu.Unlock()
	if closed {
		conn.Kill(0)
		return time.Hour
	}
	// Logged before the instance reads ready, so whoever sees it ready
	// (a health watcher, /v1/plugins) also sees what changed.
	i.hostLog().Warn("plugin restarted", "instance", i.spec.Name, "plugin", i.spec.source(), "pid", conn.Pid())
	// The manifest pins no capabilities, so a plugin whose Info is not
	// constant (it reads config, files or the environment) comes back
	// declaring others; the host serves what it now declares, and the
	// operator should hear of it.
	if after := conn.Info().Capabilities; served && !sameCapabilities(before, after) {
		i.hostLog().Warn("plugin restarted declaring other capabilities than before; serving what it declares now",
			"instance", i.spec.Name, "plugin", i.spec.source(), "before", fmt.Sprint(before), "after", fmt.Sprint(after))
	}
	if !i.install(conn, client, true) {
		conn.Kill(0)
		return time.Hour
	}
	return i.opts.HealthInterval
}

// sameCapabilities reports whether a and b declare the same capabilities,
// in any order.
func sameCapabilities(a, b sdk.Capabilities) bool {
	for _, c := range a {
		if !b.Has(c) {
			return false
		}
	}
	for _, c := range b {
		if !a.Has(c) {
			return false
		}
	}
	return true
}

// backOff records a failed start attempt: the instance is unavailable,
// with err as the reason, until the next attempt after a growing delay.
// It answers the delay and the failures so far.
func (i *instance) backOff(err error) (time.Duration, int) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.failures++
	i.lastErr = err
	i.wait = i.backoff
	i.nextAttempt = time.Now().Add(i.wait)
	i.backoff = min(i.backoff*2, i.opts.MaxBackoff)
	i.state = StateBackoff
	i.changedLocked()
	return i.wait, i.failures
}

// startingLong marks an instance whose first start the host stopped
// waiting for after waited: it goes on in the background.
func (i *instance) startingLong(waited time.Duration) {
	i.mu.Lock()
	i.startedLong = true
	i.mu.Unlock()
	i.hostLog().Warn("plugin is still starting; the host serves without it meanwhile, its calls refused as unavailable",
		"instance", i.spec.Name, "plugin", i.spec.source(), "waited_ms", waited.Milliseconds())
}

// upLate logs that an instance the host stopped waiting for at boot
// (startingLong) is up after waited: the log said it was still starting,
// and every 30 s that its Configure went on, but not when it ended.
func (i *instance) upLate(waited time.Duration) {
	i.opts.Logger.Info("plugin started after the host began serving; its calls are served now",
		"instance", i.spec.Name, "plugin", i.spec.source(), "waited_ms", waited.Milliseconds())
}

// failed records the first start's failure; the supervisor goroutine
// retries it after the backoff.
func (i *instance) failed(err error) {
	wait, _ := i.backOff(err)
	// The supervising goroutine, about to run, first wakes at the health
	// interval: woken now, it retries when the backoff says (a store a
	// killed host's plugin was still closing is free within a moment),
	// not a health interval later.
	i.wake()
	i.hostLog().Error("plugin failed to start; calls to it are refused as unavailable until a retry succeeds",
		"instance", i.spec.Name, "plugin", i.spec.source(), "retry_in_ms", wait.Milliseconds(), "error", err)
}

// probe is the health check: the process is alive and answers a ping
// within the health bound.
func (i *instance) probe(ctx context.Context, conn *host.Conn) error {
	if conn.Exited() {
		return errExited
	}
	return pingWithin(ctx, conn, i.opts.HealthTimeout)
}

// retire takes conn out of service if it is still the live process and
// hands it to run to kill. The first crash restarts at once; a plugin
// that keeps crashing waits out a growing backoff until it stays up a
// minute. It reports whether this call retired conn.
func (i *instance) retire(conn *host.Conn, reason error) bool {
	i.mu.Lock()
	if i.conn != conn {
		i.mu.Unlock()
		return false
	}
	i.conn, i.client = nil, nil
	i.dying = append(i.dying, conn)
	i.lastErr = reason
	if time.Since(i.upSince) > time.Minute {
		i.crashes, i.backoff = 0, i.opts.MinBackoff
	}
	if i.crashes == 0 {
		i.nextAttempt, i.wait, i.state = time.Time{}, 0, StateRestarting
	} else {
		i.wait = i.backoff
		i.nextAttempt = time.Now().Add(i.wait)
		i.backoff = min(i.backoff*2, i.opts.MaxBackoff)
		i.state = StateBackoff
	}
	i.crashes++
	i.changedLocked()
	i.mu.Unlock()
	i.wake()
	return true
}

// died tells whether a call's Unavailable error came from a dead process,
// retiring it if so, and why it is out of service. A ping that merely runs out of time proves nothing:
// run's health check, with its full bound, decides then.
func (i *instance) died(ctx context.Context, conn *host.Conn) (reason error, dead bool) {
	if conn.Exited() {
		reason = exitedError(conn)
		i.retire(conn, reason)
		return reason, true
	}
	err := pingWithin(ctx, conn, i.opts.HealthTimeout)
	switch {
	case err == nil:
		return nil, false
	case errors.Is(err, errNoAnswer) || ctx.Err() != nil:
		i.wake()
		return nil, false
	}
	reason = downReason(conn, err)
	i.retire(conn, reason)
	return reason, true
}

// downReason answers why conn's process is out of service after a ping
// failed with err: its exit, when it is seen exiting shortly (a process
// that died is seen exiting a moment after its connection drops, and its
// exit says more than the dropped connection), else err. A ping that ran
// out of time is a hung process's, which is not waited on.
func downReason(conn *host.Conn, err error) error {
	if errors.Is(err, errNoAnswer) {
		return err
	}
	for wait := time.Now().Add(exitNotice); !conn.Exited() && time.Now().Before(wait); {
		time.Sleep(10 * time.Millisecond)
	}
	if conn.Exited() {
		return exitedError(conn)
	}
	return err
}

// exitNotice bounds how long a call that lost its plugin waits to see the
// process's exit.
const exitNotice = 2 * time.Second

// exitedError is errExited with how the process ended, when known.
func exitedError(conn *host.Conn) error {
	if status := conn.ExitStatus(); status != "" {
		return fmt.Errorf("%w (%s)", errExited, status)
	}
	return errExited
}

// badAnswer logs the first answer of conn's process that broke the
// protocol, and keeps it among the instance's warnings: a broken plugin
// breaks every call alike, and each caller gets the error anyway.
func (i *instance) badAnswer(ctx context.Context, conn *host.Conn, err error) {
	i.mu.Lock()
	first := i.badConn != conn
	i.badConn = conn
	i.mu.Unlock()
	if !first {
		return
	}
	const msg = "plugin answered against the protocol; such an answer is refused, the call failing (logged once per process)"
	i.warnings.add(false, msg, []any{"error", err})
	log := i.opts.Logger.With(hclog.FromContext(ctx).ImpliedArgs()...)
	log.Warn(msg, "instance", i.spec.Name, "plugin", i.spec.source(), "error", err)
}

// retrying logs a call retried because conn's process died under it. Every
// call in flight on that process says so, but only the first is kept among
// the instance's warnings: a crash under load would otherwise push out
// what the host found before (a restart declaring other capabilities).
func (i *instance) retrying(ctx context.Context, conn *host.Conn) {
	i.mu.Lock()
	if i.closed {
		// The host's stop ended the process: no restart follows, and
		// the call's next await answers that it is shut down.
		i.mu.Unlock()
		return
	}
	first := i.retriedConn != conn
	i.retriedConn = conn
	i.mu.Unlock()
	log := i.opts.Logger
	if first {
		log = i.hostLog()
	}
	// With the request's attributes (its id) from the context logger.
	log = log.With(hclog.FromContext(ctx).ImpliedArgs()...)
	log.Warn("plugin died under a call; retrying once on the restarted process", "instance", i.spec.Name, "plugin", i.spec.source())
}

// errNoAnswer marks a ping that ran out of time.
var errNoAnswer = errors.New("no answer")

// pingWithin pings with a bound: go-plugin's Ping has no deadline, and a
// stopped process would otherwise hang the prober.
func pingWithin(ctx context.Context, conn *host.Conn, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- conn.Ping() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("ping: %w within %s: %w", errNoAnswer, d, sdk.ErrDeadline)
	case <-ctx.Done():
		return fmt.Errorf("ping: %w: %w", errNoAnswer, ctx.Err())
	}
}

// await answers the live client, waiting on the caller's own context
// while the supervisor restarts the plugin. A plugin that failed to start
// again, or backs off past the caller's deadline, fails the call fast
// with a typed error, so a crash loop never holds callers; a restart after
// a crash (once, or with a short backoff) is worth waiting for.
func (i *instance) await(ctx context.Context) (any, *host.Conn, error) {
	for {
		i.mu.Lock()
		if i.closed {
			i.mu.Unlock()
			return nil, nil, i.down(fmt.Errorf("plugin %s (%s) is shut down: %w", i.spec.Name, i.spec.source(), sdk.ErrUnavailable))
		}
		if i.conn != nil {
			c, conn := i.client, i.conn
			i.mu.Unlock()
			if conn.Exited() {
				// Gone since the last health check (a remote plugin's
				// connection may have reached another process): the call
				// waits for the restart rather than meet what this
				// connection's Info no longer describes.
				i.retire(conn, errExited)
				continue
			}
			return c, conn, nil
		}
		state, next, last, ch, failures, startedLong := i.state, i.nextAttempt, i.lastErr, i.changed, i.failures, i.startedLong
		i.mu.Unlock()
		if state == StateBackoff {
			if dl, ok := ctx.Deadline(); !ok || next.After(dl) || failures > 0 {
				return nil, nil, i.down(&statedError{msg: fmt.Sprintf("plugin %s (%s) is down: %s; next start attempt at %s",
					i.spec.Name, i.spec.source(), i.cause(last), next.UTC().Format(time.RFC3339)), err: errBackingOff})
			}
		}
		// A first start the host stopped waiting for at boot (a store
		// that takes minutes to open) fails a call fast too: the turn's
		// other realms are not held for it.
		if state == StateStarting && startedLong {
			return nil, nil, i.down(fmt.Errorf("plugin %s (%s) is still starting (opening its store): %w", i.spec.Name, i.spec.source(), sdk.ErrUnavailable))
		}
		// An attempt after a failed start is as unlikely to come back
		// within a call as the backoff before it: the call fails fast too,
		// rather than wait out its deadline on a plugin that keeps failing.
		if state == StateRestarting && failures > 0 {
			return nil, nil, i.down(&statedError{msg: fmt.Sprintf("plugin %s (%s) is down: %s; trying to start again after %d failed start(s)",
				i.spec.Name, i.spec.source(), i.cause(last), failures), err: errBackingOff})
		}
		i.wake()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, nil, i.down(fmt.Errorf("plugin %s (%s) is %s and was not back within the call's deadline: %w", i.spec.Name, i.spec.source(), state, sdk.ErrUnavailable))
		}
	}
}

// shutdown stops the instance for good and kills its processes, each
// within the kill grace.
func (i *instance) shutdown() {
	i.mu.Lock()
	i.closed = true
	i.state = StateStopped
	conns := i.dying
	if i.conn != nil {
		conns = append(conns, i.conn)
	}
	i.conn, i.client, i.dying = nil, nil, nil
	i.changedLocked()
	i.mu.Unlock()
	for _, c := range conns {
		c.Kill(i.opts.KillGrace)
	}
}

// capabilities answers what the plugin declared in its Info; it is read on
// every request, so it does not build a whole Status.
func (i *instance) capabilities() sdk.Capabilities {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.info.Name == "" {
		// Never up, so nothing declared yet: every capability is assumed,
		// so a call reaches await and is refused as unavailable (503), not
		// as unsupported (501) by a plugin that never said.
		return sdk.AllCapabilities()
	}
	return i.info.Capabilities
}

func (i *instance) status() Status {
	i.mu.Lock()
	defer i.mu.Unlock()
	st := Status{
		Instance: i.spec.Name, Kind: i.spec.Kind, Capabilities: i.info.Capabilities,
		Healthy: i.conn != nil && !i.conn.Exited(), State: i.state, Restarts: i.restarts, StartFailures: i.failures,
	}
	if m := i.entry.Manifest; m != nil {
		st.Plugin, st.Version, st.Kinds, st.Protocols = i.spec.Plugin, m.Version, m.Kinds, m.Protocols
	} else {
		// A remote plugin has no manifest: what it said of itself when
		// last reached.
		st.Address = i.spec.Remote.Address
		st.Plugin, st.Version, st.Kinds, st.Protocols = i.info.Name, i.info.Version, i.info.Kinds, i.info.Protocols
	}
	if i.conn != nil {
		st.Pid = i.conn.Pid()
	}
	if i.state == StateBackoff {
		next := i.nextAttempt.UTC()
		st.NextAttempt, st.BackoffMillis = &next, i.wait.Milliseconds()
	}
	if i.lastErr != nil {
		st.LastError = i.lastErr.Error()
	}
	st.Warnings = i.warnings.list()
	return st
}

// call runs f against the live client of kind C under the call's own
// deadline: the caller's when sooner, the call timeout otherwise (the
// HTTP request's timeout is far longer). When the plugin died under the
// call and retry is set, f runs once more on the restarted process: reads
// are safe to repeat, and so are writes that are idempotent by content
// hash or id.
func call[C any, T any](ctx context.Context, i *instance, method string, retry bool, f func(context.Context, C) (T, error)) (T, error) {
	return callWithin(ctx, i, method, i.opts.CallTimeout, retry, f)
}

// callWithin is call under a timeout of its own, for the long calls. It
// reports every call, of every kind, to the call observer as method.
func callWithin[C any, T any](ctx context.Context, i *instance, method string, timeout time.Duration, retry bool, f func(context.Context, C) (T, error)) (_ T, err error) {
	defer func(start time.Time) { i.observe(method, start, err) }(time.Now())
	var zero T
	// The bound the call had: the caller's deadline when sooner (a
	// recall's recall_timeout_ms), else the call timeout as configured,
	// not as much of it as was left a moment later.
	dl, hasDeadline := ctx.Deadline()
	bound, spent := callBound(time.Now(), dl, hasDeadline, timeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		raw, conn, err := i.await(ctx)
		if err != nil {
			return zero, err
		}
		v, err := f(ctx, raw.(C))
		if errors.Is(err, host.ErrBadAnswer) {
			err = fmt.Errorf("plugin %s (%s): %w", i.spec.Name, i.spec.source(), err)
			i.badAnswer(ctx, conn, err)
			return zero, err
		}
		if errors.Is(err, host.ErrOutdatedPlugin) {
			// Refused before the call: the plugin was built before a
			// field the call carries. The operator must know which.
			version := "?"
			if conn != nil {
				version = conn.Info().Version // a semantic version: CheckInfo held it to one
			}
			return zero, fmt.Errorf("plugin %s (%s, version %s): %w", i.spec.Name, i.spec.source(), version, err)
		}
		if err != nil && errors.Is(ctx.Err(), context.Canceled) {
			// The caller gave up (its HTTP client went away, an
			// interrupt): no bound ran out, and the plugin is not slow.
			return zero, &statedError{msg: fmt.Sprintf("plugin %s (%s): %s: canceled by its caller", i.spec.Name, i.spec.source(), method), err: context.Canceled}
		}
		if err != nil && outOfTime(ctx) && (errors.Is(err, sdk.ErrDeadline) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
			// Said with the plugin and the bound the call had, once:
			// gRPC's own text ("context deadline exceeded") repeats it.
			if spent {
				return zero, &statedError{msg: fmt.Sprintf("plugin %s (%s): %s: its caller's deadline had passed before the call began", i.spec.Name, i.spec.source(), method), err: err}
			}
			return zero, &statedError{msg: fmt.Sprintf("plugin %s (%s): %s: no answer within %s", i.spec.Name, i.spec.source(), method, bound), err: err}
		}
		if err == nil || !errors.Is(err, sdk.ErrUnavailable) {
			return v, err
		}
		reason, dead := i.died(ctx, conn)
		if !dead {
			// The live plugin itself answered unavailable (its database
			// down, say): the plugin's answer, not the instance's state.
			return zero, fmt.Errorf("plugin %s (%s): %w", i.spec.Name, i.spec.source(), err)
		}
		if !retry || attempt > 0 {
			// Said by how the process ended: the dropped connection's
			// words are gRPC's ("error reading from server: EOF").
			return zero, i.down(&statedError{msg: fmt.Sprintf("plugin %s (%s): %s: the call was lost: %s", i.spec.Name, i.spec.source(), method, i.cause(reason)), err: err})
		}
		i.retrying(ctx, conn)
	}
}
