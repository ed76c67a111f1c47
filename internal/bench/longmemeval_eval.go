package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/memhost/memhost/coordinator/speaker"
)

// LMEDepth is how many hits a LongMemEval question recalls: enough turns
// to rank ten distinct sessions by their best turn in most haystacks.
const LMEDepth = 100

// LMEScore is the LongMemEval score of one question type ("all" for the
// total), over the questions with evidence (abstention ones left out).
type LMEScore struct {
	Type      string
	Questions int
	// Session metrics rank sessions by their best-ranked turn (the
	// LongMemEval convention): AnyAt5 is the share of questions with an
	// evidence session in the top 5, AllAt5 and AllAt10 with all of them,
	// NDCG10 the mean binary NDCG@10 of the session ranking with the
	// standard discount log2(rank+1), NDCG10LME with LongMemEval's own
	// (see ndcgLME).
	AnyAt5, AllAt5, AllAt10, NDCG10, NDCG10LME float64
	// TurnAt10 is the mean share of evidence turns in the top 10 turns,
	// over the TurnQuestions that mark evidence turns.
	TurnAt10      float64
	TurnQuestions int
	// Evidence is the mean share of evidence turns a fresh session's turn
	// injection delivers whole at the default budget; EvidenceCut the
	// share it delivers only cut (see Injection.split), not counted in
	// Evidence; Bytes its mean size.
	Evidence, EvidenceCut float64
	Bytes                 float64
}

// LMETurnRecord is the record turn i of session s is remembered as in
// identity's scope: one record per turn in the session's thread, the role
// as title and as a speaker's tag, and the session date as description.
// Questions share sessions, so the thread is the identity's copy of the
// session.
func LMETurnRecord(identity string, s LMESession, i int) Record {
	t := s.Turns[i]
	return Record{Scope: "identity:" + identity, Kind: "fact", Title: t.Role, Description: s.Date.Format(lmeTimeLayout), Body: t.Content, Tags: speaker.Tags(t.Role),
		Thread: &Thread{ID: identity + "/" + s.ID, Seq: int64(i)}, OccurredAt: s.Date.Format(time.RFC3339)}
}

// EvaluateLongMemEval remembers each question's haystack as an identity of
// LMERealm (one record per turn) and scores recall and a fresh session's
// injection for every question that is not an abstention.
func EvaluateLongMemEval(ctx context.Context, t Target, questions []LongMemEval, progress func(done, total int)) ([]LMEScore, error) {
	accs := map[string]*LMEScore{}
	add := func(typ string, q lmeQuestionScore) {
		a := accs[typ]
		if a == nil {
			a = &LMEScore{Type: typ}
			accs[typ] = a
		}
		a.Questions++
		a.AnyAt5 += q.anyAt5
		a.AllAt5 += q.allAt5
		a.AllAt10 += q.allAt10
		a.NDCG10 += q.ndcg10
		a.NDCG10LME += q.ndcg10LME
		if q.hasTurns {
			a.TurnQuestions++
			a.TurnAt10 += q.turnAt10
		}
		a.Evidence += q.evidence
		a.EvidenceCut += q.evidenceCut
		a.Bytes += float64(q.bytes)
	}
	for i, q := range questions {
		if progress != nil {
			progress(i, len(questions))
		}
		if q.Abstention() {
			continue
		}
		s, err := evaluateLMEQuestion(ctx, t, q)
		if err != nil {
			return nil, fmt.Errorf("longmemeval question %s: %w", q.ID, err)
		}
		add("all", s)
		add(q.Type, s)
	}
	if progress != nil {
		progress(len(questions), len(questions))
	}
	out := make([]LMEScore, 0, len(accs))
	for _, a := range accs {
		n := float64(a.Questions)
		a.AnyAt5, a.AllAt5, a.AllAt10, a.NDCG10, a.NDCG10LME = a.AnyAt5/n, a.AllAt5/n, a.AllAt10/n, a.NDCG10/n, a.NDCG10LME/n
		a.Evidence, a.EvidenceCut, a.Bytes = a.Evidence/n, a.EvidenceCut/n, a.Bytes/n
		if a.TurnQuestions > 0 {
			a.TurnAt10 /= float64(a.TurnQuestions)
		}
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b LMEScore) int { return allFirst(a.Type, b.Type) })
	return out, nil
}

type lmeQuestionScore struct {
	anyAt5, allAt5, allAt10, ndcg10 float64
	ndcg10LME                       float64
	turnAt10                        float64
	hasTurns                        bool
	evidence, evidenceCut           float64
	bytes                           int
}

func evaluateLMEQuestion(ctx context.Context, t Target, q LongMemEval) (lmeQuestionScore, error) {
	var s lmeQuestionScore
	ident := fmt.Sprintf("lme%d", q.Index)
	keys, long, err := rememberLME(ctx, t, ident, q)
	if err == nil {
		err = settle(ctx, t, LMERealm)
	}
	if err != nil {
		return s, err
	}
	ids, err := t.Recall(ctx, LMERealm, ident, q.Question, LMEDepth, q.Asked)
	if err != nil {
		return s, fmt.Errorf("recall: %w", err)
	}
	ranked := keysOf(keys, ids) // turn keys, best first
	sessions := rankSessions(ranked)
	s.anyAt5 = boolScore(sessionHits(q.AnswerSessions, sessions, 5) > 0)
	s.allAt5 = boolScore(sessionHits(q.AnswerSessions, sessions, 5) == len(q.AnswerSessions))
	s.allAt10 = boolScore(sessionHits(q.AnswerSessions, sessions, 10) == len(q.AnswerSessions))
	s.ndcg10 = ndcg(q.AnswerSessions, sessions, 10, standardDiscount)
	s.ndcg10LME = ndcg(q.AnswerSessions, sessions, 10, lmeDiscount)
	evidence := q.Evidence()
	if s.hasTurns = len(evidence) > 0; s.hasTurns {
		s.turnAt10 = share(evidence, ranked[:min(10, len(ranked))])
	}
	inj, err := t.Inject(ctx, LMERealm, ident, "lme-"+q.ID, q.Question, q.Asked)
	if err != nil {
		return s, fmt.Errorf("inject: %w", err)
	}
	whole, cut := inj.split(long)
	delivered, partly := keysOf(keys, whole), keysOf(keys, cut)
	s.bytes = inj.Bytes
	score := func(delivered []string) float64 {
		if s.hasTurns {
			return share(evidence, delivered)
		}
		// No turn is marked: a delivered turn of an evidence session is
		// the evidence.
		return float64(sessionHits(q.AnswerSessions, rankSessions(delivered), len(delivered))) / float64(len(q.AnswerSessions))
	}
	s.evidence = score(delivered)
	s.evidenceCut = score(append(partly, delivered...)) - s.evidence
	return s, nil
}

// rememberLME stores a question's haystack and maps record id → the turn
// keys it holds; long holds the records of a body over bodyBytes.
func rememberLME(ctx context.Context, t Target, identity string, q LongMemEval) (map[string][]string, map[string]bool, error) {
	type turn struct {
		s *LMESession
		i int
	}
	var turns []turn
	for si := range q.Sessions {
		for i := range q.Sessions[si].Turns {
			turns = append(turns, turn{&q.Sessions[si], i})
		}
	}
	byID, long, err := rememberRecords(ctx, t, LMERealm, len(turns), func(i int) (Record, string) {
		return LMETurnRecord(identity, *turns[i].s, turns[i].i), TurnKey(turns[i].s.ID, turns[i].i)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("remember: %w", err)
	}
	return byID, long, nil
}

// rankSessions answers the sessions of ranked turn keys by their best
// turn, best first.
func rankSessions(ranked []string) []string {
	var out []string
	for _, k := range ranked {
		s := k[:strings.LastIndexByte(k, '#')]
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// sessionHits counts the wanted sessions among the first k ranked.
func sessionHits(want, ranked []string, k int) int {
	n := 0
	for _, s := range ranked[:min(k, len(ranked))] {
		if slices.Contains(want, s) {
			n++
		}
	}
	return n
}

// ndcg is binary NDCG@k of a session ranking, a hit at 0-based rank i
// weighing discount(i).
func ndcg(want, ranked []string, k int, discount func(i int) float64) float64 {
	dcg, ideal := 0.0, 0.0
	for i, s := range ranked[:min(k, len(ranked))] {
		if slices.Contains(want, s) {
			dcg += discount(i)
		}
	}
	for i := range min(k, len(want)) {
		ideal += discount(i)
	}
	if ideal == 0 {
		return 0
	}
	return dcg / ideal
}

// standardDiscount is the usual NDCG weight of 0-based rank i,
// 1/log2(i+2).
func standardDiscount(i int) float64 { return 1 / math.Log2(float64(i+2)) }

// lmeDiscount is the weight LongMemEval's own evaluation (eval_utils.py,
// dcg) gives 0-based rank i: 1 for the first, 1/log2(i+1) after, so its
// first two ranks weigh the same.
func lmeDiscount(i int) float64 {
	if i == 0 {
		return 1
	}
	return 1 / math.Log2(float64(i+1))
}

func boolScore(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// WriteLMETable renders per-provider LongMemEval scores as a Markdown
// table.
func WriteLMETable(w io.Writer, results map[string][]LMEScore) {
	fmt.Fprintln(w, "| provider | question type | questions | session any@5 | session all@5 | session all@10 | NDCG@10 | NDCG@10, LongMemEval's discount | turn R@10 | evidence under budget | evidence cut (not counted) | bytes/turn |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, p := range slices.Sorted(maps.Keys(results)) {
		for _, r := range results[p] {
			fmt.Fprintf(w, "| %s | %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.0f |\n", p, r.Type, r.Questions,
				r.AnyAt5, r.AllAt5, r.AllAt10, r.NDCG10, r.NDCG10LME, r.TurnAt10, r.Evidence, r.EvidenceCut, r.Bytes)
		}
	}
}
