package coordinator

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/memhost/memhost/sdk"
)

// TraceSink receives one TurnTrace per turn, build, guide render, defang
// and compaction reset, so an operator can later see what memory put in
// front of the model and why the rest was left out. Trace is called on
// the request's path: it must not block (queue and drop instead) and
// must not keep the trace's slices past the call if it mutates them.
type TraceSink interface {
	Trace(t TurnTrace)
}

// Trace event kinds.
const (
	TraceInject = "inject" // a turn, build or guide injection (or its skip)
	TraceDefang = "defang" // forged markers neutralised in an inbound message
	TraceReset  = "reset"  // a compaction reset the session's budget and dedup set
)

// Reasons a candidate record was left out of an injection.
const (
	ExcludedBudget     = "budget"      // it did not fit in what was left of the byte budget
	ExcludedMaxEntries = "max_entries" // the entry cap was reached first
	ExcludedDedup      = "dedup"       // already injected in this session
	ExcludedRepeat     = "repeat"      // an included record says the same
	ExcludedSelector   = "selector"    // a working-set row the selector did not pick
	ExcludedStatus     = "status"      // expired or no longer active
	ExcludedTrust      = "trust"       // below the trust the surface asks for
)

// maxTraceExcluded bounds the left-out records one trace lists: the
// selector's working set alone may hold hundreds of rows.
const maxTraceExcluded = 50

// maxTraceTitle bounds a title kept in a trace.
const maxTraceTitle = 160

// TurnTrace is what one turn did. It never holds the envelope's nonce or
// text: only ids, titles, sizes and reasons.
type TurnTrace struct {
	Realm    string    `json:"realm"`
	Identity string    `json:"identity"`
	Session  string    `json:"session,omitempty"`
	Surface  Surface   `json:"surface"`
	Kind     string    `json:"kind"`
	At       time.Time `json:"at"`
	// QueryBytes is the size of the query recalled with (the text itself
	// is the user's and is not kept).
	QueryBytes int        `json:"query_bytes"`
	SkipReason SkipReason `json:"skip_reason"`
	Bytes      int        `json:"bytes"`
	// Budget is the byte budget the render had ("" skip: 0).
	Budget   int           `json:"budget"`
	Included []TraceRecord `json:"included"`
	Excluded []TraceRecord `json:"excluded"`
	// OutOfScope counts the records plugins answered outside the turn's
	// scopes (a provider or selector that ignored its query). They are
	// left out and never named: they are other identities' memory, and
	// the trace is read by the turn's identity's application.
	OutOfScope int `json:"out_of_scope,omitempty"`
	// DedupExcluded counts the records injected earlier in the session
	// that the recall was asked to leave out: whether this turn's query
	// matched them is not known, so they are counted, not listed (a
	// record the recall answered anyway is listed as dedup).
	DedupExcluded int `json:"dedup_excluded,omitempty"`
	DefangHits    int `json:"defang_hits"`
}

// TraceRecord is one record in a trace.
type TraceRecord struct {
	ID     string    `json:"id"`
	Title  string    `json:"title,omitempty"`
	Scope  sdk.Scope `json:"scope,omitempty"`
	Trust  sdk.Trust `json:"trust,omitempty"`
	Bytes  int       `json:"bytes,omitempty"`
	Score  float64   `json:"score,omitempty"`
	Reason string    `json:"reason,omitempty"`
	// NeighbourOf names the included record this one was shown beside,
	// as its thread neighbour.
	NeighbourOf string `json:"neighbour_of,omitempty"`
	// Forgotten: the record was forgotten since, and its title with it.
	Forgotten bool `json:"forgotten,omitempty"`
}

// traceNotes gathers a turn's trace as it runs; nil when no sink is set,
// so an untraced turn does no extra work.
type traceNotes struct {
	query      int
	budget     int
	candidates []sdk.Record
	// neighbours are the candidates' thread neighbours, by candidate id.
	neighbours map[string][]sdk.Record
	scores     map[string]float64
	dedup      map[string]bool
	// suppressed are the ids the session injected before: the recall was
	// told to leave them out, so they are counted (DedupExcluded).
	suppressed []string
	rendered   Rendered
	dropped    []TraceRecord
	// outOfScope counts the records plugins answered outside the scopes;
	// atomic, as a build lists its scopes' manifests concurrently.
	outOfScope atomic.Int64
}

type traceKey struct{}

// notesFrom answers the notes a traced turn put in ctx.
func notesFrom(ctx context.Context) *traceNotes {
	n, _ := ctx.Value(traceKey{}).(*traceNotes)
	return n
}

// noteRecalled keeps hit scores and the hits keepReadable is about to
// drop as already injected. A hit outside the scopes is not noted: its
// title and scope are another identity's (outOfScope counts it).
func (n *traceNotes) noteRecalled(recs []sdk.Record, scores []float64, scopes []sdk.Scope, suppressed []string) {
	if n == nil {
		return
	}
	if n.scores == nil {
		n.scores = map[string]float64{}
	}
	for i := range recs {
		r := &recs[i]
		if !slices.Contains(scopes, r.Scope) {
			continue
		}
		if scores != nil {
			n.scores[r.ID] = scores[i]
		}
		if slices.Contains(suppressed, r.ID) {
			n.drop(r, ExcludedDedup)
		}
	}
}

// noteUnselected records working-set rows the selector passed over; the
// rows are the scoped ones the selector was shown.
func (n *traceNotes) noteUnselected(rows []sdk.ManifestRow, picked []string) {
	if n == nil {
		return
	}
	for _, row := range rows {
		if !slices.Contains(picked, row.ID) {
			n.dropRow(TraceRecord{ID: row.ID, Title: row.Title, Scope: row.Scope, Reason: ExcludedSelector})
		}
	}
}

// record answers the candidate or neighbour of id, nil when none is.
func (n *traceNotes) record(id string) *sdk.Record {
	if i := slices.IndexFunc(n.candidates, func(r sdk.Record) bool { return r.ID == id }); i >= 0 {
		return &n.candidates[i]
	}
	for _, recs := range n.neighbours {
		if i := slices.IndexFunc(recs, func(r sdk.Record) bool { return r.ID == id }); i >= 0 {
			return &recs[i]
		}
	}
	return nil
}

func (n *traceNotes) drop(r *sdk.Record, reason string) {
	n.dropRow(TraceRecord{ID: r.ID, Title: r.Title, Scope: r.Scope, Trust: r.Trust, Reason: reason})
}

func (n *traceNotes) dropRow(t TraceRecord) {
	if len(n.dropped) < maxTraceExcluded {
		t.Title = sdk.CutText(t.Title, maxTraceTitle)
		n.dropped = append(n.dropped, t)
	}
}

// emit sends the trace of an injection on surface to the sink.
func (c *Coordinator) emit(id sdk.Identity, session string, surface Surface, skip SkipReason, n *traceNotes, maxEntries int) {
	t := TurnTrace{
		Realm: id.Realm, Identity: id.ID, Session: session, Surface: surface, Kind: TraceInject, At: c.now().UTC(),
		QueryBytes: n.query, SkipReason: skip, Bytes: n.rendered.Bytes, Budget: n.budget,
		Included: []TraceRecord{}, Excluded: slices.Clone(n.dropped), OutOfScope: int(n.outOfScope.Load()),
	}
	if t.Excluded == nil {
		t.Excluded = []TraceRecord{}
	}
	now := c.now()
	for i := range n.candidates {
		r := &n.candidates[i]
		if _, beside := n.rendered.NeighbourOf[r.ID]; beside {
			continue // listed below, beside its record
		}
		if k := slices.Index(n.rendered.IDs, r.ID); k >= 0 {
			t.Included = append(t.Included, TraceRecord{
				ID: r.ID, Title: sdk.CutText(r.Title, maxTraceTitle), Scope: r.Scope, Trust: r.Trust,
				Bytes: n.rendered.RecordBytes[k], Score: n.scores[r.ID],
			})
			continue
		}
		if len(t.Excluded) >= maxTraceExcluded {
			continue
		}
		reason := ExcludedBudget
		switch {
		case n.dedup[r.ID]:
			reason = ExcludedDedup
		case slices.ContainsFunc(n.rendered.Repeats, func(x Repeat) bool { return x.ID == r.ID }):
			reason = ExcludedRepeat
		case !r.Recallable(now):
			reason = ExcludedStatus
		case maxEntries > 0 && len(n.rendered.IDs)-len(n.rendered.NeighbourOf) >= maxEntries:
			reason = ExcludedMaxEntries
		}
		t.Excluded = append(t.Excluded, TraceRecord{
			ID: r.ID, Title: sdk.CutText(r.Title, maxTraceTitle), Scope: r.Scope, Trust: r.Trust,
			Score: n.scores[r.ID], Reason: reason,
		})
	}
	// The neighbours shown, in the order the text shows them.
	for k, id := range n.rendered.IDs {
		of, beside := n.rendered.NeighbourOf[id]
		if !beside {
			continue
		}
		if r := n.record(id); r != nil {
			t.Included = append(t.Included, TraceRecord{
				ID: r.ID, Title: sdk.CutText(r.Title, maxTraceTitle), Scope: r.Scope, Trust: r.Trust,
				Bytes: n.rendered.RecordBytes[k], NeighbourOf: of,
			})
		}
	}
	for _, id := range n.suppressed {
		if !slices.ContainsFunc(t.Excluded, func(r TraceRecord) bool { return r.ID == id }) {
			t.DedupExcluded++
		}
	}
	c.trace.Trace(t)
}

// traceEvent sends a defang or reset event.
func (c *Coordinator) traceEvent(id sdk.Identity, session, kind string, hits int) {
	if c.trace == nil {
		return
	}
	c.trace.Trace(TurnTrace{
		Realm: id.Realm, Identity: id.ID, Session: session, Surface: SurfaceTurn, Kind: kind, At: c.now().UTC(),
		DefangHits: hits, Included: []TraceRecord{}, Excluded: []TraceRecord{},
	})
}

// DefangInboundInSession is DefangInbound for a message of session: a
// message with forged markers leaves a defang event in the session's
// trace.
func (c *Coordinator) DefangInboundInSession(ctx context.Context, id sdk.Identity, session string, content Content) (DefangResult, error) {
	out, err := c.DefangInbound(ctx, id, content)
	if err == nil && out.Hits > 0 {
		if id, err := c.identity(id); err == nil {
			c.traceEvent(id, session, TraceDefang, out.Hits)
		}
	}
	return out, err
}
