package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// Spec is one configured plugin instance. Each instance runs in its own
// process and is configured once per start.
type Spec struct {
	Kind   sdk.PluginKind
	Name   string // instance name from the config
	Plugin string // manifest name; "" for a remote plugin
	Config json.RawMessage
	// Remote, when set, is where a plugin the host does not start serves
	// (`<plugin> serve --listen`); Plugin and Config are unused.
	Remote *host.Remote
}

func (s Spec) key() string { return string(s.Kind) + "/" + s.Name }

// source names where the instance's plugin comes from in messages: its
// manifest name, or a remote one's address.
func (s Spec) source() string {
	if s.Remote != nil {
		return "remote " + s.Remote.Address
	}
	return s.Plugin
}

// Defaults of the supervision settings (the config file's supervisor
// block starts from these).
const (
	DefaultHealthInterval = 2 * time.Second
	DefaultHealthTimeout  = 5 * time.Second
	DefaultCallTimeout    = 10 * time.Second
	DefaultMaxBackoff     = 30 * time.Second
	// DefaultReindexTimeout bounds one reindex: rebuilding a large store's
	// index takes minutes, not the seconds of an ordinary call.
	DefaultReindexTimeout = 30 * time.Minute
	// DefaultConfigureTimeout bounds a plugin's Configure (opening its
	// store): a migration of a large store at an upgrade may need more
	// (supervisor.configure_timeout_ms).
	DefaultConfigureTimeout = 2 * time.Minute
)

// Options tune supervision. Zero values take the defaults.
type Options struct {
	StartOptions
	// ConfigureTimeout bounds a plugin's Configure call, which opens its
	// store (default DefaultConfigureTimeout).
	ConfigureTimeout time.Duration
	// HealthInterval is how often each plugin is pinged (default 2s).
	HealthInterval time.Duration
	// HealthTimeout bounds the ping (default 5s): a plugin that misses it
	// is killed and restarted.
	HealthTimeout time.Duration
	// KillGrace is how long a plugin being killed may exit cleanly before
	// SIGKILL (default 2s).
	KillGrace time.Duration
	// CallTimeout bounds every plugin call (default 10s); a caller's
	// sooner deadline (the recall timeout) wins.
	CallTimeout time.Duration
	// ReindexTimeout bounds a Reindex call instead (default 30m); a
	// caller's sooner deadline wins.
	ReindexTimeout time.Duration
	// MinBackoff and MaxBackoff bound the delay between restart attempts
	// of a plugin that keeps failing (defaults 100ms and 30s).
	MinBackoff, MaxBackoff time.Duration
	// ObserveCall, when set, is told the duration of every plugin call.
	ObserveCall CallObserver
	// RequireAll makes Start fail, stopping every instance, when any
	// instance fails to start. Without it such an instance backs off and
	// is retried, its calls refused as unavailable, while the others serve.
	RequireAll bool
	// BootWait bounds how long Start waits for the instances' first
	// starts without RequireAll: one still starting then (a store that
	// takes minutes to open) goes on in the background, its calls refused
	// as unavailable meanwhile, and the others serve. Zero waits for
	// every first start (a one-shot command needs its plugins up).
	BootWait time.Duration
}

// DefaultBootWait is serve's boot wait (supervisor.boot_wait_ms): past a
// binary's start timeout, so a plugin that starts and opens its store in
// seconds is waited for.
const DefaultBootWait = 15 * time.Second

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Verifier == nil {
		// Restarts of this host's plugins skip hashing an unchanged binary.
		o.Verifier = host.NewVerifier()
	}
	if o.ConfigureTimeout <= 0 {
		o.ConfigureTimeout = DefaultConfigureTimeout
	}
	if o.HealthInterval <= 0 {
		o.HealthInterval = DefaultHealthInterval
	}
	if o.HealthTimeout <= 0 {
		o.HealthTimeout = DefaultHealthTimeout
	}
	if o.KillGrace <= 0 {
		o.KillGrace = host.DefaultKillGrace
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.ReindexTimeout <= 0 {
		o.ReindexTimeout = DefaultReindexTimeout
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
}

// Supervisor owns the plugin processes of one host. Each instance has
// its own supervising goroutine; restarts run under the supervisor's
// lifetime, which Close ends.
type Supervisor struct {
	opts      Options
	entries   map[string]Entry
	instances map[string]*instance
	order     []*instance
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	vectors   atomic.Pointer[VectorHooks]
}

// VectorHooks let the host's semantic recall see the calls to providers
// that declared sdk.CapVectors.
type VectorHooks struct {
	// PrepareRecall completes a recall query before it is sent (it adds
	// the query's embedding) and answers why it added nothing, or "".
	PrepareRecall func(ctx context.Context, q *sdk.RecallQuery) string
	// Written is told the realm of every acknowledged write.
	Written func(realm string)
	// VectorRefused is told when a provider refused a recall for the
	// embedding PrepareRecall added; the recall is then sent without it.
	VectorRefused func(realm string, err error)
}

// SetVectorHooks installs h for every supervised provider's calls from
// now on.
func (s *Supervisor) SetVectorHooks(h VectorHooks) { s.vectors.Store(&h) }

type lexicalOnlyKey struct{}

// LexicalOnly marks ctx so that a recall made under it is sent as asked,
// without the embedding PrepareRecall would add: memhost bench times a
// hybrid store's lexical recall on the same index as its hybrid recall.
func LexicalOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, lexicalOnlyKey{}, true)
}

// New prepares a supervisor over the discovered plugins.
func New(entries []Entry, opts Options) *Supervisor {
	opts.defaults()
	byName := make(map[string]Entry, len(entries))
	for _, e := range entries {
		byName[e.Manifest.Name] = e
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Supervisor{opts: opts, entries: byName, instances: map[string]*instance{}, ctx: ctx, cancel: cancel}
}

// Start launches and configures every instance, in parallel and each
// within the start timeout. A spec that names no usable plugin fails
// Start. An instance that fails to start fails it too under RequireAll
// (every instance is then stopped, the errors returned one line per
// plugin); otherwise the failure is logged, the instance backs off in
// StateBackoff with the reason, and its supervisor retries it. When ctx
// ends before the starts do, every instance is stopped and Start fails.
func (s *Supervisor) Start(ctx context.Context, specs []Spec) error {
	var errs []error
	for _, spec := range specs {
		if _, dup := s.instances[spec.key()]; dup {
			errs = append(errs, fmt.Errorf("%s %q is configured twice", spec.Kind, spec.Name))
			continue
		}
		if spec.Remote != nil {
			inst := newInstance(spec, Entry{}, &s.opts)
			s.instances[spec.key()] = inst
			s.order = append(s.order, inst)
			continue
		}
		e, ok := s.entries[spec.Plugin]
		if !ok {
			errs = append(errs, fmt.Errorf("%s %q: no plugin named %q in the plugin directory (see `memhost plugins list`)", spec.Kind, spec.Name, spec.Plugin))
			continue
		}
		if !containsKind(e.Manifest.Kinds, spec.Kind) {
			errs = append(errs, fmt.Errorf("%s %q: plugin %q (%s) does not serve kind %s (it serves %q)", spec.Kind, spec.Name, spec.Plugin, e.ManifestPath, spec.Kind, e.Manifest.Kinds))
			continue
		}
		inst := newInstance(spec, e, &s.opts)
		inst.peers = func() []*instance { return s.order }
		s.instances[spec.key()] = inst
		s.order = append(s.order, inst)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// Each first start runs under ctx and ends when the supervisor does.
	launchCtx, cancelLaunch := context.WithCancel(ctx)
	stopWithSupervisor := context.AfterFunc(s.ctx, cancelLaunch)
	results := make([]error, len(s.order))
	booted := make([]chan struct{}, len(s.order))
	var wg sync.WaitGroup
	for i, inst := range s.order {
		booted[i] = make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(booted[i])
			conn, client, err := inst.launch(launchCtx)
			if err == nil && !inst.install(conn, client, false) {
				conn.Kill(0)
				err = fmt.Errorf("%s %q: host is shutting down: %w", inst.spec.Kind, inst.spec.Name, sdk.ErrUnavailable)
			}
			results[i] = err
		}()
	}
	go func() {
		wg.Wait()
		stopWithSupervisor()
		cancelLaunch()
	}()
	if s.opts.RequireAll || s.opts.BootWait <= 0 {
		wg.Wait()
	}
	if err := s.givenUp(ctx); err != nil {
		return err
	}
	if s.opts.RequireAll {
		if err := errors.Join(results...); err != nil {
			s.Close()
			return err
		}
	}
	// Without RequireAll the wait is bounded: an instance still starting
	// at the bound finishes in the background, so one slow store does not
	// hold every realm.
	began := time.Now()
	expired := make(chan struct{})
	bound := time.AfterFunc(s.opts.BootWait, func() { close(expired) })
	defer bound.Stop()
	for i, inst := range s.order {
		settle := func(late bool) {
			<-booted[i]
			// A start the host gave up (it is stopping) is no failure
			// of the plugin's.
			if err := results[i]; err != nil && ctx.Err() == nil && s.ctx.Err() == nil {
				inst.failed(err)
			} else if err == nil && late {
				inst.upLate(time.Since(began))
			}
		}
		select {
		case <-booted[i]:
		case <-expired:
		}
		// Started (or failed) within the bound: its state is settled
		// before Start returns. Else it is settled when its start ends.
		late := false
		select {
		case <-booted[i]:
			settle(false)
		default:
			late = true
			inst.startingLong(s.opts.BootWait)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if late {
				settle(true)
			}
			inst.run(s.ctx)
		}()
	}
	return s.givenUp(ctx)
}

// givenUp stops every instance and answers why when ctx, the boot's, ended
// (the host was told to stop while it started): what the plugins' starts
// answered then is no failure of theirs, and the caller stops too.
func (s *Supervisor) givenUp(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	s.Close()
	return fmt.Errorf("stopped while the plugins were starting: %w", context.Cause(ctx))
}

// Close stops supervision and shuts every plugin down. It does not wait
// for a restart under way (that is cancelled), only for each process to
// exit within the kill grace.
func (s *Supervisor) Close() {
	s.closeOnce.Do(func() {
		s.cancel()
		var wg sync.WaitGroup
		for _, inst := range s.order {
			wg.Add(1)
			go func() {
				defer wg.Done()
				inst.shutdown()
			}()
		}
		wg.Wait()
		s.wg.Wait()
	})
}

// Status describes one instance for /v1/plugins and `memhost plugins list`.
type Status struct {
	Instance     string           `json:"instance"`
	Kind         sdk.PluginKind   `json:"kind"`
	Plugin       string           `json:"name"`
	Version      string           `json:"version"`
	Kinds        []sdk.PluginKind `json:"kinds"`
	Protocols    []int            `json:"protocol"`
	Capabilities sdk.Capabilities `json:"capabilities"`
	Healthy      bool             `json:"healthy"`
	State        State            `json:"state"`
	Restarts     int              `json:"restarts"`
	// StartFailures counts failed start attempts since the last good one.
	StartFailures int `json:"start_failures"`
	// NextAttempt and BackoffMillis are set while the instance backs off.
	NextAttempt   *time.Time `json:"next_attempt,omitempty"`
	BackoffMillis int64      `json:"backoff_ms,omitempty"`
	Pid           int        `json:"pid,omitempty"`
	// Address is a remote plugin's (its host does not start it).
	Address   string `json:"address,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// Warnings are the latest warning and error lines the instance's
	// processes logged (a broken file a provider skipped, say), oldest
	// first.
	Warnings []string `json:"warnings,omitempty"`
}

// Status reports every instance in configuration order.
func (s *Supervisor) Status() []Status {
	out := make([]Status, 0, len(s.order))
	for _, inst := range s.order {
		st := inst.status()
		if st.Capabilities == nil {
			// A selector, compactor or resolver declares none: an empty
			// list, as the API document says, not null.
			st.Capabilities = sdk.Capabilities{}
		}
		out = append(out, st)
	}
	return out
}

// Ready reports whether every plugin is up.
func (s *Supervisor) Ready() bool {
	for _, inst := range s.order {
		if st := inst.status(); !st.Healthy || st.State != StateReady {
			return false
		}
	}
	return true
}

func (s *Supervisor) lookup(kind sdk.PluginKind, name string) (*instance, error) {
	inst, ok := s.instances[string(kind)+"/"+name]
	if !ok {
		return nil, fmt.Errorf("no %s instance named %q: %w", kind, name, sdk.ErrNotFound)
	}
	return inst, nil
}

func containsKind(kinds []sdk.PluginKind, k sdk.PluginKind) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}
