package bench

import (
	"context"
	"fmt"
	"html"
	"io"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/memhost/memhost/coordinator/speaker"
	"github.com/memhost/memhost/internal/compaction"
)

// Message is one message of a replayed conversation, as the compaction
// API takes it.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// CompactTarget is a memhost whose compaction the retention benchmark
// drives.
type CompactTarget interface {
	Target
	// Compact sends every message evicted so far from conversation and
	// answers the summary the model would read.
	Compact(ctx context.Context, realm, identity, conversation string, evicted []Message) (string, error)
}

// Replay is a conversation replayed turn by turn, then questioned.
type Replay struct {
	Bench string // "LoCoMo" or "LongMemEval"
	Index int
	// Messages in conversation order, and the evidence key of each.
	Messages []Message
	Keys     []string
	Asks     []Ask
}

// Ask is a question of a replay and the keys of its evidence turns.
type Ask struct {
	Text, Type string
	Evidence   []string
}

// LoCoMoReplays answers the samples as replays: each turn one message
// (the first speaker in the user role), its text prefixed with the
// speaker's name; questions of categories 1-4 that have evidence.
func LoCoMoReplays(samples []Sample) []Replay {
	out := make([]Replay, 0, len(samples))
	for _, s := range samples {
		r := Replay{Bench: "LoCoMo", Index: s.Index}
		for _, t := range s.Turns {
			role := "assistant"
			if t.Speaker == s.Turns[0].Speaker {
				role = "user"
			}
			r.Messages = append(r.Messages, Message{Role: role, Content: t.Speaker + ": " + t.Text})
			r.Keys = append(r.Keys, t.DiaID)
		}
		for _, q := range s.Questions {
			if q.Category >= 1 && q.Category <= 4 && len(q.Evidence) > 0 {
				r.Asks = append(r.Asks, Ask{Text: q.Text, Type: fmt.Sprintf("category %d", q.Category), Evidence: q.Evidence})
			}
		}
		out = append(out, r)
	}
	return out
}

// LongMemEvalReplays answers each question with evidence as a replay of
// its haystack, sessions in the order given.
func LongMemEvalReplays(qs []LongMemEval) []Replay {
	var out []Replay
	for _, q := range qs {
		if q.Abstention() || len(q.Evidence()) == 0 {
			continue
		}
		r := Replay{Bench: "LongMemEval", Index: q.Index}
		for _, s := range q.Sessions {
			for i, t := range s.Turns {
				r.Messages = append(r.Messages, Message{Role: t.Role, Content: t.Content})
				r.Keys = append(r.Keys, TurnKey(s.ID, i))
			}
		}
		r.Asks = []Ask{{Text: q.Question, Type: q.Type, Evidence: q.Evidence()}}
		out = append(out, r)
	}
	return out
}

// Retention is the share of evidence turns that reach the model, averaged
// over one benchmark's questions of one type ("all" for every type).
type Retention struct {
	Bench, Type string
	Questions   int
	// Window: still in the recent history when the question is asked.
	// Summary: present in the summary (see InSummary). Archive: an
	// archived episode injected whole for the question (Injection.split).
	// Compacted: summary or archive. InContext: any of the three.
	Window, Summary, Archive, Compacted, InContext float64
	// Baseline: injected whole for the question when every turn is a
	// record and nothing is compacted.
	Baseline float64
}

// RetentionOptions configure a run.
type RetentionOptions struct {
	// WindowBytes is the recent history the model holds; when a message
	// makes it overflow, the oldest messages are evicted until it holds at
	// most half, and the conversation is compacted.
	WindowBytes int
}

// DefaultWindowBytes is the recent history of the benchmark's model.
const DefaultWindowBytes = 8 << 10

// EvaluateRetention replays each conversation through compaction with a
// fixed window, then asks its questions, and measures the same questions
// against a baseline that stores every turn as a record. Each replay has
// its own realms (one compacted, one baseline).
func EvaluateRetention(ctx context.Context, t CompactTarget, replays []Replay, o RetentionOptions, progress func(done, total int)) ([]Retention, error) {
	if o.WindowBytes <= 0 {
		o.WindowBytes = DefaultWindowBytes
	}
	type acc struct {
		n                                                    int
		window, summary, archive, compacted, inCtx, baseline float64
	}
	accs := map[[2]string]*acc{}
	total := 0
	for _, r := range replays {
		total += len(r.Asks)
	}
	done := 0
	for ri, r := range replays {
		realm, baseRealm, conv := fmt.Sprintf("ret%d", ri), fmt.Sprintf("base%d", ri), fmt.Sprintf("conv%d", ri)
		summary, evicted, err := replay(ctx, t, realm, conv, r, o.WindowBytes)
		if err != nil {
			return nil, fmt.Errorf("%s %d: %w", r.Bench, r.Index, err)
		}
		baseByID, baseLong, err := rememberMessages(ctx, t, baseRealm, conv, r)
		if err != nil {
			return nil, fmt.Errorf("%s %d: baseline: %w", r.Bench, r.Index, err)
		}
		archByID, archLong := map[string][]string{}, map[string]bool{}
		for seq := range evicted {
			id := compaction.EpisodeID(realm, Identity, conv, seq)
			archByID[id] = []string{r.Keys[seq]}
			// An episode's body is its message.
			if len(r.Messages[seq].Content) > bodyBytes {
				archLong[id] = true
			}
		}
		inWindow := map[string]bool{}
		for seq := evicted; seq < len(r.Messages); seq++ {
			inWindow[r.Keys[seq]] = true
		}
		sumWords := words(html.UnescapeString(summary))
		for qi, q := range r.Asks {
			done++
			if progress != nil {
				progress(done, total)
			}
			archived, err := injectedKeys(ctx, t, realm, fmt.Sprintf("q%d", qi), q.Text, archByID, archLong)
			if err != nil {
				return nil, fmt.Errorf("%s %d question %d: %w", r.Bench, r.Index, qi, err)
			}
			base, err := injectedKeys(ctx, t, baseRealm, fmt.Sprintf("q%d", qi), q.Text, baseByID, baseLong)
			if err != nil {
				return nil, fmt.Errorf("%s %d question %d: baseline: %w", r.Bench, r.Index, qi, err)
			}
			var w, s, a, c, all, b float64
			for _, key := range q.Evidence {
				seq := slices.Index(r.Keys, key)
				inW := inWindow[key]
				inS := seq >= 0 && seq < evicted && InSummary(r.Messages[seq].Content, sumWords)
				inA := archived[key]
				w, s, a, b = w+bit(inW), s+bit(inS), a+bit(inA), b+bit(base[key])
				c, all = c+bit(inS || inA), all+bit(inW || inS || inA)
			}
			n := float64(len(q.Evidence))
			for _, typ := range []string{"all", q.Type} {
				key := [2]string{r.Bench, typ}
				x := accs[key]
				if x == nil {
					x = &acc{}
					accs[key] = x
				}
				x.n++
				x.window += w / n
				x.summary += s / n
				x.archive += a / n
				x.compacted += c / n
				x.inCtx += all / n
				x.baseline += b / n
			}
		}
	}
	out := make([]Retention, 0, len(accs))
	for key, x := range accs {
		n := float64(x.n)
		out = append(out, Retention{Bench: key[0], Type: key[1], Questions: x.n, Window: x.window / n, Summary: x.summary / n,
			Archive: x.archive / n, Compacted: x.compacted / n, InContext: x.inCtx / n, Baseline: x.baseline / n})
	}
	slices.SortFunc(out, func(a, b Retention) int {
		if c := strings.Compare(a.Bench, b.Bench); c != 0 {
			return c
		}
		return allFirst(a.Type, b.Type)
	})
	return out, nil
}

func bit(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// replay feeds r's messages into a window of windowBytes, compacting on
// every overflow, and answers the last summary and how many messages were
// evicted (the window holds the rest).
func replay(ctx context.Context, t CompactTarget, realm, conv string, r Replay, windowBytes int) (summary string, evicted int, err error) {
	size := 0
	for i, m := range r.Messages {
		size += len(m.Content)
		if size <= windowBytes {
			continue
		}
		for size > windowBytes/2 && evicted < i {
			size -= len(r.Messages[evicted].Content)
			evicted++
		}
		if summary, err = t.Compact(ctx, realm, Identity, conv, r.Messages[:evicted]); err != nil {
			return "", 0, fmt.Errorf("compact %d messages: %w", evicted, err)
		}
	}
	return summary, evicted, nil
}

// rememberMessages stores every message as one record, as the LoCoMo
// retrieval benchmark stores turns, tagged with its speaker as the archive
// tags an episode, and maps record id → the evidence keys it holds; long
// holds the records of a body over bodyBytes.
func rememberMessages(ctx context.Context, t Target, realm, conv string, r Replay) (byID map[string][]string, long map[string]bool, err error) {
	return rememberRecords(ctx, t, realm, len(r.Messages), func(i int) (Record, string) {
		m := r.Messages[i]
		rec := TurnRecord(Identity, conv, Turn{DiaID: r.Keys[i], Seq: i, Speaker: m.Role, Text: m.Content})
		rec.Tags = speaker.Tags(m.Role) // the archive's tags: a role, not a name
		return rec, r.Keys[i]
	})
}

// injectedKeys injects for question in a fresh session and answers the
// evidence keys of the records shown whole (see Injection.split).
func injectedKeys(ctx context.Context, t Target, realm, session, question string, byID map[string][]string, long map[string]bool) (map[string]bool, error) {
	inj, err := t.Inject(ctx, realm, Identity, session, question, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("inject: %w", err)
	}
	whole, _ := inj.split(long)
	out := map[string]bool{}
	for _, k := range keysOf(byID, whole) {
		out[k] = true
	}
	return out, nil
}

// spanWords is the length of the verbatim span InSummary looks for.
const spanWords = 8

// InSummary is the containment test of an evidence turn in a summary: the
// summary holds some run of 8 consecutive words of the turn (the whole
// turn when it is shorter, and at least 3 words), compared as lower-case
// letters and digits. A summary that keeps a turn cut short still holds
// its start; one that only names the topic does not count.
func InSummary(turn string, summary []string) bool {
	tw := words(turn)
	n := min(spanWords, len(tw))
	if n < 3 || len(summary) < n {
		return false
	}
	grams := make(map[string]bool, len(summary))
	for i := 0; i+n <= len(summary); i++ {
		grams[strings.Join(summary[i:i+n], " ")] = true
	}
	for i := 0; i+n <= len(tw); i++ {
		if grams[strings.Join(tw[i:i+n], " ")] {
			return true
		}
	}
	return false
}

// words splits s into lower-case runs of letters and digits.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// WriteRetentionTable renders the results as a Markdown table; ratio is
// summary + archive over the no-compaction baseline.
func WriteRetentionTable(w io.Writer, compactor string, rows []Retention) {
	fmt.Fprintln(w, "| compactor | benchmark | question type | questions | in window | in summary | archive via inject | summary + archive | + window | no compaction (inject) | ratio |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	WriteRetentionRows(w, compactor, rows)
}

// WriteRetentionRows renders rows of the table WriteRetentionTable starts.
func WriteRetentionRows(w io.Writer, compactor string, rows []Retention) {
	for _, r := range rows {
		ratio := "–"
		if r.Baseline > 0 {
			ratio = fmt.Sprintf("%.2f", r.Compacted/r.Baseline)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %s |\n", compactor, r.Bench, r.Type, r.Questions,
			r.Window, r.Summary, r.Archive, r.Compacted, r.InContext, r.Baseline, ratio)
	}
}
