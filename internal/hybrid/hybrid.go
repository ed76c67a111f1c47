// Package hybrid adds the semantic half of recall to the realms that have
// an embedder. In the background it embeds each realm's records: the
// backlog is what the provider reports as having no vector from the
// embedder's current model, so it survives a restart, a crash and a model
// change with nothing kept on the host. At recall it embeds the query
// within the recall's own deadline and hands the vector to the provider,
// which fuses it with its lexical scores; when the embedder is slow or
// down, recall stays lexical and says why.
package hybrid

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/coordinator/lru"
	"github.com/memhost/memhost/sdk"
)

// Realm is one realm's semantic setup: the embedder and the provider's
// vector store and record reader.
type Realm struct {
	Name     string
	Embedder sdk.Embedder
	Vectors  sdk.VectorStore
	Records  sdk.RecordGetter
	// Fusion weighs the lexical and semantic scores; the zero value leaves
	// the provider's defaults.
	Fusion sdk.Fusion
	// QueryTimeout caps embedding a query in this realm (a remote
	// endpoint needs more than a local one); 0 takes the engine's
	// Options.QueryTimeout. A recall still gives it at most half of what
	// is left of its own deadline.
	QueryTimeout time.Duration
}

// Options tune the engine; zero values take the defaults.
type Options struct {
	// Batch is how many missing records one backlog step asks for; an
	// embed call carries at most the embedder's MaxBatch of them.
	Batch int
	// Poll is how often an idle backlog looks for new records.
	Poll time.Duration
	// QueryTimeout caps embedding a query in a realm that sets no
	// QueryTimeout of its own; a recall also gives it at most half of
	// what is left of its own deadline.
	QueryTimeout time.Duration
	// CallTimeout bounds one backlog call to the embedder or provider.
	CallTimeout time.Duration
	// MaxBackoff caps the wait after a failed backlog step.
	MaxBackoff time.Duration
	// RefusalRetry is how long a record the embedder refused waits before
	// it is asked again (default 10 minutes): a refusal may be the
	// endpoint's passing trouble (a model still loading, a gateway
	// mid-deploy) rather than the text's.
	RefusalRetry time.Duration
	// QueryPause is how long recalls stop asking an embedder that failed
	// QueryFailures query embeddings in a row (default 1 s); each failed
	// probe after a pause doubles it, up to MaxQueryPause. A hung
	// embedder would otherwise cost every recall its whole query budget.
	QueryPause time.Duration
	Logger     hclog.Logger
	// Unlisted answers the setup of a realm New was not given (a realm
	// without a block, served as the default realm is), or false to keep
	// it lexical. Its backlog starts on the realm's first recall or write.
	Unlisted func(realm string) (Realm, bool)
	// MaxRealms bounds the realms started through Unlisted (default
	// 10000); past it, more stay lexical.
	MaxRealms int
}

// Defaults.
const (
	DefaultBatch        = 256
	DefaultPoll         = time.Second
	DefaultQueryTimeout = 250 * time.Millisecond
	DefaultCallTimeout  = 30 * time.Second
	DefaultMaxBackoff   = 30 * time.Second
	DefaultRefusalRetry = 10 * time.Minute
	DefaultQueryPause   = time.Second

	// QueryFailures is how many query embeddings in a row must fail
	// before recalls pause asking the embedder.
	QueryFailures = 3
	// MaxQueryPause caps the pause: an embedder back from an outage is
	// asked again within it.
	MaxQueryPause = 30 * time.Second
)

// Fallback reasons: why a recall in a realm with an embedder stayed
// lexical.
const (
	ReasonEmbedderUnavailable = "embedder_unavailable" // the embedder failed, answered badly or not in time
	ReasonNoTime              = "no_time"              // the recall's deadline left no time to embed the query
	ReasonVectorRefused       = "vector_refused"       // the provider refused the query's vector (one of another length stored under the model's id)
	ReasonNoQueryMeaning      = "no_query_meaning"     // the embedder gave the query a vector of no direction (a word-vector table knowing none of its words)
)

// Backlog states.
const (
	StateStarting = "starting" // not yet asked the embedder what it makes
	StateDraining = "draining" // embedding records
	StateIdle     = "idle"     // every live record has a vector from the current model
	StateFailing  = "failing"  // the last step failed; retried after a backoff
)

// Engine runs the backlogs and embeds queries. Its methods are safe for
// concurrent use.
type Engine struct {
	opts Options

	mu      sync.Mutex
	realms  map[string]*realm
	listed  int             // realms given to New
	full    bool            // MaxRealms was reached and said so
	run     context.Context // set while Run runs: realms added then start at once
	workers sync.WaitGroup

	// queries holds the last queries' embeddings by realm, model and
	// text: one turn may recall twice with the same text (a query naming
	// a time window asks inside the window too), and the embedder is
	// asked once. One cache for all realms bounds its memory however
	// many there are.
	queriesMu sync.Mutex
	queries   *lru.Cache[queryKey, []float32]
}

// recentQueries bounds the query embeddings kept: 3 MiB at 3,072
// dimensions, whatever the queries' size (queryKey).
const recentQueries = 256

// queryKey names a query's embedding by the digest of its text, not the
// text: a query may be as large as a request body.
type queryKey struct {
	realm, model string
	text         [sha256.Size]byte
}

type realm struct {
	cfg  Realm
	opts *Options
	kick chan struct{}

	mu        sync.Mutex
	info      *sdk.EmbedderInfo // nil until the embedder answered
	state     string
	lastErr   string
	embedded  int64
	fallbacks map[string]int64
	rate      float64   // records per second over the last drain
	loggedAt  time.Time // the last fallback log line
	// refusalLoggedAt is the last refusal's log line; refusalsSince the
	// records refused since it, which the next line counts.
	refusalLoggedAt time.Time
	refusalsSince   int
	// refused holds the records the embedder refused, by id: not asked
	// again until the model changes or RefusalRetry has passed.
	refused map[string]refusal
	// sweepAt is the size of refused at which refuse drops the lapsed
	// refusals: a record forgotten while refused is never listed again
	// to clear its entry, and status (which drops them too) may never be
	// asked.
	sweepAt int
	queries breaker
	// failing is set from a failed backlog step to the next that
	// succeeds: the state alone cannot tell, as each step sets it to
	// draining before it embeds, and the warning is for the episode.
	failing bool
	// pageFails counts backlog steps in a row whose embedding failed:
	// past splitAfter, the page is embedded one record at a time.
	pageFails int
	// control is the last text the embedder embedded for the backlog: a
	// record that fails alone is told from an outage by asking it again.
	control string
	// strikes counts, per record, the steps in a row that failed it while
	// the embedder embedded other texts (see oneByOne).
	strikes map[string]strike
	// put holds the records whose vector this realm put, by id, with the
	// model and content hash: one listed missing again with the same ones
	// was not kept (see notKept). Cleared when it reaches maxStrikes.
	put map[string]putMark
}

// putMark is what a record's vector was put for.
type putMark struct{ model, hash string }

// errNotKept is a record's refusal when the provider did not keep the
// vector put for its text.
var errNotKept = errors.New("the provider did not keep the vector put for its text")

// splitAfter is how many steps in a row may fail to embed a page before
// it is embedded one record at a time, to find a record the embedder
// fails on every time (a text too large for a llama.cpp batch, one a
// model answers NaN for), which would otherwise stall the realm.
const splitAfter = 3

// refuseAfter is how many steps in a row must fail a record, twice each
// time while the embedder embeds other texts, before it is refused: an
// endpoint that fails some calls at random (rate limits, a flaky proxy)
// may fail a healthy text so once, but seldom step after step with
// every check answered.
const refuseAfter = 3

// maxStrikes bounds the strikes kept: a record forgotten while struck
// would otherwise stay in the map.
const maxStrikes = 4096

// probeText is what the embedder is checked with when it has embedded
// no text for the backlog in this process (after a restart whose
// backlog is only the failing record, say): one tiny call.
const probeText = "memhost"

// breaker is the query path's view of the embedder: after QueryFailures
// failed query embeddings in a row, recalls stay lexical without asking
// until the pause ends; then one recall probes while the others still
// do not ask, and its answer closes the breaker or doubles the pause.
type breaker struct {
	fails   int           // failed query embeddings in a row
	pause   time.Duration // the current pause; 0 while closed
	until   time.Time     // no recall asks before it
	probing bool          // a recall is asking after the pause
}

// New checks the realms and answers an engine; Run starts its backlogs.
func New(realms []Realm, opts Options) (*Engine, error) {
	if opts.Batch <= 0 {
		opts.Batch = DefaultBatch
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.QueryTimeout <= 0 {
		opts.QueryTimeout = DefaultQueryTimeout
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.RefusalRetry <= 0 {
		opts.RefusalRetry = DefaultRefusalRetry
	}
	if opts.QueryPause <= 0 {
		opts.QueryPause = DefaultQueryPause
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.MaxRealms <= 0 {
		opts.MaxRealms = 10000
	}
	e := &Engine{opts: opts, realms: make(map[string]*realm, len(realms)), listed: len(realms),
		queries: lru.New[queryKey, []float32](recentQueries)}
	for _, r := range realms {
		if err := check(r); err != nil {
			return nil, err
		}
		if e.realms[r.Name] != nil {
			return nil, fmt.Errorf("hybrid recall: realm %q is listed twice: %w", r.Name, sdk.ErrInvalid)
		}
		e.realms[r.Name] = e.newRealm(r)
	}
	return e, nil
}

func check(r Realm) error {
	switch {
	case r.Name == "":
		return fmt.Errorf("hybrid recall: a realm has no name: %w", sdk.ErrInvalid)
	case r.Embedder == nil || r.Vectors == nil || r.Records == nil:
		return fmt.Errorf("hybrid recall: realm %q needs an embedder and a provider that stores vectors and fetches records: %w", r.Name, sdk.ErrInvalid)
	case r.Fusion.Lexical < 0 || r.Fusion.Semantic < 0:
		return fmt.Errorf("hybrid recall: realm %q: fusion weights must not be negative: %w", r.Name, sdk.ErrInvalid)
	case r.QueryTimeout < 0:
		return fmt.Errorf("hybrid recall: realm %q: the query timeout %s is negative: %w", r.Name, r.QueryTimeout, sdk.ErrInvalid)
	}
	return nil
}

func (e *Engine) newRealm(r Realm) *realm {
	return &realm{cfg: r, opts: &e.opts, kick: make(chan struct{}, 1), state: StateStarting, fallbacks: map[string]int64{}, refused: map[string]refusal{}}
}

// realm answers name's setup, starting an unlisted realm's on first use;
// nil for a lexical realm.
func (e *Engine) realm(name string) *realm {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r := e.realms[name]; r != nil || e.opts.Unlisted == nil {
		return r
	}
	if len(e.realms)-e.listed >= e.opts.MaxRealms {
		if !e.full {
			e.full = true
			e.opts.Logger.Warn("realms without a block past the bound stay lexical until the host restarts", "max_realms", e.opts.MaxRealms, "realm", name)
		}
		return nil
	}
	cfg, ok := e.opts.Unlisted(name)
	if !ok || cfg.Name != name || check(cfg) != nil {
		return nil
	}
	r := e.newRealm(cfg)
	e.realms[name] = r
	if e.run != nil {
		e.start(r)
	}
	return r
}

// start runs r's backlog under e.run; e.mu is held.
func (e *Engine) start(r *realm) {
	ctx := e.run
	e.workers.Add(1)
	go func() {
		defer e.workers.Done()
		r.run(ctx)
	}()
}

// Run drains every realm's backlog until ctx ends; realms first used
// meanwhile start theirs at once.
func (e *Engine) Run(ctx context.Context) {
	e.mu.Lock()
	e.run = ctx
	for _, r := range e.realms {
		e.start(r)
	}
	e.mu.Unlock()
	<-ctx.Done()
	// A realm first used from now on (a request still served while the
	// host stops) starts no backlog: its Add beside the Wait below
	// panics the host.
	e.mu.Lock()
	e.run = nil
	e.mu.Unlock()
	e.workers.Wait()
}

// Written tells realm's backlog that records were written, so it looks
// now rather than at its next poll.
func (e *Engine) Written(realm string) {
	if r := e.realm(realm); r != nil {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// PrepareRecall gives q the embedding of its query when q's realm has an
// embedder, spending at most the realm's query timeout (its QueryTimeout,
// else Options.QueryTimeout) and half of what is left of ctx's deadline.
// It answers "" when q carries a vector, or the reason it stays lexical
// (a Reason constant; nothing for a realm without an embedder or an
// empty query, which are lexical by design).
func (e *Engine) PrepareRecall(ctx context.Context, q *sdk.RecallQuery) string {
	if e == nil || q.Query == "" || q.QueryVector != nil {
		return ""
	}
	r := e.realm(q.Realm)
	if r == nil {
		return ""
	}
	// A query embedded moments ago (the same text recalled again, deeper)
	// needs no call, whatever the time left or the embedder's state.
	if info := r.knownInfo(); info != nil {
		if _, _, v, ok := e.cachedQuery(q, *info); ok {
			r.give(q, v, info.Model)
			return ""
		}
	}
	full := r.queryTimeout()
	budget := full
	if dl, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(dl)/2)
	}
	if budget < time.Millisecond {
		return r.fellBack(ReasonNoTime, nil)
	}
	ask, probe := r.mayAsk()
	if !ask {
		return r.fellBack(ReasonEmbedderUnavailable, errPaused)
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	v, model, err := e.embedQuery(ctx, r, q)
	// A deadline the caller cut short says nothing of the embedder. At
	// least half the realm's timeout is not short: a recall deadline of
	// twice the timeout (the defaults) leaves the query a little less,
	// the time the recall took before it, and a hung embedder must still
	// count as failing.
	r.asked(err, budget >= full/2, probe)
	if err != nil {
		return r.fellBack(ReasonEmbedderUnavailable, err)
	}
	if isZero(v) {
		// No provider ranks by (or accepts) a vector with no direction.
		// Not a fault of the embedder (counted apart, not logged): a
		// word-vector table answers it for a query of words it lacks.
		r.mu.Lock()
		r.fallbacks[ReasonNoQueryMeaning]++
		r.mu.Unlock()
		return ReasonNoQueryMeaning
	}
	r.give(q, v, model)
	return ""
}

// queryTimeout is the most a recall in r gives the embedder for its
// query: the realm's own, else the engine's.
func (r *realm) queryTimeout() time.Duration {
	if r.cfg.QueryTimeout > 0 {
		return r.cfg.QueryTimeout
	}
	return r.opts.QueryTimeout
}

// embedQuery answers q's vector and the model that made it, from the
// cache or the embedder.
func (e *Engine) embedQuery(ctx context.Context, r *realm, q *sdk.RecallQuery) ([]float32, string, error) {
	info, err := r.embedderInfo(ctx, false)
	if err != nil {
		return nil, "", err
	}
	key, text, v, ok := e.cachedQuery(q, info)
	if ok {
		return v, info.Model, nil
	}
	vecs, err := embed(ctx, r.cfg.Embedder, info, sdk.EmbedQuery, []string{text})
	if err != nil {
		if errors.Is(err, errModelChanged) {
			r.forgetInfo() // the next recall reads the new model
		}
		return nil, "", err
	}
	if !isZero(vecs[0]) {
		e.queriesMu.Lock()
		e.queries.Add(key, vecs[0])
		e.queriesMu.Unlock()
	}
	return vecs[0], info.Model, nil
}

// errPaused is the fallback's cause while recalls do not ask the embedder.
var errPaused = errors.New("the embedder failed the last queries; recalls do not ask it until a pause ends")

// mayAsk reports whether a recall may ask the embedder: always while the
// breaker is closed; once it is open, only the first recall after the
// pause, as its probe.
func (r *realm) mayAsk() (ask, probe bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := &r.queries
	switch {
	case b.pause == 0:
		return true, false
	case b.probing || time.Now().Before(b.until):
		return false, false
	default:
		b.probing = true
		return true, true
	}
}

// asked records how a query embedding went; probe says it was the one
// asked after a pause. An answer, even a refusal of the text or news of
// another model, closes the breaker. A failure counts unless it is the
// caller's: a deadline that left under half the realm's query timeout,
// or a cancelled recall. Only the probe's failure lengthens a pause: a query
// asked before the pause began may fail during it.
func (r *realm) asked(err error, ampleBudget, probe bool) {
	answered := err == nil || errors.Is(err, sdk.ErrInvalid) || errors.Is(err, errModelChanged)
	if answered {
		r.embedderAnswered()
		return
	}
	timedOut := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sdk.ErrDeadline)
	r.mu.Lock()
	b := &r.queries
	if probe {
		b.probing = false
	}
	if errors.Is(err, context.Canceled) || (timedOut && !ampleBudget) {
		r.mu.Unlock()
		return
	}
	b.fails++
	opened := false
	switch {
	case probe:
		b.pause = min(2*b.pause, MaxQueryPause)
		b.until = time.Now().Add(b.pause)
	case b.pause == 0 && b.fails >= QueryFailures:
		b.pause, opened = r.opts.QueryPause, true
		b.until = time.Now().Add(b.pause)
	}
	fails := b.fails
	r.mu.Unlock()
	if opened {
		r.opts.Logger.Warn("the embedder failed queries in a row; recalls stay lexical without asking it, probing it now and then", "realm", r.cfg.Name, "failures", fails, "error", err)
	}
}

// embedderAnswered closes the query breaker: the embedder answered a
// query, or embedded a backlog page.
func (r *realm) embedderAnswered() {
	r.mu.Lock()
	b := &r.queries
	wasOpen := b.pause > 0
	*b = breaker{}
	r.mu.Unlock()
	if wasOpen {
		r.opts.Logger.Info("the embedder answers again; recalls ask it", "realm", r.cfg.Name)
	}
}

// VectorRefused counts a recall the provider of realm refused for the
// query's vector, which the host then sent lexically.
func (e *Engine) VectorRefused(realm string, err error) {
	if r := e.realm(realm); r != nil {
		r.fellBack(ReasonVectorRefused, err)
	}
}

// cachedQuery answers the text of q that info's model embeds, its cache
// key, and the vector the cache holds for it, if any.
func (e *Engine) cachedQuery(q *sdk.RecallQuery, info sdk.EmbedderInfo) (queryKey, string, []float32, bool) {
	text := clip(q.Query, info.MaxInputBytes)
	key := queryKey{q.Realm, info.Model, sha256.Sum256([]byte(text))}
	e.queriesMu.Lock()
	defer e.queriesMu.Unlock()
	v, ok := e.queries.Get(key)
	return key, text, v, ok
}

// ForgetQueries drops the query embeddings kept, so the next recall of
// any text asks the embedder again: a benchmark timing recalls must not
// be served the embeddings of its own earlier runs of the same queries.
func (e *Engine) ForgetQueries() {
	if e == nil {
		return
	}
	e.queriesMu.Lock()
	e.queries = lru.New[queryKey, []float32](recentQueries)
	e.queriesMu.Unlock()
}

// give sets q to rank by v, the query's vector by model, with the realm's
// fusion weights.
func (r *realm) give(q *sdk.RecallQuery, v []float32, model string) {
	q.QueryVector, q.VectorModel, q.Fusion = slices.Clone(v), model, r.cfg.Fusion
}

// fellBack counts a lexical fallback and logs it at most once a minute
// per realm (a down embedder would otherwise log every turn).
func (r *realm) fellBack(reason string, err error) string {
	r.mu.Lock()
	r.fallbacks[reason]++
	n := r.fallbacks[reason]
	log := time.Since(r.loggedAt) >= time.Minute
	if log {
		r.loggedAt = time.Now()
	}
	r.mu.Unlock()
	if log {
		r.opts.Logger.Warn("recall stays lexical: the query was not embedded", "realm", r.cfg.Name, "reason", reason, "fallbacks", n, "error", err)
	}
	return reason
}

// embedderInfo answers what the embedder makes, asking it when unknown
// or fresh.
func (r *realm) embedderInfo(ctx context.Context, fresh bool) (sdk.EmbedderInfo, error) {
	if info := r.knownInfo(); info != nil && !fresh {
		return *info, nil
	}
	got, err := within(ctx, func() (sdk.EmbedderInfo, error) { return r.cfg.Embedder.EmbedderInfo(ctx) })
	if err != nil {
		return sdk.EmbedderInfo{}, fmt.Errorf("embedder info: %w", err)
	}
	if err := got.Validate(); err != nil {
		return sdk.EmbedderInfo{}, fmt.Errorf("embedder info: %w", err)
	}
	r.mu.Lock()
	r.info = &got
	r.mu.Unlock()
	return got, nil
}

// knownInfo answers the embedder's Info as last read, or nil when it has
// not been read (or was forgotten).
func (r *realm) knownInfo() *sdk.EmbedderInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.info
}

// forgetInfo drops the cached Info, so the next call asks again: a
// restarted embedder may make another model.
func (r *realm) forgetInfo() {
	r.mu.Lock()
	r.info = nil
	r.mu.Unlock()
}

// embed embeds texts in calls of at most info.MaxBatch and checks each
// answer's shape (the supervised client checks it too; any other
// embedder is held to the same).
func embed(ctx context.Context, e sdk.Embedder, info sdk.EmbedderInfo, purpose sdk.EmbedPurpose, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += info.MaxBatch {
		chunk := texts[start:min(start+info.MaxBatch, len(texts))]
		vecs, err := within(ctx, func() ([][]float32, error) {
			req := sdk.EmbedRequest{Purpose: purpose, Texts: chunk}
			me, ok := e.(ModelEmbedder)
			if !ok {
				return e.Embed(ctx, req)
			}
			vecs, model, err := me.EmbedModel(ctx, req)
			if err == nil && model != info.Model {
				return nil, fmt.Errorf("%w: %q, not %q", errModelChanged, model, info.Model)
			}
			return vecs, err
		})
		if err != nil {
			return nil, err
		}
		if err := info.CheckVectors(len(chunk), vecs); err != nil {
			return nil, fmt.Errorf("%w: %w", errBadAnswer, err)
		}
		out = append(out, vecs...)
	}
	return out, nil
}

// within answers f's result, or an error as soon as ctx ends: an embedder
// that does not heed its context must not hold a recall past its budget,
// nor a backlog past shutdown. f is left to finish on its own.
func within[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case res := <-done:
		return res.v, res.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("the embedder gave no answer in time: %w", ctx.Err())
	}
}

// ModelEmbedder is an embedder that answers, with each batch of vectors,
// the model id of the process that made them (pluginhost.Embedder): a
// plugin restarted with another model between reading its model and
// embedding must not have its vectors labelled with the old id, which a
// provider would store, or compare with the old model's vectors.
type ModelEmbedder interface {
	EmbedModel(ctx context.Context, req sdk.EmbedRequest) ([][]float32, string, error)
}

// errModelChanged is an answer from an embedder that now makes another
// model than the one read: the model is read again and the work redone.
var errModelChanged = errors.New("the embedder now makes another model")

// errBadAnswer is an embedder's answer of the wrong shape: the embedder's
// fault, never the texts' (sdk.ErrInvalid from the embedder refuses a
// text), so a backlog step fails and is retried.
var errBadAnswer = errors.New("the embedder answered badly")

// clip cuts s to at most n bytes on a character boundary (n <= 0: no
// limit): a long record is embedded by its beginning rather than refused.
func clip(s string, n int) string {
	if n <= 0 {
		return s
	}
	return sdk.CutText(s, n)
}

// documentText is what a record is embedded by: its title and body.
func documentText(r sdk.Record) string {
	if r.Title == "" {
		return r.Body
	}
	return r.Title + "\n\n" + r.Body
}

// run drains the realm's backlog until ctx ends.
func (r *realm) run(ctx context.Context) {
	after := ""
	wait := time.Duration(0)
	// backoff is the last failed step's wait, apart from wait: a failure
	// after a long idle poll must not start at the idle wait doubled.
	backoff := time.Duration(0)
	// idle is the idle poll's wait, apart from wait (which each page of a
	// pass sets to 0): it doubles over the passes that store nothing, also
	// those that page through refused records, which would otherwise poll
	// every Poll for as long as any record stays refused.
	idle := time.Duration(0)
	stored := 0 // vectors stored in this pass over the backlog
	for {
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-r.kick:
				if r.status().State != StateFailing {
					break
				}
				// A failing backlog waits out its backoff: kicks come with
				// every write.
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			case <-t.C:
			}
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
		n, put, next, err := r.step(ctx, after)
		stored += put
		if put > 0 {
			r.embedderAnswered()
			idle = 0
		}
		if err == nil {
			r.recovered()
			backoff = 0
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			backoff = r.failed(err, backoff)
			wait = backoff
		case n == 0 && after != "" && stored > 0:
			// Another pass from the start, for ids written behind the cursor.
			after, wait, stored = "", 0, 0
		case n == 0:
			// Only refused records are left (or none). Writes kick; the
			// poll is the safety net, and slows while the realm is idle.
			r.setState(StateIdle, "")
			after, stored = "", 0
			idle = min(max(2*idle, r.opts.Poll), 64*r.opts.Poll)
			wait = idle
		default:
			after, wait = next, 0
		}
	}
}

// failed records a failed step and answers the next wait. It warns at
// the first failure of an episode only: an outage fails a step every
// backoff, for as long as it lasts.
func (r *realm) failed(err error, last time.Duration) time.Duration {
	r.forgetInfo()
	r.mu.Lock()
	first := !r.failing
	r.failing = true
	r.state, r.lastErr = StateFailing, err.Error()
	r.mu.Unlock()
	if first {
		r.opts.Logger.Warn("embedding backlog step failed; retrying with backoff", "realm", r.cfg.Name, "error", err)
	}
	return min(max(2*last, 100*time.Millisecond), r.opts.MaxBackoff)
}

// recovered ends a failure episode, if one was going on.
func (r *realm) recovered() {
	r.mu.Lock()
	was := r.failing
	r.failing = false
	if was {
		r.state, r.lastErr = StateDraining, ""
	}
	r.mu.Unlock()
	if was {
		r.opts.Logger.Info("embedding backlog steps succeed again", "realm", r.cfg.Name)
	}
}

func (r *realm) setState(state, lastErr string) {
	r.mu.Lock()
	r.state, r.lastErr = state, lastErr
	r.mu.Unlock()
}

// step embeds one page of the backlog after the cursor and answers how
// many ids the page held, how many vectors it stored and the new cursor.
// A step that fails still stores the vectors it made.
func (r *realm) step(parent context.Context, after string) (int, int, string, error) {
	ctx, cancel := context.WithTimeout(parent, r.opts.CallTimeout)
	defer cancel()
	// Each pass asks anew: the embedder may now make another model.
	info, err := r.embedderInfo(ctx, after == "")
	if err != nil {
		return 0, 0, "", err
	}
	ids, err := r.cfg.Vectors.MissingVectors(ctx, r.cfg.Name, info.Model, after, r.opts.Batch)
	if err != nil {
		return 0, 0, "", fmt.Errorf("missing vectors: %w", err)
	}
	if len(ids) == 0 {
		return 0, 0, "", nil
	}
	for i, id := range ids {
		// Ids out of order or not after the cursor would not move it: the
		// same page again and again, with no pause. (A plugin's answer is
		// held to this in sdk/host; an in-process provider's is not.)
		prev := after
		if i > 0 {
			prev = ids[i-1]
		}
		if (i > 0 || after != "") && id <= prev {
			return 0, 0, "", fmt.Errorf("missing vectors: the provider answered ids out of id order or not after the cursor %q", after)
		}
	}
	start := time.Now()
	// The refused records are left out before they are read: a pass over
	// a realm the embedder refused (an endpoint answering 400 to every
	// text) must not read every record's text to skip it.
	var wanted []string
	for _, rec := range r.notRefused(asRecords(ids), info.Model) {
		wanted = append(wanted, rec.ID)
	}
	if len(wanted) == 0 {
		return len(ids), 0, ids[len(ids)-1], nil
	}
	recs, err := r.cfg.Records.Get(ctx, r.cfg.Name, wanted)
	if err != nil {
		return 0, 0, "", fmt.Errorf("get records: %w", err)
	}
	recs = r.notKept(recs, info.Model)
	if len(recs) == 0 {
		return len(ids), 0, ids[len(ids)-1], nil
	}
	// Only now: an idle realm's poll reads its refused records back, and
	// must not show it draining while it does. A failing realm stays
	// failing through its retries, until one succeeds.
	r.mu.Lock()
	if r.state != StateFailing {
		r.state, r.lastErr = StateDraining, ""
	}
	r.mu.Unlock()
	texts := make([]string, len(recs))
	for i := range recs {
		texts[i] = clip(documentText(recs[i]), info.MaxInputBytes)
	}
	vecs, embedErr := r.embedPage(ctx, info, recs, texts)
	r.mu.Lock()
	switch {
	case embedErr == nil:
		r.pageFails = 0
	case parent.Err() == nil && !errors.Is(embedErr, errModelChanged):
		// Not the host stopping, nor a new model (which the next step reads).
		r.pageFails++
	}
	r.mu.Unlock()
	put := make([]sdk.RecordVector, 0, len(recs))
	for i := range recs {
		switch {
		case vecs[i] == nil:
		case isZero(vecs[i]):
			// The provider refuses a vector with no direction, and with it
			// the whole page: leave the record behind like a refused one.
			r.refuse(recs[i].ID, info.Model, errors.New("its vector is all zero"))
		default:
			// The record may change while it is embedded (a hand edit, a
			// forget and an import reusing its id): the provider stores
			// the vector only if it still holds the text it was made from.
			put = append(put, sdk.RecordVector{ID: recs[i].ID, Model: info.Model, Vector: vecs[i], ContentHash: sdk.ContentHash(recs[i].Title, recs[i].Body)})
		}
	}
	if len(put) > 0 {
		// Under a bound of its own: an embedding that took the step's
		// time, or all but a moment of it (an answer arriving just before
		// the deadline left too little for the put's round trip, which
		// failed the step and threw the vectors away), is still stored,
		// so the next step does not ask for it again.
		pctx, cancel := context.WithTimeout(parent, r.opts.CallTimeout)
		defer cancel()
		if err := r.cfg.Vectors.PutVectors(pctx, r.cfg.Name, put); err != nil {
			return 0, 0, "", fmt.Errorf("put vectors: %w", err)
		}
		r.markPut(put)
	}
	took := time.Since(start)
	r.mu.Lock()
	r.embedded += int64(len(put))
	if took > 0 {
		r.rate = float64(len(put)) / took.Seconds()
	}
	r.mu.Unlock()
	if embedErr != nil {
		return 0, len(put), "", fmt.Errorf("embed: %w", embedErr)
	}
	return len(ids), len(put), ids[len(ids)-1], nil
}

// embedPage embeds texts, the page's records' (recs), in calls of the
// embedder's batch. It answers the vectors made, nil for a record left
// without one, even when it fails: a chunk embedded is not thrown away
// for the failure of another. A chunk is embedded one record at a time
// when the embedder refuses one of its texts, answers it badly (a
// wrong count or length, a NaN: perhaps one text's fault), or fails
// it in a page that failed splitAfter steps in a row.
func (r *realm) embedPage(ctx context.Context, info sdk.EmbedderInfo, recs []sdk.Record, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	r.mu.Lock()
	split := r.pageFails >= splitAfter
	r.mu.Unlock()
	for start := 0; start < len(texts); start += info.MaxBatch {
		end := min(start+info.MaxBatch, len(texts))
		vecs, err := embed(ctx, r.cfg.Embedder, info, sdk.EmbedDocument, texts[start:end])
		if err == nil {
			copy(out[start:end], vecs)
			r.embeddedText(texts[start])
			continue
		}
		single := split || errors.Is(err, sdk.ErrInvalid) || errors.Is(err, errBadAnswer)
		if !single || ctx.Err() != nil || errors.Is(err, errModelChanged) {
			return out, err
		}
		if err := r.oneByOne(ctx, info, recs[start:end], texts[start:end], out[start:end]); err != nil {
			return out, err
		}
	}
	return out, nil
}

// embeddedText remembers t as a text the embedder embedded.
func (r *realm) embeddedText(t string) {
	r.mu.Lock()
	r.control = t
	r.mu.Unlock()
}

// refusal is a record the embedder refused: by which model, and when.
type refusal struct {
	model string
	at    time.Time
}

// lapsed reports whether f's record is to be asked again.
func (r *realm) lapsed(f refusal) bool { return time.Since(f.at) >= r.opts.RefusalRetry }

// minSweep is the fewest refusals refuse sweeps.
const minSweep = 64

// dropLapsed forgets the refusals past their retry; r.mu is held.
func (r *realm) dropLapsed() {
	for id, f := range r.refused {
		if r.lapsed(f) {
			delete(r.refused, id)
		}
	}
}

// notKept refuses the records listed missing again after their vector
// was put for the same model and text: the provider skipped it (a put
// for text the record no longer holds is skipped; one that keeps being
// skipped would have the backlog embed the record pass after pass). Such
// a record waits RefusalRetry, as one the embedder refused.
func (r *realm) notKept(recs []sdk.Record, model string) []sdk.Record {
	out := recs[:0]
	for _, rec := range recs {
		r.mu.Lock()
		m, ok := r.put[rec.ID]
		delete(r.put, rec.ID)
		r.mu.Unlock()
		if ok && m == (putMark{model, sdk.ContentHash(rec.Title, rec.Body)}) {
			r.refuse(rec.ID, model, errNotKept)
			continue
		}
		out = append(out, rec)
	}
	return out
}

// markPut notes the vectors put (for notKept).
func (r *realm) markPut(put []sdk.RecordVector) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.put == nil || len(r.put)+len(put) > maxStrikes {
		r.put = make(map[string]putMark, len(put))
	}
	for _, v := range put {
		r.put[v.ID] = putMark{v.Model, v.ContentHash}
	}
}

// notRefused drops the records the embedder refused under model; a
// refusal older than RefusalRetry, or by another model, is forgotten, so
// its record is asked again.
func (r *realm) notRefused(recs []sdk.Record, model string) []sdk.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := recs[:0]
	for _, rec := range recs {
		if f, ok := r.refused[rec.ID]; ok && f.model == model && !r.lapsed(f) {
			continue
		} else if ok {
			delete(r.refused, rec.ID)
		}
		out = append(out, rec)
	}
	return out
}

// oneByOne embeds texts singly into out. A record whose text the
// embedder refuses as invalid gets no vector and is remembered as
// refused (logged once). A record it fails on otherwise is asked again
// at once: an endpoint failing some calls (one replica of a round robin
// down) answers the next. Failing again while the embedder still embeds
// other texts, it gets a strike, and is refused at its refuseAfter'th
// step in a row so failed. A check the embedder fails is an outage, or
// a flaky endpoint: the step fails, to be waited out, and no record is
// refused or keeps its strikes for it. A struck record not yet refused
// fails the step too, after the chunk's other records.
func (r *realm) oneByOne(ctx context.Context, info sdk.EmbedderInfo, recs []sdk.Record, texts []string, out [][]float32) error {
	again := func(err error) bool {
		return err != nil && !errors.Is(err, sdk.ErrInvalid) && ctx.Err() == nil && !errors.Is(err, errModelChanged)
	}
	var held error
	for i, t := range texts {
		v, err := embed(ctx, r.cfg.Embedder, info, sdk.EmbedDocument, []string{t})
		if again(err) {
			v, err = embed(ctx, r.cfg.Embedder, info, sdk.EmbedDocument, []string{t})
			if again(err) && !r.stillEmbeds(ctx, info) {
				r.mu.Lock()
				clear(r.strikes)
				r.mu.Unlock()
				return err
			}
		}
		switch {
		case err == nil:
			out[i] = v[0]
			r.embeddedText(t)
			r.mu.Lock()
			delete(r.strikes, recs[i].ID)
			r.mu.Unlock()
		case errors.Is(err, sdk.ErrInvalid):
			r.refuse(recs[i].ID, info.Model, err)
		case ctx.Err() != nil || errors.Is(err, errModelChanged):
			return err
		case r.struck(recs[i].ID, info.Model):
			r.refuse(recs[i].ID, info.Model, err)
		default:
			held = err
		}
	}
	return held
}

// stillEmbeds reports whether the embedder embeds two texts in two calls
// in a row (an endpoint failing calls at random shows it the likelier):
// the last text it embedded for the backlog (a record's, which an
// endpoint failing every real text fails too) or, when it has embedded
// none in this process (as after a restart), probeText; then probeText.
func (r *realm) stillEmbeds(ctx context.Context, info sdk.EmbedderInfo) bool {
	r.mu.Lock()
	control := r.control
	r.mu.Unlock()
	if control == "" {
		control = probeText
	}
	for _, t := range []string{control, probeText} {
		if _, err := embed(ctx, r.cfg.Embedder, info, sdk.EmbedDocument, []string{t}); err != nil {
			return false
		}
	}
	return true
}

// strike is a record's count of steps in a row that failed it under model.
type strike struct {
	model string
	n     int
}

// struck counts a step failing record id under model and reports whether
// it is the refuseAfter'th in a row, the strikes then forgotten.
func (r *realm) struck(id, model string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.strikes[id]
	if s.model != model {
		s = strike{model: model}
	}
	if s.n++; s.n >= refuseAfter {
		delete(r.strikes, id)
		return true
	}
	if r.strikes == nil || len(r.strikes) >= maxStrikes {
		r.strikes = map[string]strike{}
	}
	r.strikes[id] = s
	return false
}

// refuse remembers that model cannot embed record id, so it is not asked
// again until the model changes or RefusalRetry has passed, and logs it at
// most once a minute per realm, with the count since: a client writing
// records the embedder refuses must not write a log line each.
func (r *realm) refuse(id, model string, err error) {
	r.mu.Lock()
	now := time.Now()
	r.refused[id] = refusal{model, now}
	r.refusalsSince++
	n, log := r.refusalsSince, now.Sub(r.refusalLoggedAt) >= time.Minute
	if log {
		r.refusalLoggedAt, r.refusalsSince = now, 0
	}
	if len(r.refused) >= r.sweepAt {
		// Doubling the threshold keeps the sweeps' cost to a constant per
		// refusal, and the map within twice the refusals still in force.
		r.dropLapsed()
		r.sweepAt = max(2*len(r.refused), minSweep)
	}
	r.mu.Unlock()
	if log {
		r.opts.Logger.Warn("the embedder refused or failed records; they stay without a vector until asked again",
			"realm", r.cfg.Name, "records", n, "last_record", id, "error", err)
	}
}

// isZero reports whether v has no nonzero component.
func isZero(v []float32) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

// Ready waits until realm's embedder answers its Info, so that a caller
// about to wait on the backlog hears of an embedder that cannot start (a
// missing table, a refused config) instead of waiting without end. When
// ctx ends first it answers the embedder's last error. A realm without an
// embedder is ready.
func (e *Engine) Ready(ctx context.Context, realm string) error {
	r := e.realm(realm)
	if r == nil {
		return nil
	}
	var last error
	for {
		_, err := r.embedderInfo(ctx, true)
		if err == nil {
			return nil
		}
		if last == nil || ctx.Err() == nil {
			last = err // not the context's end, which says nothing of the embedder
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("realm %q: %w", realm, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitDrained wakes realm's backlog and waits until every live record
// of it has a vector from the current model (records the embedder
// refused aside), or ctx ends. A realm without an embedder is drained.
func (e *Engine) WaitDrained(ctx context.Context, realm string) error {
	r := e.realm(realm)
	if r == nil {
		return nil
	}
	e.Written(realm)
	for {
		drained, err := r.drained(ctx)
		if drained {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for realm %q's embeddings: %w (last: %v)", realm, ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// drained reports whether every record missing a vector from the current
// model is one the embedder refused, looking past whole pages of them.
func (r *realm) drained(ctx context.Context) (bool, error) {
	info, err := r.embedderInfo(ctx, false)
	if err != nil {
		return false, err
	}
	for after := ""; ; {
		ids, err := r.cfg.Vectors.MissingVectors(ctx, r.cfg.Name, info.Model, after, r.opts.Batch)
		if err != nil || len(ids) == 0 {
			return err == nil, err
		}
		if len(r.notRefused(asRecords(ids), info.Model)) > 0 || ids[len(ids)-1] == after {
			return false, nil
		}
		after = ids[len(ids)-1]
	}
}

func asRecords(ids []string) []sdk.Record {
	out := make([]sdk.Record, len(ids))
	for i, id := range ids {
		out[i].ID = id
	}
	return out
}

// Status is one realm's semantic state, for /v1/plugins and metrics.
type Status struct {
	Realm    string `json:"realm"`
	Model    string `json:"model,omitempty"`
	State    string `json:"state"`
	Embedded int64  `json:"embedded"`
	// Rate is records embedded per second over the last backlog step.
	Rate      float64          `json:"rate_per_second,omitempty"`
	Fallbacks map[string]int64 `json:"fallbacks,omitempty"`
	LastError string           `json:"last_error,omitempty"`
	// Refused counts records the embedder refused, which stay without a
	// vector until they are asked again (Options.RefusalRetry).
	Refused int `json:"refused,omitempty"`
	// QueriesPausedUntil is set while recalls do not ask the embedder,
	// which failed the last queries; a recall then probes it.
	QueriesPausedUntil *time.Time `json:"queries_paused_until,omitempty"`
}

// Status answers every realm's state, by realm name.
func (e *Engine) Status() []Status {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	realms := make([]*realm, 0, len(e.realms))
	for _, r := range e.realms {
		realms = append(realms, r)
	}
	e.mu.Unlock()
	out := make([]Status, 0, len(realms))
	for _, r := range realms {
		out = append(out, r.status())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Realm < out[j].Realm })
	return out
}

func (r *realm) status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	// A refusal past its retry is no longer counted.
	r.dropLapsed()
	s := Status{Realm: r.cfg.Name, State: r.state, Embedded: r.embedded, Rate: r.rate, LastError: r.lastErr, Refused: len(r.refused)}
	if r.info != nil {
		s.Model = r.info.Model
	}
	if r.queries.pause > 0 {
		until := r.queries.until.UTC()
		s.QueriesPausedUntil = &until
	}
	if len(r.fallbacks) > 0 {
		s.Fallbacks = make(map[string]int64, len(r.fallbacks))
		for k, v := range r.fallbacks {
			s.Fallbacks[k] = v
		}
	}
	return s
}
