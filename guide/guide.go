package guide

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/tokenize"
)

// Source is what a guide recalls from and renders through.
// *coordinator.Coordinator is one: recall over the identity's composed
// scopes under the recall timeout, and the coordinator's envelope with
// the nonce of (identity, session).
type Source interface {
	Recall(ctx context.Context, id sdk.Identity, query string, limit int) ([]sdk.Hit, error)
	RenderEnvelope(ctx context.Context, id sdk.Identity, session string, recs []sdk.Record, maxBytes int) (coordinator.Rendered, error)
}

// configured is a Source that tells its recall timeout, as
// *coordinator.Coordinator does.
type configured interface {
	Config() coordinator.Config
}

// maxQueryBytes bounds the text a query is built from.
const maxQueryBytes = 4 << 10

// state is one guide session's memory of its last recall: the block it
// answered.
type state struct {
	block string
	query string // the query block was recalled with
	// answered: block was answered to the client. A state made afresh (a
	// session never started here, pushed out, or a restarted host) does
	// not know what the client holds, so its first answer is a change.
	answered bool
}

// recaller runs the guide's recall: fetch, filter, re-sort, render.
type recaller struct {
	src      Source
	maxBytes int // envelope cap; 0 is the coordinator's per-turn cap
	logger   hclog.Logger
}

// recall answers the block for query under filters f (normalized). An
// empty block means nothing to inject.
func (r *recaller) recall(ctx context.Context, id sdk.Identity, session, query string, f Filters) (string, error) {
	terms := tokenize.Terms(query)
	if len(terms) == 0 {
		return "", nil
	}
	// One recall deadline for both recalls below: each Recall applies the
	// timeout on its own, so a second one would double the wait.
	if c, ok := r.src.(configured); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Config().RecallTimeout)
		defer cancel()
	}
	fetch := f.TopK
	if f.active() {
		fetch = f.TopK * overFetch
	}
	hits, err := r.src.Recall(ctx, id, query, fetch)
	if err != nil {
		return "", err
	}
	kept := rank(hits, terms, f)
	// Filters starved the answer and the provider may hold more: ask once
	// more, for many more.
	if f.active() && len(kept) < f.TopK && len(hits) >= fetch {
		more := min(f.TopK*refetch, sdk.MaxBatch)
		if hits, err = r.src.Recall(ctx, id, query, more); err != nil {
			return "", err
		}
		kept = rank(hits, terms, f)
	}
	if len(kept) > f.TopK {
		kept = kept[:f.TopK]
	}
	if len(kept) == 0 {
		return "", nil
	}
	out, err := r.src.RenderEnvelope(ctx, id, session, kept, r.maxBytes)
	if err != nil {
		return "", err
	}
	return out.Text, nil
}

// rank filters hits and sorts them by local score, best first; ties keep
// the provider's order.
func rank(hits []sdk.Hit, terms []string, f Filters) []sdk.Record {
	type scored struct {
		rec   sdk.Record
		score float64
	}
	var keep []scored
	for i := range hits {
		r := &hits[i].Record
		if !f.keeps(r) {
			continue
		}
		s := Score(terms, r)
		if f.MinScore > 0 && s < f.MinScore {
			continue
		}
		keep = append(keep, scored{*r, s})
	}
	slices.SortStableFunc(keep, func(a, b scored) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return 0
	})
	out := make([]sdk.Record, len(keep))
	for i, k := range keep {
		out[i] = k.rec
	}
	return out
}

// start is the session-start recall: it always recalls, and its error is
// the caller's (fatal).
func (r *recaller) start(ctx context.Context, st *state, id sdk.Identity, session, task string, f Filters) (string, error) {
	query := compactQuery(task)
	block, err := r.recall(ctx, id, session, query, f)
	if err != nil {
		return "", err
	}
	st.block, st.query, st.answered = block, query, true
	return block, nil
}

// iterate is the before-iteration recall. A message without query terms
// (empty, or only stopwords and punctuation) asks nothing new: it recalls
// the last query again (a record of the block may have been forgotten
// since); a recall that renders what the last one did keeps the block
// byte for byte; a failed recall is logged and keeps it too.
func (r *recaller) iterate(ctx context.Context, st *state, id sdk.Identity, session, message string, f Filters) Iteration {
	query := compactQuery(message)
	if !tokenize.HasTerms(query) {
		query = st.query
	}
	if query == "" {
		changed := !st.answered
		st.answered = true
		return Iteration{Block: st.block, Changed: changed}
	}
	// An unchanged query is recalled too: a record of the block may have
	// been forgotten or replaced since, on this host or another, and a
	// forgotten record must not reach the model again. The block answers
	// unchanged, byte for byte, when the recall finds what it did, which
	// keeps the model's prefix cache warm.
	block, err := r.recall(ctx, id, session, query, f)
	if err != nil {
		// With the request's attributes (its id) from the context logger.
		r.logger.With(hclog.FromContext(ctx).ImpliedArgs()...).Warn("memory recall before an iteration failed; keeping the previous block",
			"realm", id.Realm, "identity", id.ID, "error", err)
		return Iteration{Block: st.block, RecallFailed: true}
	}
	changed := !st.answered || block != st.block
	st.block, st.query, st.answered = block, query, true
	return Iteration{Block: block, Changed: changed}
}

// Iteration is the block a before-iteration call answers.
type Iteration struct {
	Block string
	// Changed reports whether Block differs from the previous block.
	Changed bool
	// RecallFailed reports that the recall failed, so Block is the
	// previous block, kept.
	RecallFailed bool
}

// compactQuery collapses whitespace runs and trims, reading at most
// maxQueryBytes of s. The query is a copy: a session keeps it, and a cut
// of s (a task of one word) would keep all of s, the whole request.
func compactQuery(s string) string {
	if len(s) > maxQueryBytes {
		// At a character's start: the query must stay UTF-8.
		s = sdk.CutText(s, maxQueryBytes)
	}
	return strings.Clone(strings.Join(strings.FieldsFunc(s, unicode.IsSpace), " "))
}

// validate checks an identity and session key.
func validate(id sdk.Identity, session string) error {
	if err := id.Validate(); err != nil {
		return err
	}
	if err := coordinator.ValidateSessionKey(session); err != nil {
		return err
	}
	return nil
}

// Guide recalls memory into one agent session's context, for Go embedders
// (DESIGN 6): once at session start with the task as query (errors are
// fatal), and before every model iteration with the last user message
// (errors are logged), replacing its previous block. Configure it with the
// chainable With methods before the session starts. A Guide is safe for
// concurrent use.
type Guide struct {
	rec     recaller
	id      sdk.Identity
	session string
	name    string
	filters Filters

	mu sync.Mutex
	st state
}

// New builds a guide for one (identity, session), recalling from src.
func New(src Source, id sdk.Identity, session string) *Guide {
	return &Guide{rec: recaller{src: src, logger: hclog.NewNullLogger()}, id: id, session: session, name: DefaultBlockSource}
}

// WithTopK sets how many records to inject (default 5). Pick small:
// every recalled line spends prompt tokens.
func (g *Guide) WithTopK(k int) *Guide { g.filters.TopK = k; return g }

// WithMinScore drops records whose Score is below s, in [0, 1].
func (g *Guide) WithMinScore(s float64) *Guide { g.filters.MinScore = s; return g }

// WithRequiredTags keeps only records carrying all of tags.
func (g *Guide) WithRequiredTags(tags ...string) *Guide { g.filters.RequiredTags = tags; return g }

// WithExcludedTags drops records carrying any of tags.
func (g *Guide) WithExcludedTags(tags ...string) *Guide { g.filters.ExcludedTags = tags; return g }

// WithMaxBytes caps the rendered block (default: the coordinator's
// per-turn cap).
func (g *Guide) WithMaxBytes(n int) *Guide { g.rec.maxBytes = n; return g }

// WithLogger sets where before-iteration failures are logged.
func (g *Guide) WithLogger(l hclog.Logger) *Guide { g.rec.logger = l; return g }

// WithName sets the Source of the guide's block in Context.Guides
// (default "memory"), for a loop running several memory guides.
func (g *Guide) WithName(name string) *Guide { g.name = name; return g }

// Block answers the guide's current block ("" when it holds none).
func (g *Guide) Block() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.st.block
}

// Apply is the session-start recall: the task description is the query.
// An error is fatal to the session; c is then left as it was.
func (g *Guide) Apply(ctx context.Context, c *Context) error {
	if err := validate(g.id, g.session); err != nil {
		return err
	}
	if err := g.filters.Validate(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	block, err := g.rec.start(ctx, &g.st, g.id, g.session, c.Task, g.filters.normalized())
	if err != nil {
		return fmt.Errorf("guide: session-start recall: %w", err)
	}
	c.SetGuide(g.name, block)
	return nil
}

// ApplyBeforeIteration recalls with the last user message in c's history
// and replaces the guide's block, reporting whether it changed. Without a
// user message no recall is made and the block stays; the same query is
// recalled again (a record of the block may have been forgotten since),
// and the block stays byte-identical when the recall finds what it did
// (model prefix caches stay warm). A failed recall is logged and keeps
// the previous block.
func (g *Guide) ApplyBeforeIteration(ctx context.Context, c *Context) bool {
	msg, ok := c.LastUserMessage()
	if !ok || validate(g.id, g.session) != nil || g.filters.Validate() != nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	it := g.rec.iterate(ctx, &g.st, g.id, g.session, msg, g.filters.normalized())
	block, changed := it.Block, it.Changed
	if changed {
		c.SetGuide(g.name, block)
	}
	return changed
}
