package selection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

var alice = sdk.Identity{Realm: "default", ID: "alice"}

func request(n int, suppressed ...string) sdk.SelectRequest {
	rows := make([]sdk.ManifestRow, n)
	for i := range rows {
		rows[i] = sdk.ManifestRow{ID: fmt.Sprintf("r%02d", i), Scope: "identity:alice", Kind: sdk.KindFact,
			Title: fmt.Sprintf("title %d", i), UpdatedAt: time.Now().Add(-time.Duration(i) * 24 * time.Hour)}
	}
	return sdk.SelectRequest{Identity: alice, Query: "how do we deploy?", Rows: rows, SuppressedIDs: suppressed, Max: 3}
}

// TestSelectOverAnyCompleter: Select needs only a Completer, so another
// plugin's chat client can serve the selector kind.
func TestSelectOverAnyCompleter(t *testing.T) {
	var calls int
	complete := func(_ context.Context, msgs []Message, _ int) (string, error) {
		calls++
		if calls == 1 {
			return "", fmt.Errorf("no content: %w", ErrEmpty)
		}
		if len(msgs) != 4 || msgs[2].Role != "assistant" || msgs[3].Role != "user" {
			return "", fmt.Errorf("repair round trip has %d messages", len(msgs))
		}
		return `{"selected_ids":["r01","r09"],"coverage":"sufficient"}`, nil
	}
	sel, err := Select(context.Background(), complete, 5, request(10))
	if err != nil {
		t.Fatal(err)
	}
	// r09 is beyond maxRows 5: never offered, so dropped.
	if !slices.Equal(sel.IDs, []string{"r01"}) || calls != 2 {
		t.Errorf("Select = %v after %d calls, want [r01] after 2", sel.IDs, calls)
	}
}

// TestParseAnswerAmidBraces: prose around the answer may hold braces of
// its own; the answer is still read, once, without a repair round trip.
func TestParseAnswerAmidBraces(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{`{"selected_ids":["r01"],"coverage":"sufficient"}`, []string{"r01"}, true},
		{"```json\n{\"selected_ids\":[\"r01\"]}\n```", []string{"r01"}, true},
		{`{"selected_ids":["r01"]} I skipped r02 (see {notes}).`, []string{"r01"}, true},
		{`Of {r01, r02} only one helps: {"selected_ids":["r01"]}`, []string{"r01"}, true},
		{`{"answer":{"selected_ids":["r01"]}}`, []string{"r01"}, true},
		{`{"selected_ids":"r01"} {"selected_ids":["r02"]}`, []string{"r02"}, true},
		{`{r01}`, nil, false},
		{`no object`, nil, false},
		{strings.Repeat("{", 1<<16), nil, false},
	} {
		a, err := parseAnswer(tc.in)
		if ok := err == nil; ok != tc.ok || ok && !slices.Equal(a.SelectedIDs, tc.want) {
			t.Errorf("parseAnswer(%.60q) = %v, %v; want %v (ok %v)", tc.in, a.SelectedIDs, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, errUnparseable) {
			t.Errorf("parseAnswer(%.60q): %v is not unparseable", tc.in, err)
		}
	}
}

// FuzzParseAnswerInProse: a selection object is read whatever prose is
// before it (without an object of its own) and after it.
func FuzzParseAnswerInProse(f *testing.F) {
	f.Add("Here you go:", "r01", "Hope that helps }", true)
	f.Add("```json\n", "a\"b", "\n```", false)
	f.Add("", "", "{", true)
	f.Fuzz(func(t *testing.T, before, id, after string, deeper bool) {
		before = strings.ReplaceAll(before, "{", "(")
		id = strings.ToValidUTF8(id, "\uFFFD") // as JSON carries it
		want := answer{SelectedIDs: []string{id}, Coverage: string(sdk.CoverageSufficient)}
		if deeper {
			want.Coverage = string(sdk.CoverageNeedDeeperSweep)
		}
		obj, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseAnswer(before + string(obj) + after)
		if err != nil || !slices.Equal(got.SelectedIDs, want.SelectedIDs) || got.Coverage != want.Coverage {
			t.Fatalf("parseAnswer(%q) = %+v, %v; want %+v", before+string(obj)+after, got, err, want)
		}
	})
}

func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{`{"selected_ids":["a"],"coverage":"sufficient"}`, "```json\n{}\n```", `{"selected_ids":"a"}`, `}{`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := parseAnswer(s)
		if err != nil {
			if !errors.Is(err, errUnparseable) && !errors.Is(err, ErrEmpty) {
				t.Fatalf("error %v is neither unparseable nor empty", err)
			}
			return
		}
		if a.Coverage != string(sdk.CoverageSufficient) && a.Coverage != string(sdk.CoverageNeedDeeperSweep) {
			t.Fatalf("accepted coverage %q", a.Coverage)
		}
	})
}

func TestAge(t *testing.T) {
	now := time.Date(2000, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{time.Time{}, "unknown"},
		{now.Add(time.Hour), "today"},
		{now.Add(-23 * time.Hour), "today"},
		{now.Add(-25 * time.Hour), "1 day"},
		{now.Add(-49 * time.Hour), "2 days"},
		// Past the 292 years a time.Duration holds.
		{time.Date(1700, 1, 1, 12, 0, 0, 0, time.UTC), "109572 days"},
		{time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), "today"},
	} {
		if got := age(tc.at, now); got != tc.want {
			t.Errorf("age(%v) = %q, want %q", tc.at, got, tc.want)
		}
	}
}
