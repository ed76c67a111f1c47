package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
	"github.com/memhost/memhost/sdk/tokenize"
)

// maxQueryBytes bounds the text a query is built from: relevance needs the
// start of a message, and enormous content must not cost more.
const maxQueryBytes = 4 << 10

// Providers finds the provider that serves a realm. A realm it does not
// know is an error wrapping sdk.ErrNotFound.
type Providers interface {
	Provider(realm string) (sdk.Provider, error)
}

// ProvidersFunc adapts a function to Providers.
type ProvidersFunc func(realm string) (sdk.Provider, error)

func (f ProvidersFunc) Provider(realm string) (sdk.Provider, error) { return f(realm) }

// RealmProviders serves a fixed realm-to-provider map.
type RealmProviders map[string]sdk.Provider

func (m RealmProviders) Provider(realm string) (sdk.Provider, error) {
	if p, ok := m[realm]; ok && p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("no provider serves realm %q: %w", realm, sdk.ErrNotFound)
}

// Options are a coordinator's collaborators. Only Providers is required.
type Options struct {
	Providers        Providers
	Selector         sdk.Selector
	OperatorResolver sdk.OperatorResolver
	MobResolver      sdk.MobResolver
	// Sessions holds per-session state; default an in-memory LRU of
	// Config.SessionCacheSize sessions per realm. Coordinators given the
	// same store share budgets and dedup sets.
	Sessions SessionStore
	// StoreTimeout bounds each visit to Sessions (default
	// DefaultStoreTimeout); a caller's sooner deadline wins. A hung shared
	// store then fails the turn, or drops a sweep's picks, instead of
	// pinning the goroutine that asked.
	StoreTimeout time.Duration
	// HostKey derives session nonces (DeriveNonce), at least
	// MinHostKeyBytes long; default a random key, so nonces change when
	// the process does. Coordinators given the same key mint the same
	// nonces.
	HostKey []byte
	Logger  hclog.Logger
	Metrics Metrics
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// Trace, when set, receives every turn's trace (trace.go).
	Trace TraceSink
}

// DefaultStoreTimeout is Options.StoreTimeout's default: a session store
// answers in milliseconds, so seconds mean it is stuck.
const DefaultStoreTimeout = 5 * time.Second

// Coordinator is the recall coordinator (DESIGN 5). It is safe for
// concurrent use; share one pointer, and every caller shares its session
// state.
type Coordinator struct {
	cfg       Config
	env       *Envelope
	defang    *Defanger // nil when defanging is off
	providers Providers
	selector  sdk.Selector
	operators sdk.OperatorResolver
	mobs      sdk.MobResolver
	store     SessionStore
	storeTime time.Duration // bounds each store visit
	hostKey   []byte
	logger    hclog.Logger
	metrics   Metrics
	now       func() time.Time
	telemetry *telemetry
	// defangLog and scopeFaults bound the log lines of defang hits (per
	// identity) and of plugins answering outside their query's scopes or
	// resolvers answering unusable names (per realm and call).
	defangLog   tallyLog[sdk.Identity]
	scopeFaults tallyLog[[2]string]
	trace       TraceSink

	// inbound admits the defanging of large inbound texts (inboundgate.go).
	inbound *inboundGate

	// skipLog rate-limits the skip and selector-fallback lines, per
	// (identity, reason).
	skipLog tallyLog[skipKey]

	sweepCtx    context.Context
	stopSweeps  context.CancelFunc
	sweeps      sync.WaitGroup
	sweepsStart sync.Mutex // orders sweeps.Add against Close's Wait; guards sweeping
	closed      bool
	// sweeping holds the sessions with a background sweep running here.
	// It is per process: two hosts sweeping one session at once only
	// duplicate work.
	sweeping map[SessionKey]struct{}
}

type skipKey struct {
	realm, identity string
	reason          SkipReason
}

// New builds a coordinator. cfg must be valid (start from DefaultConfig).
func New(cfg Config, opts Options) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Providers == nil {
		return nil, fmt.Errorf("coordinator: no provider lookup: %w", sdk.ErrInvalid)
	}
	if opts.HostKey != nil && len(opts.HostKey) < MinHostKeyBytes {
		return nil, fmt.Errorf("coordinator: the host key is %d bytes, at least %d are needed: %w", len(opts.HostKey), MinHostKeyBytes, sdk.ErrInvalid)
	}
	env, err := NewEnvelope(cfg)
	if err != nil {
		return nil, err
	}
	c := &Coordinator{
		cfg: cfg, env: env, defang: env.defang, providers: opts.Providers,
		selector: opts.Selector, operators: opts.OperatorResolver, mobs: opts.MobResolver,
		store: opts.Sessions, storeTime: opts.StoreTimeout, hostKey: slices.Clone(opts.HostKey), logger: opts.Logger, metrics: opts.Metrics, now: opts.Now,
		trace:       opts.Trace,
		sweeping:    map[SessionKey]struct{}{},
		inbound:     newInboundGate(),
		skipLog:     newTallyLog(skipLogEvery, maxSkipLogKeys, func(k skipKey) string { return k.realm }),
		defangLog:   newTallyLog(defangLogEvery, maxDefangLogIdentities, func(id sdk.Identity) string { return id.Realm }),
		scopeFaults: newTallyLog(scopeFaultEvery, maxScopeFaultKeys, func(k [2]string) string { return k[0] }),
	}
	if c.store == nil {
		c.store = NewMemoryStore(cfg.SessionCacheSize)
	}
	if c.storeTime <= 0 {
		c.storeTime = DefaultStoreTimeout
	}
	if c.hostKey == nil {
		c.hostKey = NewHostKey()
	}
	if c.logger == nil {
		c.logger = hclog.NewNullLogger()
	}
	c.logger = c.logger.Named("coordinator")
	if c.metrics == nil {
		c.metrics = NopMetrics{}
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.mobs, c.operators = cacheResolvers(cfg.ResolverCacheTTL, c.now, c.mobs, c.operators)
	c.telemetry = newTelemetry(cfg.TelemetryQueue, c.logger, c.metrics)
	c.sweepCtx, c.stopSweeps = context.WithCancel(context.Background())
	if cfg.PerTurnInjection == InjectionOff {
		c.logger.Info("per-turn injection is off: turns inject nothing", "skip_reason", SkipInjectionOff)
	}
	if !cfg.DefangInbound {
		c.logger.Warn("inbound defanging is off: forged memory markers reach the model unchanged")
	}
	if cfg.OperatorScope == OperatorScopeProvisional && opts.OperatorResolver == nil {
		c.logger.Info("operator_scope is provisional but no operator resolver is installed: operator scope stays off")
	}
	return c, nil
}

// Config answers the coordinator's configuration.
func (c *Coordinator) Config() Config { return c.cfg }

// Envelope answers the envelope the coordinator renders with.
func (c *Coordinator) Envelope() *Envelope { return c.env }

// Flush waits until every ledger row and usage mark queued so far has
// been handed to its provider.
func (c *Coordinator) Flush(ctx context.Context) error { return c.telemetry.flush(ctx) }

// Close stops background sweeps and writes what telemetry is queued. The
// coordinator must not be used afterwards.
func (c *Coordinator) Close(ctx context.Context) error {
	c.sweepsStart.Lock()
	c.closed = true
	c.sweepsStart.Unlock()
	c.stopSweeps()
	done := make(chan struct{})
	go func() { c.sweeps.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return c.telemetry.close(ctx)
}

// TurnInjection is InjectForTurn's answer, shaped like the HTTP API's.
// InjectedContext holds the bodies to deliver beside the user's message
// (never inside it); it is empty exactly when SkipReason is set.
type TurnInjection struct {
	InjectedContext []string   `json:"injected_context"`
	SkipReason      SkipReason `json:"skip_reason"`
	Bytes           int        `json:"bytes"`
	RecordIDs       []string   `json:"record_ids"`
}

// BuildInjection is AssembleBuildInjection's answer. Injection is empty
// (JSON null) when there is nothing to inject.
type BuildInjection struct {
	Injection string
	RecordIDs []string
}

// MarshalJSON writes {"injection": string|null, "record_ids": [...]}.
func (b BuildInjection) MarshalJSON() ([]byte, error) {
	var out struct {
		Injection *string  `json:"injection"`
		RecordIDs []string `json:"record_ids"`
	}
	if b.Injection != "" {
		out.Injection = &b.Injection
	}
	out.RecordIDs = b.RecordIDs
	if out.RecordIDs == nil {
		out.RecordIDs = []string{}
	}
	return json.Marshal(out)
}

// DefangResult is DefangInbound's answer.
type DefangResult struct {
	Content Content `json:"content"`
	Hits    int     `json:"hits"`
}

// provider pairs a realm's provider with its declared capabilities, read
// once per request.
type provider struct {
	*host.Provider
	caps sdk.Capabilities
}

func (c *Coordinator) provider(realm string) (provider, error) {
	p, err := c.providers.Provider(realm)
	if err != nil {
		return provider{}, fmt.Errorf("coordinator: realm %q: %w", realm, err)
	}
	if p == nil {
		return provider{}, fmt.Errorf("coordinator: no provider serves realm %q: %w", realm, sdk.ErrNotFound)
	}
	hp := host.ProviderOf(p)
	return provider{Provider: hp, caps: hp.Capabilities()}, nil
}

// errUndeclared refuses a call to a capability the provider did not
// declare (callers check the declaration first, so it is a safeguard).
func errUndeclared(c sdk.Capability) error {
	return fmt.Errorf("the provider does not declare capability %q: %w", c, sdk.ErrUnsupported)
}

// identity fills the default realm and validates.
func (c *Coordinator) identity(id sdk.Identity) (sdk.Identity, error) {
	if id.Realm == "" {
		id.Realm = c.cfg.DefaultRealm
	}
	if err := id.Validate(); err != nil {
		return id, err
	}
	return id, nil
}

// InjectForTurn assembles the memory to deliver beside one user turn
// (DESIGN 5.1). session may be "" for a turn outside any session: then
// only the per-turn cap applies and nothing is deduplicated. Errors are
// bad input (sdk.ErrInvalid), an unknown realm (sdk.ErrNotFound), and,
// under the fail policy, recall failures; everything else is an answer
// with a SkipReason.
func (c *Coordinator) InjectForTurn(ctx context.Context, id sdk.Identity, session string, content Content) (TurnInjection, error) {
	if c.trace == nil {
		return c.injectForTurn(ctx, id, session, content, nil)
	}
	n := &traceNotes{}
	out, err := c.injectForTurn(context.WithValue(ctx, traceKey{}, n), id, session, content, n)
	if err == nil {
		if id, err := c.identity(id); err == nil {
			c.emit(id, session, SurfaceTurn, out.SkipReason, n, c.cfg.MaxEntries)
		}
	}
	return out, err
}

// injectForTurn is InjectForTurn, noting what it decides in n when n is
// not nil.
func (c *Coordinator) injectForTurn(ctx context.Context, id sdk.Identity, session string, content Content, n *traceNotes) (TurnInjection, error) {
	id, err := c.identity(id)
	if err != nil {
		return TurnInjection{}, err
	}
	if session != "" {
		if err := ValidateSessionKey(session); err != nil {
			return TurnInjection{}, err
		}
	}
	p, err := c.provider(id.Realm)
	if err != nil {
		return TurnInjection{}, err
	}
	// 1. Off by config.
	if c.cfg.PerTurnInjection == InjectionOff {
		return c.skipTurn(ctx, id, SkipInjectionOff), nil
	}
	// 2. Query.
	query := compactSpace(content.textPrefix(maxQueryBytes), maxQueryBytes)
	if !tokenize.HasTerms(query) {
		if c.cfg.Selection == SelectionContextual {
			return c.skipTurn(ctx, id, SkipEmptyQuery), nil
		}
		query = ""
	}
	if n != nil {
		n.query = len(query)
	}
	// 3. Budget, suppressed ids and a ready sweep, in one visit; it
	// writes only to take a ready sweep.
	key := SessionKey{Realm: id.Realm, Identity: id.ID, Session: session}
	snap := turnSnapshot{nonce: DeriveNonce(c.hostKey, key)}
	if session != "" {
		if err := c.visit(ctx, key, func(s *SessionState) bool {
			snap.used, snap.epoch = s.InjectedBytes, s.Epoch
			snap.suppressed = slices.Clone(s.InjectedIDs)
			if !c.selects(p, query) {
				return false // the picks wait for a turn that selects
			}
			snap.swept = s.SweepIDs
			s.SweepIDs = nil
			return snap.swept != nil
		}); err != nil {
			return TurnInjection{}, fmt.Errorf("coordinator: session store: %w", err)
		}
	}
	if n != nil {
		n.suppressed = snap.suppressed
	}
	if c.turnBudget(session, snap.used) < c.cfg.Budgets.MinBytes {
		return c.skipTurn(ctx, id, SkipBudgetExhausted), nil
	}
	// 4. Records.
	var deeper func(scopes []sdk.Scope)
	if session != "" && c.selector != nil {
		deeper = func(scopes []sdk.Scope) { c.startSweep(hclog.FromContext(ctx), key, snap.epoch, id, p, scopes, query) }
	}
	recs, beside, err := c.recall(ctx, SurfaceTurn, id, p, nil, query, snap.suppressed, snap.swept, deeper)
	if errors.Is(err, errSelectorEmpty) {
		return c.skipTurn(ctx, id, SkipSelectorEmpty), nil
	}
	if err != nil {
		c.returnSweep(ctx, key, snap)
		reason, err := c.recallFailed(ctx, SurfaceTurn, id, err)
		if err != nil {
			return TurnInjection{}, err
		}
		return c.skipTurn(ctx, id, reason), nil
	}
	if len(recs) == 0 {
		return c.skipTurn(ctx, id, SkipNoRecords), nil
	}
	if n != nil {
		n.candidates, n.neighbours = slices.Clone(recs), beside
	}
	// 5 and 6. Render and account. With a session, both happen inside one
	// store visit against the state as it is then: a concurrent turn of
	// the same session may have spent budget or injected some of these
	// records meanwhile, and the ladder must hold regardless.
	in := RenderInput{Identity: id, Nonce: snap.nonce, Records: recs, MaxEntries: c.cfg.MaxEntries, Now: c.now(), Zone: zoneOf(ctx), Neighbours: beside}
	if p.caps.Has(sdk.CapNeighbours) {
		in.NeighbourSpan = c.cfg.ThreadNeighbours
	}
	if query != "" {
		in.Terms = tokenize.Terms(query)
	}
	var out Rendered
	exhausted := false
	if session == "" {
		in.MaxBytes = c.cfg.Budgets.TurnBytes
		out = c.env.Render(in)
	} else if err := c.visit(ctx, key, func(s *SessionState) bool {
		out, exhausted = Rendered{}, false
		in.MaxBytes = c.turnBudget(session, s.InjectedBytes)
		if in.MaxBytes < c.cfg.Budgets.MinBytes {
			exhausted = true
			return false
		}
		in.Skip, in.Whole = s.injected, s.excerpted
		if n != nil {
			n.budget, n.dedup = in.MaxBytes, map[string]bool{}
			for _, r := range recs {
				n.dedup[r.ID] = s.injected(r.ID)
			}
		}
		out = c.env.Render(in)
		if out.Bytes == 0 {
			return false
		}
		s.account(out)
		return true
	}); err != nil {
		return TurnInjection{}, fmt.Errorf("coordinator: session store: %w", err)
	}
	if exhausted {
		return c.skipTurn(ctx, id, SkipBudgetExhausted), nil
	}
	if n != nil {
		n.rendered = out
		if session == "" {
			n.budget = in.MaxBytes
		}
	}
	if out.Bytes == 0 {
		return c.skipTurn(ctx, id, SkipNothingRenderable), nil
	}
	// 7. Ledger and usage, off the turn's path.
	c.injected(SurfaceTurn, id, session, p, out)
	return TurnInjection{InjectedContext: []string{out.Text}, Bytes: out.Bytes, RecordIDs: out.IDs}, nil
}

// visit runs fn on a session's state under the store timeout: every store
// call has a deadline, whatever ctx carries.
func (c *Coordinator) visit(ctx context.Context, key SessionKey, fn func(*SessionState) bool) error {
	ctx, cancel := context.WithTimeout(ctx, c.storeTime)
	defer cancel()
	return c.store.Update(ctx, key, fn)
}

// turnSnapshot is what a turn reads from its session before recalling.
type turnSnapshot struct {
	nonce      string
	used       int
	epoch      uint64
	suppressed []string
	swept      []string
}

// turnBudget is min(turn cap, session cap − spent); the turn cap alone
// without a session.
func (c *Coordinator) turnBudget(session string, used int) int {
	if session == "" {
		return c.cfg.Budgets.TurnBytes
	}
	return min(c.cfg.Budgets.TurnBytes, c.cfg.Budgets.SessionBytes-used)
}

func (c *Coordinator) skipTurn(ctx context.Context, id sdk.Identity, reason SkipReason) TurnInjection {
	c.skipped(ctx, SurfaceTurn, id, reason)
	return TurnInjection{InjectedContext: []string{}, SkipReason: reason, RecordIDs: []string{}}
}

// skipLogEvery is how often a skip of one (identity, reason) may be
// logged: a deployment never runs silently with injection off, yet the
// logs stay quiet.
const skipLogEvery = 24 * time.Hour

// maxSkipLogKeys bounds the skip limiter's memory.
const maxSkipLogKeys = 4096

// skipped counts a skip and logs it once a day per (identity, reason),
// with the skips since.
func (c *Coordinator) skipped(ctx context.Context, surface Surface, id sdk.Identity, reason SkipReason) {
	c.metrics.Skipped(surface, id.Realm, reason)
	if n, _, held, due := c.skipLog.add(c.now(), skipKey{realm: id.Realm, identity: id.ID, reason: reason}, 1); due {
		c.log(ctx).Info("injected nothing", append([]any{"surface", surface, "realm", id.Realm, "identity", id.ID, "skip_reason", reason, "skips", n}, heldArgs(held)...)...)
	}
}

// log is the coordinator's logger for a request: with the attributes of
// the request logger in ctx (the HTTP layer's request_id), so every line a
// request causes carries its id.
func (c *Coordinator) log(ctx context.Context) hclog.Logger {
	if args := hclog.FromContext(ctx).ImpliedArgs(); len(args) > 0 {
		return c.logger.With(args...)
	}
	return c.logger
}

// recallFailed applies the surface's failure policy: it answers the skip
// reason, or the error to return. A caller that gave up gets its own
// context's error whatever the policy.
func (c *Coordinator) recallFailed(ctx context.Context, surface Surface, id sdk.Identity, err error) (SkipReason, error) {
	if ctx.Err() != nil {
		return SkipNone, fmt.Errorf("coordinator: %s recall in realm %q: %w", surface, id.Realm, ctx.Err())
	}
	if c.cfg.failurePolicy(surface) == FailureFail {
		return SkipNone, fmt.Errorf("coordinator: %s recall in realm %q: %w", surface, id.Realm, err)
	}
	c.log(ctx).Warn("recall failed; injecting nothing", "surface", surface, "realm", id.Realm, "identity", id.ID, "error", err)
	return SkipRecallFailed, nil
}

// selects reports whether a recall of query from p goes through the
// selector (which weighs a finished sweep's picks) rather than lexically.
func (c *Coordinator) selects(p provider, query string) bool {
	return c.selector != nil && query != "" && p.caps.Has(sdk.CapManifest) && p.caps.Has(sdk.CapFetch)
}

// recall finds the records to inject under the recall timeout (DESIGN 5.1
// step 4): through the selector when one is installed, there is a query
// and the provider lists manifests and fetches by id; lexical recall on
// the provider otherwise. suppressed ids are never answered; swept ids
// (a finished background sweep) join the selector's picks. deeper, when
// set, is called if the selector asks for a deeper sweep. scopes are
// composed here when nil.
func (c *Coordinator) recall(ctx context.Context, surface Surface, id sdk.Identity, p provider, scopes []sdk.Scope, query string, suppressed, swept []string, deeper func([]sdk.Scope)) (recs []sdk.Record, beside map[string][]sdk.Record, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RecallTimeout)
	defer cancel()
	start := time.Now()
	defer func() { c.metrics.Recalled(surface, id.Realm, time.Since(start), MetricCode(err)) }()
	if scopes == nil {
		if scopes, err = c.compose(ctx, id); err != nil {
			return nil, nil, err
		}
	}
	if c.selects(p, query) {
		recs, err := c.selectRecords(ctx, id, p, scopes, query, suppressed, swept, deeper)
		return recs, nil, err
	}
	exclude, limit := c.excluded(suppressed)
	q := sdk.RecallQuery{Realm: id.Realm, Query: query, Scopes: scopes, Limit: limit, ExcludeIDs: exclude}
	if surface == SurfaceTurn && p.caps.Has(sdk.CapNeighbours) {
		q.Neighbours = c.cfg.ThreadNeighbours
	}
	hits, err := c.timedRecall(ctx, p, q)
	if err != nil {
		return nil, nil, err
	}
	if surface == SurfaceTurn {
		hits = spreadThreads(hits)
	}
	recs = make([]sdk.Record, 0, len(hits))
	foreignNeighbours := 0
	for i := range hits {
		recs = append(recs, hits[i].Record)
		if len(hits[i].Neighbours) > 0 {
			if beside == nil {
				beside = map[string][]sdk.Record{}
			}
			kept, foreign := keepReadable(hits[i].Neighbours, id.Realm, scopes, suppressed)
			beside[hits[i].Record.ID] = kept
			foreignNeighbours += foreign
		}
	}
	c.outOfScope(ctx, id, faultNeighbours, foreignNeighbours)
	if n := notesFrom(ctx); n != nil {
		scores := make([]float64, len(hits))
		for i := range hits {
			scores[i] = hits[i].Score
		}
		n.noteRecalled(recs, scores, scopes, suppressed)
	}
	recs, foreign := keepReadable(recs, id.Realm, scopes, suppressed)
	c.outOfScope(ctx, id, faultRecall, foreign)
	return recs, beside, nil
}

// turnCandidates is how many hits a lexical recall asks for: MaxEntries
// and a quarter more (at least two) in reserve for those the render
// drops, a record too large for what is left of the budget or one a
// concurrent turn of the session injected meanwhile. The provider already
// leaves out the session's injected ids and expired records, so the
// reserve is small; every extra hit is read, sent and decoded on every
// turn (asking for twice MaxEntries made a turn 1.4× a plain recall).
func (c *Coordinator) turnCandidates() int {
	return c.cfg.MaxEntries + max(2, c.cfg.MaxEntries/4)
}

// excluded answers the suppressed ids a recall sends the provider and the
// hits it asks for. A call holds at most sdk.MaxBatch ids, and a session
// with a large budget injects more: it sends the newest ones and asks for
// as many more hits as it left out, which the host drops itself
// (keepReadable, Render's Skip).
func (c *Coordinator) excluded(suppressed []string) ([]string, int) {
	exclude, left := wireIDs(suppressed)
	return exclude, min(c.turnCandidates()+left, sdk.MaxBatch)
}

// wireIDs answers the newest sdk.MaxBatch of a session's suppressed ids,
// the most one plugin call may carry, and how many older ones it left out.
func wireIDs(suppressed []string) ([]string, int) {
	if left := len(suppressed) - sdk.MaxBatch; left > 0 {
		return suppressed[left:], left
	}
	return suppressed, 0
}

// withoutUnsent drops the rows of the suppressed ids a plugin call leaves
// out (wireIDs): a selector cannot tell they were injected, and the host
// would drop its picks of them, leaving the turn short or empty.
func withoutUnsent(rows []sdk.ManifestRow, suppressed []string) []sdk.ManifestRow {
	_, left := wireIDs(suppressed)
	if left == 0 {
		return rows
	}
	unsent := make(map[string]bool, left)
	for _, id := range suppressed[:left] {
		unsent[id] = true
	}
	return slices.DeleteFunc(rows, func(r sdk.ManifestRow) bool { return unsent[r.ID] })
}

func (c *Coordinator) selectRecords(ctx context.Context, id sdk.Identity, p provider, scopes []sdk.Scope, query string, suppressed, swept []string, deeper func([]sdk.Scope)) ([]sdk.Record, error) {
	lister, ok := p.Lister()
	if !ok {
		return nil, fmt.Errorf("manifest: %w", errUndeclared(sdk.CapManifest))
	}
	rows, err := ListMemory(ctx, lister, sdk.ManifestQuery{
		Realm: id.Realm, Scopes: scopes, Tier: sdk.TierWorkingSet, K: c.cfg.Budgets.SelectorRows,
	})
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	// Rows and hits outside the scopes are dropped before the selector
	// sees them: they are other identities' memory, as is their title.
	rows, foreign := inScopes(rows, scopes, func(r *sdk.ManifestRow) sdk.Scope { return r.Scope })
	c.outOfScope(ctx, id, faultManifest, foreign)
	window := windowOf(ctx)
	if !window.Since.IsZero() || !window.Until.IsZero() {
		// A row carries no time to hold to the request's since/until, a
		// hard filter: the selector chooses among recall's hits, which
		// the window already narrowed.
		rows = nil
	}
	// The working set is ranked without the query (newest, most used): the
	// query's own top records join it, ahead, so a flood of newer records
	// cannot hide the one recall ranks first. The working set holds no
	// episode (ListMemory); one of the hits may be, which is how a turn
	// with a selector still brings back what a compaction absorbed.
	exclude, limit := c.excluded(suppressed)
	hits, err := c.timedRecall(ctx, p, sdk.RecallQuery{
		Realm: id.Realm, Query: query, Scopes: scopes, Limit: limit, ExcludeIDs: exclude,
	})
	if err != nil {
		return nil, err
	}
	hits = c.HitsInScopes(ctx, id, scopes, hits)
	rows = withoutUnsent(withHits(rows, hits), suppressed)
	sel, err := c.selectAmong(ctx, sdk.SelectRequest{Identity: id, Query: query, Rows: rows, SuppressedIDs: exclude, Max: c.cfg.MaxEntries})
	if err != nil {
		return nil, fmt.Errorf("selector: %w", err)
	}
	if sel.Coverage == sdk.CoverageNeedDeeperSweep && deeper != nil {
		deeper(scopes)
	}
	ids := make([]string, 0, len(sel.IDs)+len(swept))
	for _, rid := range slices.Concat(sel.IDs, swept) {
		if rid != "" && !slices.Contains(ids, rid) && !slices.Contains(suppressed, rid) {
			ids = append(ids, rid)
		}
	}
	// An empty selection with no recall hits is a verdict: inject
	// nothing. With hits, recall disagrees: say so, and by default trust
	// the recall ranking.
	emptySelection := func() ([]sdk.Record, error) {
		recs := make([]sdk.Record, 0, len(hits))
		for i := range hits {
			recs = append(recs, hits[i].Record)
		}
		recs, _ = keepReadable(recs, id.Realm, scopes, suppressed) // hits are in scope
		switch {
		case len(recs) == 0:
			return nil, nil
		case !c.cfg.SelectorFallback:
			return nil, errSelectorEmpty
		}
		c.fellBack(ctx, id, len(recs))
		return recs, nil
	}
	if len(ids) == 0 {
		return emptySelection()
	}
	getter, ok := p.Getter()
	if !ok {
		return nil, fmt.Errorf("fetch: %w", errUndeclared(sdk.CapFetch))
	}
	recs, err := getter.Get(ctx, id.Realm, ids)
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	if n := notesFrom(ctx); n != nil {
		n.noteUnselected(rows, ids)
		n.noteRecalled(recs, nil, scopes, suppressed)
	}
	// A fetched record outside the scopes was picked by the selector
	// from beyond the rows it was shown, unless its row was shown: then
	// the provider's fetch and manifest disagree on its scope.
	picked, fetched := 0, 0
	for i := range recs {
		if !slices.Contains(scopes, recs[i].Scope) {
			if slices.ContainsFunc(rows, func(r sdk.ManifestRow) bool { return r.ID == recs[i].ID }) {
				fetched++
			} else {
				picked++
			}
		}
	}
	c.outOfScope(ctx, id, faultSelector, picked)
	c.outOfScope(ctx, id, faultFetch, fetched)
	recs, _ = keepReadable(recs, id.Realm, scopes, suppressed)
	// A pick from an earlier turn's sweep, or the selector's from beyond
	// the hits, may lie outside the request's window; picks that all do
	// are an empty selection.
	if len(recs) > 0 {
		if recs = slices.DeleteFunc(recs, func(r sdk.Record) bool { return !window.InWindow(r.When()) }); len(recs) == 0 {
			return emptySelection()
		}
	}
	return recs, nil
}

// fellBack logs, once a day per identity, that the selector chose
// nothing and the recall ranking was injected instead.
func (c *Coordinator) fellBack(ctx context.Context, id sdk.Identity, hits int) {
	if n, _, held, due := c.skipLog.add(c.now(), skipKey{realm: id.Realm, identity: id.ID, reason: SkipSelectorEmpty}, 1); due {
		c.log(ctx).Info("the selector chose nothing although recall found records; injecting the recall ranking (selector_fallback)",
			append([]any{"realm", id.Realm, "identity", id.ID, "hits", hits, "fallbacks", n}, heldArgs(held)...)...)
	}
}

// errSelectorEmpty: the selector chose nothing although recall found
// records, and the fallback is off.
var errSelectorEmpty = errors.New("the selector chose nothing although recall found records")

// withHits puts recall's hits at the head of the selector's working set,
// as manifest rows, each once.
func withHits(rows []sdk.ManifestRow, hits []sdk.Hit) []sdk.ManifestRow {
	if len(hits) == 0 {
		return rows
	}
	out := make([]sdk.ManifestRow, 0, len(hits)+len(rows))
	seen := make(map[string]bool, len(hits))
	for _, h := range hits {
		r := h.Record
		if seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		out = append(out, sdk.ManifestRow{ID: r.ID, Scope: r.Scope, Kind: r.Kind, Title: r.Title, Description: r.Description, UpdatedAt: r.UpdatedAt, Rank: h.Score})
	}
	for _, row := range rows {
		if !seen[row.ID] {
			out = append(out, row)
		}
	}
	return out
}

// keepReadable drops records outside realm's composed scopes and
// suppressed ones: a provider or selector plugin that ignores its query
// must not leak another identity's (or realm's: every realm has a scope
// "realm") memory or repeat an injection. It answers how many were
// outside the scopes, for outOfScope; recs is reused.
func keepReadable(recs []sdk.Record, realm string, scopes []sdk.Scope, suppressed []string) ([]sdk.Record, int) {
	out, foreign := recs[:0], 0
	for _, r := range recs {
		switch {
		case r.Realm != "" && r.Realm != realm || !slices.Contains(scopes, r.Scope):
			foreign++
		case !slices.Contains(suppressed, r.ID):
			out = append(out, r)
		}
	}
	return out, foreign
}

// inScopes keeps the items whose scope is one of scopes and answers how
// many it dropped; items is reused.
func inScopes[T any](items []T, scopes []sdk.Scope, scope func(*T) sdk.Scope) ([]T, int) {
	out, foreign := items[:0], 0
	for i := range items {
		if slices.Contains(scopes, scope(&items[i])) {
			out = append(out, items[i])
		} else {
			foreign++
		}
	}
	return out, foreign
}

// injected counts an injection and queues its ledger rows and usage marks
// for the providers that keep them. The queue never blocks.
func (c *Coordinator) injected(surface Surface, id sdk.Identity, session string, p provider, out Rendered) {
	c.metrics.Injected(surface, id.Realm, out.Bytes, len(out.IDs))
	job := telemetryJob{realm: id.Realm, provider: p.Provider, at: c.now().UTC()}
	if p.caps.Has(sdk.CapLedger) {
		job.ledger = make([]sdk.LedgerEntry, len(out.IDs))
		for i, rid := range out.IDs {
			job.ledger[i] = sdk.LedgerEntry{
				Realm: id.Realm, Identity: id.ID, Session: session, RecordID: rid,
				Surface: string(surface), Bytes: int64(out.RecordBytes[i]), At: job.at,
			}
		}
	}
	if p.caps.Has(sdk.CapUsage) || p.caps.Has(sdk.CapUsageCounts) {
		job.usage = slices.Clone(out.IDs)
	}
	if job.ledger != nil || job.usage != nil {
		c.telemetry.enqueue(job)
	}
}

// DefangInbound neutralises forged envelope markers in inbound content
// (user messages and tool results alike) before delivery (DESIGN 5.5).
// Non-text blocks are left alone. With defang_inbound = false the content
// is answered unchanged. Only hit counts are logged, at most one line per
// identity per minute. Content over largeInboundBytes waits, within ctx,
// for its turn at the inbound gate; ctx ending stops the work between
// passes, answering its error and no content.
func (c *Coordinator) DefangInbound(ctx context.Context, id sdk.Identity, content Content) (DefangResult, error) {
	id, err := c.identity(id)
	if err != nil {
		return DefangResult{}, err
	}
	if _, err := c.provider(id.Realm); err != nil {
		return DefangResult{}, err
	}
	if c.defang == nil {
		return DefangResult{Content: content}, nil
	}
	leave, err := c.inbound.enter(ctx, id, content.textBytes())
	if err != nil {
		return DefangResult{}, err
	}
	defer leave()
	out, hits, err := c.defang.defangContentUntil(ctx.Done(), content)
	if err != nil {
		return DefangResult{}, fmt.Errorf("defanging stopped: %w", context.Cause(ctx))
	}
	if hits > 0 {
		c.metrics.Defanged(id.Realm, hits)
		c.logDefanged(id, hits)
	}
	return DefangResult{Content: out, Hits: hits}, nil
}

// OnSessionCompacted clears a session's dedup set, byte counter and
// cached sweep, so turns after a compaction may inject again what the
// compaction took out of context (DESIGN 5.6). The nonce is kept.
func (c *Coordinator) OnSessionCompacted(ctx context.Context, id sdk.Identity, session string) error {
	id, err := c.identity(id)
	if err != nil {
		return err
	}
	if err := ValidateSessionKey(session); err != nil {
		return err
	}
	if _, err := c.provider(id.Realm); err != nil {
		return err
	}
	key := SessionKey{Realm: id.Realm, Identity: id.ID, Session: session}
	if err := c.visit(ctx, key, (*SessionState).reset); err != nil {
		return fmt.Errorf("coordinator: session store: %w", err)
	}
	c.traceEvent(id, session, TraceReset, 0)
	return nil
}

// Recall answers the records most relevant to query among the identity's
// composed scopes, under the recall timeout. The memory guide recalls
// through it.
func (c *Coordinator) Recall(ctx context.Context, id sdk.Identity, query string, limit int) (hits []sdk.Hit, err error) {
	id, err = c.identity(id)
	if err != nil {
		return nil, err
	}
	if limit < 1 || limit > sdk.MaxBatch {
		return nil, &sdk.FieldError{Field: "limit", Problem: fmt.Sprintf("%d is outside 1..%d", limit, sdk.MaxBatch), Err: sdk.ErrInvalid}
	}
	p, err := c.provider(id.Realm)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RecallTimeout)
	defer cancel()
	start := time.Now()
	defer func() { c.metrics.Recalled(SurfaceGuide, id.Realm, time.Since(start), MetricCode(err)) }()
	scopes, err := c.compose(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("coordinator: recall in realm %q: %w", id.Realm, err)
	}
	hits, err = c.timedRecall(ctx, p, sdk.RecallQuery{Realm: id.Realm, Query: query, Scopes: scopes, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("coordinator: recall in realm %q: %w", id.Realm, err)
	}
	now := c.now()
	out, foreign := hits[:0], 0
	for _, h := range hits {
		switch {
		case !slices.Contains(scopes, h.Record.Scope):
			foreign++
		case h.Record.Recallable(now) && (h.Record.Realm == "" || h.Record.Realm == id.Realm):
			out = append(out, h)
		}
	}
	c.outOfScope(ctx, id, faultRecall, foreign)
	return out, nil
}

// RenderEnvelope renders records in the envelope with the nonce of
// (identity, session), within maxBytes (the turn budget when <= 0). It
// touches no budget or dedup state. The memory guide renders through it.
func (c *Coordinator) RenderEnvelope(ctx context.Context, id sdk.Identity, session string, recs []sdk.Record, maxBytes int) (Rendered, error) {
	id, err := c.identity(id)
	if err != nil {
		return Rendered{}, err
	}
	if session != "" {
		if err := ValidateSessionKey(session); err != nil {
			return Rendered{}, fmt.Errorf("coordinator: %w", err)
		}
	}
	if maxBytes <= 0 {
		maxBytes = c.cfg.Budgets.TurnBytes
	}
	nonce := DeriveNonce(c.hostKey, SessionKey{Realm: id.Realm, Identity: id.ID, Session: session})
	out := c.env.Render(RenderInput{Identity: id, Nonce: nonce, Records: recs, MaxBytes: maxBytes, Now: c.now(), Zone: zoneOf(ctx)})
	skip := SkipNone
	if out.Bytes == 0 {
		skip = SkipNothingRenderable
	}
	// Counted as the other surfaces' injections are, so the guide's
	// blocks show in memhost_injection_bytes and its skips beside them.
	if skip == SkipNone {
		c.metrics.Injected(SurfaceGuide, id.Realm, out.Bytes, len(out.IDs))
	} else {
		c.metrics.Skipped(SurfaceGuide, id.Realm, skip)
	}
	if c.trace != nil {
		c.emit(id, session, SurfaceGuide, skip, &traceNotes{budget: maxBytes, candidates: recs, rendered: out}, 0)
	}
	return out, nil
}
