package bench

import (
	"context"
	"fmt"
	"github.com/memhost/memhost/coordinator/speaker"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/memhost/memhost/coordinator"
)

// Record is what the benchmark remembers: the HTTP API's record input.
type Record struct {
	Scope       string   `json:"scope"`
	Kind        string   `json:"kind"`
	Title       string   `json:"title"`
	Description string   `json:"description,omitempty"`
	Body        string   `json:"body"`
	Tags        []string `json:"tags,omitempty"`
	Thread      *Thread  `json:"thread,omitempty"`
	// OccurredAt is when the remembered thing happened, RFC 3339.
	OccurredAt string `json:"occurred_at,omitempty"`
}

// Thread is a record's place in a conversation, as the HTTP API takes it.
type Thread struct {
	ID  string `json:"id"`
	Seq int64  `json:"seq"`
}

// Target is a memhost the benchmark drives.
type Target interface {
	// Remember stores records in realm and answers their ids in order.
	Remember(ctx context.Context, realm string, recs []Record) ([]string, error)
	// Recall answers the ids of the top hits for identity, best first.
	// now, when not zero, is the reference time the query's time words
	// are read against (the request time otherwise).
	Recall(ctx context.Context, realm, identity, query string, limit int, now time.Time) ([]string, error)
	// Inject asks for the per-turn injection of content in a session.
	Inject(ctx context.Context, realm, identity, session, content string, now time.Time) (Injection, error)
}

// Injection is what a turn's injection delivered.
type Injection struct {
	// IDs are the injected records; Excerpts those of them shown as an
	// excerpt of their body (their observation's excerpt_of), not whole.
	IDs, Excerpts []string
	Bytes         int
}

// bodyBytes is the longest body the envelope shows whole (body_bytes of
// the default budgets, which the bench's hosts run with): a longer one is
// shown as an excerpt or cut to it.
var bodyBytes = coordinator.DefaultConfig().Budgets.BodyBytes

// split answers the injected records shown whole and those shown cut: an
// excerpt, or a body of more than bodyBytes (long holds those). A cut
// body may stop before the answer, so only whole records count as
// evidence delivered; the bench reports the evidence cut apart.
func (in Injection) split(long map[string]bool) (whole, cut []string) {
	for _, id := range in.IDs {
		if long[id] || slices.Contains(in.Excerpts, id) {
			cut = append(cut, id)
		} else {
			whole = append(whole, id)
		}
	}
	return whole, cut
}

// Settler is a Target with background work on what it stored (a host
// embedding new records); the evaluators call Settle after storing a
// question's records and before asking, so a ranking is measured on
// finished work.
type Settler interface {
	Settle(ctx context.Context, realm string) error
}

// settle calls t's Settle when it has one.
func settle(ctx context.Context, t Target, realm string) error {
	if s, ok := t.(Settler); ok {
		if err := s.Settle(ctx, realm); err != nil {
			return fmt.Errorf("settle: %w", err)
		}
	}
	return nil
}

// Identity is who remembers, recalls and compacts in the retention
// benchmark, its records in its identity's scope.
const Identity = "bench"

// LoCoMoRealm and LMERealm hold the retrieval benchmarks' records: each
// LoCoMo sample and each LongMemEval question is an identity of its own
// there, its records in its identity's scope, as the users of one
// deployment are. A realm ranks by its own statistics, so they are taken
// over every conversation written so far, as a deployment's are over its
// users', rather than over one conversation's few hundred turns.
const (
	LoCoMoRealm = "locomo"
	LMERealm    = "lme"
)

// RetrievalKs are the k of recall@k the benchmark reports.
var RetrievalKs = []int{5, 10, 20}

// Retrieval is the LoCoMo score of one split and category ("all" for the
// split's total).
type Retrieval struct {
	Split    string
	Category string
	// Questions counted (categories 1-4 with evidence).
	Questions int
	// TurnRecall[k] is the mean share of a question's evidence turns in
	// the top k; SessionRecall[k] the share of its evidence sessions hit.
	TurnRecall    map[int]float64
	SessionRecall map[int]float64
	// Evidence is the mean share of evidence turns a fresh session's turn
	// injection delivers whole at the default budget; EvidenceCut the
	// share it delivers only cut (see Injection.split), not counted in
	// Evidence; Bytes its mean size.
	Evidence, EvidenceCut float64
	Bytes                 float64
}

// EvaluateLoCoMo remembers every turn of each sample as one record (an
// identity of LoCoMoRealm per sample) and scores recall and injection for
// every question of categories 1-4 that has evidence.
func EvaluateLoCoMo(ctx context.Context, t Target, samples []Sample, progress func(done, total int)) ([]Retrieval, error) {
	type acc struct {
		n                     int
		turn, session         map[int]float64
		evidence, cut, nbytes float64
	}
	accs := map[[2]string]*acc{}
	add := func(split, cat string, turn, session map[int]float64, evidence, cut float64, nbytes int) {
		key := [2]string{split, cat}
		a := accs[key]
		if a == nil {
			a = &acc{turn: map[int]float64{}, session: map[int]float64{}}
			accs[key] = a
		}
		a.n++
		for k, v := range turn {
			a.turn[k] += v
		}
		for k, v := range session {
			a.session[k] += v
		}
		a.evidence += evidence
		a.cut += cut
		a.nbytes += float64(nbytes)
	}
	total := 0
	for _, s := range samples {
		total += len(s.Questions)
	}
	done := 0
	maxK := slices.Max(RetrievalKs)
	for _, s := range samples {
		ident := fmt.Sprintf("locomo%d", s.Index)
		byID, long, err := rememberTurns(ctx, t, LoCoMoRealm, ident, s.ID, s.Turns)
		if err == nil {
			err = settle(ctx, t, LoCoMoRealm)
		}
		if err != nil {
			return nil, fmt.Errorf("sample %d: %w", s.Index, err)
		}
		for qi, q := range s.Questions {
			done++
			if progress != nil {
				progress(done, total)
			}
			if q.Category < 1 || q.Category > 4 || len(q.Evidence) == 0 {
				continue
			}
			ids, err := t.Recall(ctx, LoCoMoRealm, ident, q.Text, maxK, s.End())
			if err != nil {
				return nil, fmt.Errorf("sample %d question %d: recall: %w", s.Index, qi, err)
			}
			turn, session := map[int]float64{}, map[int]float64{}
			for _, k := range RetrievalKs {
				// The top k records, and every turn each holds.
				top := keysOf(byID, ids[:min(k, len(ids))])
				turn[k] = share(q.Evidence, top)
				session[k] = sessionShare(q.Evidence, top)
			}
			inj, err := t.Inject(ctx, LoCoMoRealm, ident, fmt.Sprintf("%s-q%d", ident, qi), q.Text, s.End())
			if err != nil {
				return nil, fmt.Errorf("sample %d question %d: inject: %w", s.Index, qi, err)
			}
			whole, cut := inj.split(long)
			delivered, partly := keysOf(byID, whole), keysOf(byID, cut)
			evidence := share(q.Evidence, delivered)
			evidenceCut := share(q.Evidence, append(partly, delivered...)) - evidence
			split := Split(s.Index)
			add(split, "all", turn, session, evidence, evidenceCut, inj.Bytes)
			add(split, fmt.Sprint(q.Category), turn, session, evidence, evidenceCut, inj.Bytes)
		}
	}
	var out []Retrieval
	for key, a := range accs {
		r := Retrieval{Split: key[0], Category: key[1], Questions: a.n, TurnRecall: map[int]float64{}, SessionRecall: map[int]float64{}}
		for _, k := range RetrievalKs {
			r.TurnRecall[k] = a.turn[k] / float64(a.n)
			r.SessionRecall[k] = a.session[k] / float64(a.n)
		}
		r.Evidence, r.EvidenceCut = a.evidence/float64(a.n), a.cut/float64(a.n)
		r.Bytes = a.nbytes / float64(a.n)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Retrieval) int {
		if c := strings.Compare(a.Split, b.Split); c != 0 {
			return c
		}
		return strings.Compare(a.Category, b.Category)
	})
	return out, nil
}

// TurnRecord is the record a LoCoMo turn of conversation conv is
// remembered as in identity's scope: an episodic record in the
// conversation's thread, so a provider indexes it with its neighbouring
// turns, tagged with its speaker's name (speaker.NameTag).
func TurnRecord(identity, conv string, t Turn) Record {
	r := Record{Scope: "identity:" + identity, Kind: "fact", Title: t.Speaker, Description: t.Date, Body: t.Text,
		Thread: &Thread{ID: conv, Seq: int64(t.Seq)}}
	if tag := speaker.NameTag(t.Speaker); tag != "" {
		r.Tags = []string{tag}
	}
	if at, ok := locomoTime(t.Date); ok {
		r.OccurredAt = at.Format(time.RFC3339)
	}
	return r
}

// rememberTurns stores the turns in batches and maps record id → the dia
// ids it holds; long holds the records of a body over bodyBytes.
func rememberTurns(ctx context.Context, t Target, realm, identity, conv string, turns []Turn) (byID map[string][]string, long map[string]bool, err error) {
	return rememberRecords(ctx, t, realm, len(turns), func(i int) (Record, string) {
		return TurnRecord(identity, conv, turns[i]), turns[i].DiaID
	})
}

// rememberRecords stores the n records recordOf answers, with their
// evidence keys, in batches, and maps record id → the evidence keys it
// holds (identical turns share one record); long holds the records of a
// body over bodyBytes.
func rememberRecords(ctx context.Context, t Target, realm string, n int, recordOf func(i int) (Record, string)) (map[string][]string, map[string]bool, error) {
	byID, long := make(map[string][]string, n), map[string]bool{}
	const batch = 500
	for start := 0; start < n; start += batch {
		recs := make([]Record, min(n, start+batch)-start)
		keys := make([]string, len(recs))
		for i := range recs {
			recs[i], keys[i] = recordOf(start + i)
		}
		ids, err := t.Remember(ctx, realm, recs)
		if err != nil {
			return nil, nil, err
		}
		if len(ids) != len(recs) {
			return nil, nil, fmt.Errorf("remember answered %d ids for %d records", len(ids), len(recs))
		}
		for i, id := range ids {
			if len(recs[i].Body) > bodyBytes {
				long[id] = true
			}
			byID[id] = append(byID[id], keys[i])
		}
	}
	return byID, long, nil
}

// keysOf answers the evidence keys the records of ids hold, in order.
func keysOf(byID map[string][]string, ids []string) []string {
	var out []string
	for _, id := range ids {
		out = append(out, byID[id]...)
	}
	return out
}

// allFirst orders table rows by category or question type, the "all" row
// first.
func allFirst(a, b string) int {
	if (a == "all") != (b == "all") {
		if a == "all" {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// share is the fraction of want found in got.
func share(want, got []string) float64 {
	n := 0
	for _, w := range want {
		if slices.Contains(got, w) {
			n++
		}
	}
	return float64(n) / float64(len(want))
}

// sessionShare is the fraction of want's sessions that got hits.
func sessionShare(want, got []string) float64 {
	sessions := map[int]bool{}
	for _, w := range want {
		sessions[sessionOf(w)] = false
	}
	for _, g := range got {
		if _, ok := sessions[sessionOf(g)]; ok && g != "" {
			sessions[sessionOf(g)] = true
		}
	}
	n := 0
	for _, hit := range sessions {
		if hit {
			n++
		}
	}
	return float64(n) / float64(len(sessions))
}

// WriteRetrievalTable renders per-provider results as a Markdown table,
// dev and held-out side by side for each row.
func WriteRetrievalTable(w io.Writer, results map[string][]Retrieval, categories bool) {
	fmt.Fprintln(w, "| provider | category | split | questions | turn R@5 | turn R@10 | turn R@20 | session R@10 | evidence under budget | evidence cut (not counted) | bytes/turn |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	providers := make([]string, 0, len(results))
	for p := range results {
		providers = append(providers, p)
	}
	slices.Sort(providers)
	for _, p := range providers {
		rows := slices.Clone(results[p])
		slices.SortStableFunc(rows, func(a, b Retrieval) int { return allFirst(a.Category, b.Category) })
		for _, r := range rows {
			if !categories && r.Category != "all" {
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.0f |\n", p, r.Category, r.Split, r.Questions,
				r.TurnRecall[5], r.TurnRecall[10], r.TurnRecall[20], r.SessionRecall[10], r.Evidence, r.EvidenceCut, r.Bytes)
		}
	}
}
