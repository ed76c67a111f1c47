package bench

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// lmeFake answers recall with a fixed ranking of turn bodies and inject
// with a fixed set, so the metrics can be checked by hand.
type lmeFake struct {
	byBody   map[string]string // body → id
	ranking  []string          // bodies, best first
	injected []string          // bodies
	excerpts []string          // bodies of injected shown as excerpts
}

func (f *lmeFake) Remember(_ context.Context, _ string, recs []Record) ([]string, error) {
	ids := make([]string, len(recs))
	for i, r := range recs {
		if f.byBody[r.Body] == "" {
			f.byBody[r.Body] = "id-" + r.Body
		}
		ids[i] = f.byBody[r.Body]
	}
	return ids, nil
}

func (f *lmeFake) Recall(_ context.Context, _, _, _ string, limit int, _ time.Time) ([]string, error) {
	var out []string
	for _, b := range f.ranking[:min(limit, len(f.ranking))] {
		out = append(out, f.byBody[b])
	}
	return out, nil
}

func (f *lmeFake) Inject(_ context.Context, _, _, _, _ string, _ time.Time) (Injection, error) {
	out := Injection{Bytes: 100}
	for _, b := range f.injected {
		out.IDs = append(out.IDs, f.byBody[b])
	}
	for _, b := range f.excerpts {
		out.Excerpts = append(out.Excerpts, f.byBody[b])
	}
	return out, nil
}

func TestEvaluateLongMemEval(t *testing.T) {
	session := func(id string, bodies ...string) LMESession {
		s := LMESession{ID: id, Date: time.Date(2023, 5, 1, 10, 0, 0, 0, time.UTC)}
		for _, b := range bodies {
			s.Turns = append(s.Turns, LMETurn{Role: "user", Content: b, Evidence: strings.HasPrefix(b, "ev")})
		}
		return s
	}
	q := LongMemEval{ID: "q1", Type: "multi-session", Question: "what?", AnswerSessions: []string{"a", "b"},
		Sessions: []LMESession{session("a", "ev1", "x1"), session("b", "x2", "ev2"), session("c", "x3", "x4")}}
	abs := q
	abs.ID = "q2_abs"
	// Sessions by best turn: c, a, b; evidence turns at ranks 2 and 6.
	f := &lmeFake{byBody: map[string]string{}, ranking: []string{"x3", "ev1", "x4", "x1", "x2", "ev2"}, injected: []string{"ev1", "x3"}}
	got, err := EvaluateLongMemEval(context.Background(), f, []LongMemEval{q, abs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Type != "all" || got[1].Type != "multi-session" {
		t.Fatalf("want an all and a multi-session row, got %+v", got)
	}
	r := got[0]
	ideal := 1 + 1/math.Log2(3)
	want := LMEScore{Type: "all", Questions: 1, AnyAt5: 1, AllAt5: 1, AllAt10: 1,
		NDCG10: (1/math.Log2(3) + 1/math.Log2(4)) / ideal, TurnAt10: 1, TurnQuestions: 1, Evidence: 0.5, Bytes: 100,
		// LongMemEval's discount: ranks 2 and 3 weigh 1 and 1/log2(3),
		// the ideal ranks 1 and 2 weigh 1 each.
		NDCG10LME: (1 + 1/math.Log2(3)) / 2}
	if math.Abs(r.NDCG10-want.NDCG10) > 1e-12 || math.Abs(r.NDCG10LME-want.NDCG10LME) > 1e-12 {
		t.Errorf("NDCG@10 %v and %v with LongMemEval's discount, want %v and %v", r.NDCG10, r.NDCG10LME, want.NDCG10, want.NDCG10LME)
	}
	r.NDCG10, r.NDCG10LME = want.NDCG10, want.NDCG10LME
	if r != want {
		t.Errorf("got %+v\nwant %+v", r, want)
	}
}

// TestEvidenceDeliveredWhole: an evidence turn counts as delivered only
// when its record is shown whole; shown as an excerpt, or with a body the
// envelope cuts, it may stop before the answer and is reported apart.
func TestEvidenceDeliveredWhole(t *testing.T) {
	long := "ev-long " + strings.Repeat("words of a long answer ", bodyBytes/20)
	session := func(id string, bodies ...string) LMESession {
		s := LMESession{ID: id, Date: time.Date(2023, 5, 1, 10, 0, 0, 0, time.UTC)}
		for _, b := range bodies {
			s.Turns = append(s.Turns, LMETurn{Role: "user", Content: b, Evidence: strings.HasPrefix(b, "ev")})
		}
		return s
	}
	q := LongMemEval{ID: "q1", Type: "multi-session", Question: "what?", AnswerSessions: []string{"a", "b"},
		Sessions: []LMESession{session("a", "ev1", "x1"), session("b", "x2", long)}}
	sample := Sample{Index: 0, Turns: []Turn{{DiaID: "D1:1", Text: "ev1"}, {DiaID: "D1:2", Text: "x1"}, {DiaID: "D2:1", Text: long, Session: 2}},
		Questions: []Question{{Text: "what?", Category: 1, Evidence: []string{"D1:1", "D2:1"}}}}
	for _, c := range []struct {
		name               string
		injected, excerpts []string
		evidence, cut      float64
	}{
		{"whole", []string{"ev1", "x1"}, nil, 0.5, 0},
		{"an excerpt", []string{"ev1", "x1"}, []string{"ev1"}, 0, 0.5},
		{"a long body shown whole is cut", []string{long}, nil, 0, 0.5},
		{"whole and an excerpt", []string{"ev1", long}, []string{long}, 0.5, 0.5},
		{"an excerpt of another record", []string{"ev1", "x1"}, []string{"x1"}, 0.5, 0},
	} {
		f := &lmeFake{byBody: map[string]string{}, ranking: []string{"x1"}, injected: c.injected, excerpts: c.excerpts}
		lme, err := EvaluateLongMemEval(context.Background(), f, []LongMemEval{q}, nil)
		if err != nil {
			t.Fatal(err)
		}
		locomo, err := EvaluateLoCoMo(context.Background(), f, []Sample{sample}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r := lme[0]; r.Evidence != c.evidence || r.EvidenceCut != c.cut {
			t.Errorf("%s: LongMemEval evidence %v, cut %v; want %v, %v", c.name, r.Evidence, r.EvidenceCut, c.evidence, c.cut)
		}
		if r := locomo[0]; r.Evidence != c.evidence || r.EvidenceCut != c.cut {
			t.Errorf("%s: LoCoMo evidence %v, cut %v; want %v, %v", c.name, r.Evidence, r.EvidenceCut, c.evidence, c.cut)
		}
	}
}

func TestRankSessionsAndHits(t *testing.T) {
	ranked := rankSessions([]string{"s1#3", "s2#0", "s1#1", "answer_x#2"})
	if !slices.Equal(ranked, []string{"s1", "s2", "answer_x"}) {
		t.Fatalf("sessions %v", ranked)
	}
	for _, c := range []struct {
		want []string
		k, n int
	}{{[]string{"s2"}, 1, 0}, {[]string{"s2"}, 2, 1}, {[]string{"s1", "answer_x"}, 5, 2}, {[]string{"zz"}, 5, 0}} {
		if got := sessionHits(c.want, ranked, c.k); got != c.n {
			t.Errorf("sessionHits(%v, k=%d) = %d, want %d", c.want, c.k, got, c.n)
		}
	}
}

// TestLMETurnRecordNamesItsSpeaker: each turn is tagged with its speaker,
// as recall ranks the user's own turns by (coordinator/speaker).
func TestLMETurnRecordNamesItsSpeaker(t *testing.T) {
	s := LMESession{ID: "s1", Date: time.Date(2023, 5, 1, 10, 0, 0, 0, time.UTC), Turns: []LMETurn{
		{Role: "user", Content: "I jogged for 30 minutes."}, {Role: "assistant", Content: "Well done."}, {Role: "system", Content: "x"}}}
	for i, want := range [][]string{{"memhost:user"}, {"memhost:assistant"}, nil} {
		r := LMETurnRecord("lme1", s, i)
		if !slices.Equal(r.Tags, want) || r.Thread == nil || r.Thread.Seq != int64(i) || r.Title != s.Turns[i].Role {
			t.Errorf("turn %d: tags %q, thread %+v, title %q; want tags %q", i, r.Tags, r.Thread, r.Title, want)
		}
	}
}

// TestNDCGDiscounts: the standard discount weighs rank i (from 1)
// 1/log2(i+1); LongMemEval's weighs ranks 1 and 2 alike, then 1/log2(i).
func TestNDCGDiscounts(t *testing.T) {
	ranked := []string{"x", "a", "y", "b"}
	for _, c := range []struct {
		name     string
		want     []string
		std, lme float64
	}{
		{"first", []string{"x"}, 1, 1},
		{"second", []string{"a"}, 1 / math.Log2(3), 1},
		{"second and fourth", []string{"a", "b"}, (1/math.Log2(3) + 1/math.Log2(5)) / (1 + 1/math.Log2(3)), (1 + 1/math.Log2(4)) / 2},
		{"missing", []string{"z"}, 0, 0},
		{"none wanted", nil, 0, 0},
	} {
		std, lme := ndcg(c.want, ranked, 10, standardDiscount), ndcg(c.want, ranked, 10, lmeDiscount)
		if math.Abs(std-c.std) > 1e-12 || math.Abs(lme-c.lme) > 1e-12 {
			t.Errorf("%s: NDCG %v, LongMemEval's %v; want %v, %v", c.name, std, lme, c.std, c.lme)
		}
	}
}
