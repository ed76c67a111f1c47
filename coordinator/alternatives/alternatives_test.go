package alternatives

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
)

func TestChoices(t *testing.T) {
	for _, tc := range []struct {
		query   string
		head    string
		choices []string
	}{
		{"Which item did I purchase first, the dog bed for Max or the training pads for Luna?",
			"Which item did I purchase first", []string{"the dog bed for Max", "the training pads for Luna"}},
		{"Which book did I finish reading first, 'The Hate U Give' or 'The Nightingale'?",
			"Which book did I finish reading first", []string{"'The Hate U Give'", "'The Nightingale'"}},
		{"which city did I visit last: Paris or Rome or Madrid？", "which city did I visit last", []string{"Paris", "Rome", "Madrid"}},
		{"  Who called me more often, Ann or Bob or Carl?  ", "Who called me more often", []string{"Ann", "Bob", "Carl"}},
		{"Did I see the dentist before, the doctor OR the nurse?", "Did I see the dentist before", []string{"the doctor", "the nurse"}},
		// The choices follow the last comma; the head keeps the rest.
		{"What, in your view, should I buy, a cat or a dog?", "What, in your view, should I buy", []string{"a cat", "a dog"}},
		{"What did I do at 10:30, gym or pool?", "What did I do at 10:30", []string{"gym", "pool"}},
		{"When did I leave, at 9:30 or 10:15?", "When did I leave", []string{"at 9:30", "10:15"}},
		// A period between digits is a price or a weight, not a sentence end.
		{"Which did I pay first, the $12.50 bill or the $8.99 one?", "Which did I pay first", []string{"the $12.50 bill", "the $8.99 one"}},
		{"Which did I buy first, the 1.5 kg bag or the 2 kg bag?", "Which did I buy first", []string{"the 1.5 kg bag", "the 2 kg bag"}},
		{`Which book did I like, "A, B" or "C"?`, "Which book did I like", []string{`"A, B"`, `"C"`}},
		{"Which did I buy first, the bed or the Bed or the pads?", "Which did I buy first", []string{"the bed", "the pads"}},
		// Not a question ending in choices.
		{"Did I go to the gym on Monday or Tuesday?", "", nil},                                          // no comma before the choices
		{"Which city did I visit last: Paris, Rome, or Madrid?", "", nil},                               // a list after the last comma: "or Madrid" alone
		{"Hey, which did I buy first, the bed or the pads?", "", nil},                                   // the head is not a question
		{"Do not forget, buy milk or eggs?", "", nil},                                                   // a request
		{"Can you help me, I need a gift for my sister or my mom?", "", nil},                            // a request
		{"When I get home, remind me to call mom or dad", "", nil},                                      // no question mark
		{"Which did I buy first, the bed. Or the pads?", "", nil},                                       // two sentences
		{"Which did I buy first, the bed 2. Or the pads?", "", nil},                                     // a period after a digit still ends one
		{"Which did I buy first, the bed or the pads? Also the vet", "", nil},                           // a sentence after the question
		{"Which did I buy first, the bed or the pads？ Also the vet?", "", nil},                          // the same, after a full-width mark
		{"Which did I buy first, the bed or the pads\nIgnore that?", "", nil},                           // a line break
		{"Which did I buy first, the bed?", "", nil},                                                    // one choice
		{"Which did I buy first, a or b or c or d or e?", "", nil},                                      // more than four
		{"Which one, or none?", "", nil},                                                                // "or" leads the only choice
		{"Which did I buy first, ' or '?", "", nil},                                                     // punctuation, not choices
		{"Which did I buy first, the bed or the bed?", "", nil},                                         // one choice twice
		{"Which did I buy first, the " + strings.Repeat("very ", 12) + "big bed or the pads?", "", nil}, // a clause, not a phrase
		{"Which did I buy first, the bed or ?", "", nil},                                                // an empty choice
		{"", "", nil},
		{",?", "", nil},
		{"Which did I buy first, " + strings.Repeat("x", maxQueryBytes) + " or y?", "", nil},
	} {
		head, choices, ok := Choices(tc.query)
		if ok != (tc.choices != nil) || head != tc.head || !slices.Equal(choices, tc.choices) {
			t.Errorf("Choices(%q) = %q, %q, %v; want %q, %q", tc.query, head, choices, ok, tc.head, tc.choices)
		}
	}
}

func FuzzChoices(f *testing.F) {
	for _, s := range []string{
		"Which item did I purchase first, the dog bed for Max or the training pads for Luna?",
		"which city did I visit last: Paris or Rome?",
		"Did I go to the gym on Monday or Tuesday?",
		"When did I leave, at 9:30 or 10:15?", `Which book, "A, B" or "C"?`,
		"Which, or, or ,or?", "Who,   or  ", "What: a or b: c or d?",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		head, choices, ok := Choices(q)
		if !ok {
			if head != "" || choices != nil {
				t.Fatalf("Choices(%q) refused but answered %q, %q", q, head, choices)
			}
			return
		}
		if len(choices) < 2 || len(choices) > maxChoices || head == "" {
			t.Fatalf("Choices(%q) = %q, %q", q, head, choices)
		}
		for _, c := range choices {
			words := strings.Fields(c)
			if len(words) == 0 || len(words) > maxChoiceWords || strings.Join(words, " ") != c {
				t.Fatalf("Choices(%q): choice %q", q, c)
			}
			for _, w := range words {
				if strings.EqualFold(w, "or") || !strings.Contains(q, w) {
					t.Fatalf("Choices(%q): choice %q holds %q", q, c, w)
				}
			}
		}
		if !strings.Contains(q, head) || !strings.HasSuffix(strings.TrimSpace(q), "?") && !strings.HasSuffix(strings.TrimSpace(q), "？") {
			t.Fatalf("Choices(%q): head %q, or the query is not a question", q, head)
		}
		// A period between two digits (12.50) ends no sentence.
		if holdsSentenceEnd(strings.Join(choices, " ")) {
			t.Fatalf("Choices(%q): a choice ends a sentence: %q", q, choices)
		}
	})
}

func hits(scored ...any) []sdk.Hit {
	var out []sdk.Hit
	for i := 0; i < len(scored); i += 2 {
		out = append(out, sdk.Hit{Record: sdk.Record{ID: scored[i].(string)}, Score: scored[i+1].(float64)})
	}
	return out
}

func ids(hs []sdk.Hit) string {
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "%s:%.2f ", h.Record.ID, h.Score)
	}
	return strings.TrimSpace(b.String())
}

func TestMerge(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers [][]sdk.Hit
		limit   int
		want    string
	}{
		{"a choice's best ranks with the whole question's best",
			[][]sdk.Hit{hits("w1", 10.0, "w2", 9.0, "w3", 8.0, "b2", 4.0), hits("a1", 2.0, "w1", 1.0), hits("b1", 6.0, "b2", 5.7)},
			10, "w1:10.00 a1:10.00 b1:10.00 b2:9.50 w2:9.00 w3:8.00"},
		{"the limit cuts", [][]sdk.Hit{hits("w1", 10.0, "w2", 9.0), hits("a1", 3.0)}, 2, "w1:10.00 a1:10.00"},
		{"a choice without a positive top is left out",
			[][]sdk.Hit{hits("w1", 4.0, "w2", 2.0), hits("a1", 0.0), hits("b1", math.Inf(1)), hits("c1", math.NaN())},
			10, "w1:4.00 w2:2.00"},
		{"a whole answer without a positive top is the answer", [][]sdk.Hit{hits("w1", -1.0, "w2", -2.0), hits("a1", 3.0)}, 1, "w1:-1.00"},
		{"an empty whole answer", [][]sdk.Hit{nil, hits("a1", 3.0)}, 10, ""},
		{"scores below zero (hybrid hits past its pool) rank last",
			[][]sdk.Hit{hits("w1", 0.8, "w2", -0.1), hits("a1", 0.5, "a2", 0.25)}, 10, "w1:0.80 a1:0.80 a2:0.40 w2:-0.10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ids(Merge(tc.answers, tc.limit)); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestMergeKeepsScoresFinite: a large negative score shared over a tiny
// top overflows; it saturates, ranked last, rather than turn infinite.
func TestMergeKeepsScoresFinite(t *testing.T) {
	got := Merge([][]sdk.Hit{hits("w1", 1.0), hits("a1", 1e-300, "a2", -1.7e308)}, 10)
	if len(got) != 3 || got[2].Record.ID != "a2" || got[2].Score != -math.MaxFloat64 {
		t.Fatalf("Merge = %v, want a2 last at -MaxFloat64", got)
	}
}

func TestWrap(t *testing.T) {
	var asked []string
	fail := map[string]error{}
	recall := func(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
		asked = append(asked, q.Query)
		if err := fail[q.Query]; err != nil {
			return nil, err
		}
		if q.Realm != "r" || q.Limit != 5 || !slices.Equal(q.Scopes, []sdk.Scope{"identity:ann"}) {
			t.Fatalf("a choice's recall lost the query's filters: %+v", q)
		}
		switch q.Query {
		case "Which did I buy first the bed":
			return hits("bed", 1.0), nil
		case "Which did I buy first the pads":
			return hits("pads", 2.0), nil
		}
		return hits("other", 7.0, "pads", 6.0), nil
	}
	q := sdk.RecallQuery{Realm: "r", Scopes: []sdk.Scope{"identity:ann"}, Limit: 5, Query: "Which did I buy first, the bed or the pads?"}
	got, err := Wrap(recall)(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{q.Query, "Which did I buy first the bed", "Which did I buy first the pads"}; !slices.Equal(asked, want) {
		t.Fatalf("asked %q, want %q", asked, want)
	}
	// pads ties bed at its choice's top, and the whole answer saw it first.
	if s := ids(got); s != "other:7.00 pads:7.00 bed:7.00" {
		t.Fatalf("got %s", s)
	}

	// A choice's recall failing leaves the others' answers.
	asked, fail["Which did I buy first the bed"] = nil, errors.New("provider hiccup")
	if got, err = Wrap(recall)(context.Background(), q); err != nil || ids(got) != "other:7.00 pads:7.00" {
		t.Fatalf("with a failing choice: %s, %v", ids(got), err)
	}
	// The whole question's failing fails the call, and no choice is asked.
	asked, fail[q.Query] = nil, errors.New("provider down")
	if _, err = Wrap(recall)(context.Background(), q); err == nil || len(asked) != 1 {
		t.Fatalf("with the whole question failing: err %v, asked %q", err, asked)
	}
	// Out of time after the whole question: no more choices are asked.
	delete(fail, q.Query)
	ctx, cancel := context.WithCancel(context.Background())
	asked = nil
	cancelling := func(c context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
		if len(asked) == 1 {
			cancel()
			asked = append(asked, q.Query)
			return nil, c.Err()
		}
		return recall(c, q)
	}
	if got, err = Wrap(cancelling)(ctx, q); err != nil || ids(got) != "other:7.00 pads:6.00" || len(asked) != 2 {
		t.Fatalf("out of time: %s, %v, asked %q", ids(got), err, asked)
	}
	// Any other query is one recall, unchanged.
	asked = nil
	plain := q
	plain.Query = "what did I buy"
	if got, err = Wrap(recall)(context.Background(), plain); err != nil || ids(got) != "other:7.00 pads:6.00" || len(asked) != 1 {
		t.Fatalf("plain query: %s, %v, asked %q", ids(got), err, asked)
	}
}
