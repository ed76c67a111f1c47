package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/compaction"
)

// fakeCompacting is a memhost in a map: Compact summarises the last two
// evicted messages and archives every evicted one under its episode id;
// Inject answers the records whose body holds the question.
type fakeCompacting struct {
	bodies   map[string]map[string]string // realm -> id -> body
	compacts int
	// excerpt, when set, makes Inject show the records holding it as
	// excerpts.
	excerpt string
}

func (f *fakeCompacting) put(realm, id, body string) {
	if f.bodies[realm] == nil {
		f.bodies[realm] = map[string]string{}
	}
	f.bodies[realm][id] = body
}

func (f *fakeCompacting) Remember(_ context.Context, realm string, recs []Record) ([]string, error) {
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = fmt.Sprintf("r%d-%d", len(f.bodies[realm]), i)
		f.put(realm, ids[i], r.Body)
	}
	return ids, nil
}

func (f *fakeCompacting) Recall(context.Context, string, string, string, int, time.Time) ([]string, error) {
	return nil, nil
}

func (f *fakeCompacting) Inject(_ context.Context, realm, _, _, content string, _ time.Time) (Injection, error) {
	var out Injection
	for id, body := range f.bodies[realm] {
		if strings.Contains(body, content) {
			out.IDs = append(out.IDs, id)
			if f.excerpt != "" && strings.Contains(body, f.excerpt) {
				out.Excerpts = append(out.Excerpts, id)
			}
		}
	}
	return out, nil
}

func (f *fakeCompacting) Compact(_ context.Context, realm, _, conv string, evicted []Message) (string, error) {
	f.compacts++
	for seq, m := range evicted {
		f.put(realm, compaction.EpisodeID(realm, Identity, conv, seq), m.Content)
	}
	var last []string
	for _, m := range evicted[max(0, len(evicted)-2):] {
		last = append(last, m.Content)
	}
	return "<summary>" + strings.Join(last, "\n") + "</summary>", nil
}

func TestEvaluateRetention(t *testing.T) {
	pad := strings.Repeat("x", 90)
	var msgs []Message
	var keys []string
	for i := range 10 {
		msgs = append(msgs, Message{Role: "user", Content: fmt.Sprintf("turn %d says the secret word is number%d and more words here %s", i, i, pad)})
		keys = append(keys, fmt.Sprint("k", i))
	}
	r := Replay{Bench: "B", Messages: msgs, Keys: keys, Asks: []Ask{
		{Text: "number0", Type: "early", Evidence: []string{"k0"}},      // archive only
		{Text: "number7", Type: "late", Evidence: []string{"k7", "k9"}}, // k7 in summary and archive, k9 in window
		{Text: "nowhere", Type: "late", Evidence: []string{"k1", "k2"}}, // summarised away, not injected
	}}
	f := &fakeCompacting{bodies: map[string]map[string]string{}}
	rows, err := EvaluateRetention(context.Background(), f, []Replay{r}, RetentionOptions{WindowBytes: 400}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.compacts == 0 {
		t.Fatal("the replay never compacted")
	}
	got := map[string]Retention{}
	for _, row := range rows {
		got[row.Type] = row
	}
	early, late, all := got["early"], got["late"], got["all"]
	if early.Questions != 1 || early.Archive != 1 || early.Summary != 0 || early.Compacted != 1 || early.Baseline != 1 {
		t.Errorf("early: %+v", early)
	}
	// Question 2: k7 summarised and archived, k9 in the window; question
	// 3: nothing.
	if late.Questions != 2 || late.Summary != 0.25 || late.Archive != 0.25 || late.Window != 0.25 || late.InContext != 0.5 || late.Baseline != 0.25 {
		t.Errorf("late: %+v", late)
	}
	if all.Questions != 3 {
		t.Errorf("all: %+v", all)
	}
	// Shown only as an excerpt, the archived and the baseline turn may
	// stop before the answer: neither counts as delivered.
	f = &fakeCompacting{bodies: map[string]map[string]string{}, excerpt: "number0"}
	rows, err = EvaluateRetention(context.Background(), f, []Replay{r}, RetentionOptions{WindowBytes: 400}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if row.Type == "early" && (row.Archive != 0 || row.Baseline != 0 || row.Compacted != 0) {
			t.Errorf("early, evidence shown as an excerpt: %+v", row)
		}
	}
}

func TestInSummary(t *testing.T) {
	summary := words("Summary of earlier conversation\n- user: I bought a red bicycle for my daughter on Sunday at the market …")
	for _, c := range []struct {
		turn string
		want bool
	}{
		{"I bought a red bicycle for my daughter on Sunday at the market, she loved it.", true},
		{"Yesterday, I BOUGHT a red bicycle for my daughter on Sunday!", true},
		{"I bought a red car for my son on Sunday at the market.", false},
		{"red bicycle", false}, // under 3 words never counts
		{"a red bicycle", true},
	} {
		if got := InSummary(c.turn, summary); got != c.want {
			t.Errorf("InSummary(%q) = %v, want %v", c.turn, got, c.want)
		}
	}
}
