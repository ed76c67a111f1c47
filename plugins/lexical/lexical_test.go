package lexical

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

var now = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func newAt(t *testing.T, cfg string) *Selector {
	t.Helper()
	s := New()
	s.now = func() time.Time { return now }
	if err := s.Configure(context.Background(), json.RawMessage(cfg)); err != nil {
		t.Fatal(err)
	}
	return s
}

func row(id, title, desc string, ageDays int, rank float64) sdk.ManifestRow {
	return sdk.ManifestRow{ID: id, Scope: "identity:alice", Kind: sdk.KindFact, Title: title, Description: desc,
		UpdatedAt: now.Add(-time.Duration(ageDays) * 24 * time.Hour), Rank: rank}
}

var alice = sdk.Identity{Realm: "default", ID: "alice"}

func TestSelect(t *testing.T) {
	rows := []sdk.ManifestRow{
		row("newest-noise", "Lunch order", "sandwich shop", 0, 0),
		row("deploy-title", "Deploy checklist for production", "steps", 40, 0),
		row("deploy-desc", "Release notes", "how we deploy to production", 1, 0),
		row("deploy-old", "Deploy production database", "", 400, 0),
		row("deploy-new", "Deploy production database", "", 2, 0),
	}
	tests := []struct {
		name       string
		query      string
		suppressed []string
		max        int
		want       []string
		coverage   sdk.Coverage
	}{
		{"title beats description, newer breaks ties", "how do I deploy to production?", nil, 0,
			[]string{"deploy-new", "deploy-title", "deploy-old", "deploy-desc"}, sdk.CoverageSufficient},
		{"max caps the answer", "deploy production", nil, 2, []string{"deploy-new", "deploy-title"}, sdk.CoverageSufficient},
		{"suppressed ids are never answered", "deploy production", []string{"deploy-new", "deploy-old"}, 0,
			[]string{"deploy-title", "deploy-desc"}, sdk.CoverageSufficient},
		{"no shared term: empty and deeper", "kubernetes quota", nil, 0, []string{}, sdk.CoverageNeedDeeperSweep},
		{"only a weak description hit asks deeper", "release cadence quarterly plan", []string{"deploy-desc"}, 0,
			[]string{}, sdk.CoverageNeedDeeperSweep},
		{"empty query selects nothing", "   ", nil, 0, []string{}, sdk.CoverageSufficient},
	}
	s := newAt(t, `{}`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := s.Select(context.Background(), sdk.SelectRequest{Identity: alice, Query: tt.query, Rows: rows, SuppressedIDs: tt.suppressed, Max: tt.max})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sel.IDs, tt.want) || sel.Coverage != tt.coverage {
				t.Errorf("Select = %v %s, want %v %s", sel.IDs, sel.Coverage, tt.want, tt.coverage)
			}
		})
	}
}

func TestSelectWeakBestAsksDeeper(t *testing.T) {
	rows := []sdk.ManifestRow{row("a", "Release notes", "we deploy weekly", 1, 0)}
	for _, tt := range []struct {
		cfg  string
		want sdk.Coverage
	}{
		{`{}`, sdk.CoverageNeedDeeperSweep},              // one description hit of three: 0.2
		{`{"min_score":0.1}`, sdk.CoverageSufficient},    // a lower bar accepts it
		{`{"min_score":1}`, sdk.CoverageNeedDeeperSweep}, // the strictest bar
	} {
		sel, err := newAt(t, tt.cfg).Select(context.Background(), sdk.SelectRequest{Identity: alice, Query: "deploy kubernetes cluster", Rows: rows})
		if err != nil {
			t.Fatal(err)
		}
		if sel.Coverage != tt.want || !slices.Equal(sel.IDs, []string{"a"}) {
			t.Errorf("config %s: Select = %v %s, want [a] %s", tt.cfg, sel.IDs, sel.Coverage, tt.want)
		}
	}
}

func TestSelectUsageRankOrdersEqualRows(t *testing.T) {
	rows := []sdk.ManifestRow{row("unused", "Deploy steps", "", 5, 0), row("used", "Deploy steps", "", 5, 3)}
	sel, err := newAt(t, `{}`).Select(context.Background(), sdk.SelectRequest{Identity: alice, Query: "deploy", Rows: rows})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sel.IDs, []string{"used", "unused"}) {
		t.Errorf("Select = %v, want the used row first", sel.IDs)
	}
}

func TestSelectDeterministic(t *testing.T) {
	var rows []sdk.ManifestRow
	for i := range 50 {
		rows = append(rows, row(string(rune('a'+i%26))+string(rune('a'+i/26)), "deploy step", "", 3, 0))
	}
	s := newAt(t, `{}`)
	first, err := s.Select(context.Background(), sdk.SelectRequest{Identity: alice, Query: "deploy", Rows: rows, Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(rows)
	again, err := s.Select(context.Background(), sdk.SelectRequest{Identity: alice, Query: "deploy", Rows: rows, Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(first.IDs, again.IDs) {
		t.Errorf("row order changed the answer: %v then %v", first.IDs, again.IDs)
	}
}

func TestConfigure(t *testing.T) {
	for _, tt := range []struct {
		cfg string
		ok  bool
	}{
		{`{}`, true},
		{`{"min_score":0.3,"recency_half_life_days":7,"recency_weight":0}`, true},
		{`{"min_score":0}`, false},
		{`{"min_score":1.5}`, false},
		{`{"recency_half_life_days":0}`, false},
		{`{"recency_weight":-1}`, false},
		{`{"min_scor":0.5}`, false},
		{`[]`, false},
	} {
		err := New().Configure(context.Background(), json.RawMessage(tt.cfg))
		if tt.ok != (err == nil) || (err != nil && !errors.Is(err, sdk.ErrInvalid)) {
			t.Errorf("Configure(%s) = %v, want ok=%v (errors wrap ErrInvalid)", tt.cfg, err, tt.ok)
		}
	}
}

func TestSelectBadInput(t *testing.T) {
	for name, req := range map[string]sdk.SelectRequest{
		"no realm":     {Identity: sdk.Identity{ID: "alice"}, Query: "x"},
		"negative max": {Identity: alice, Query: "x", Max: -1},
		"empty row id": {Identity: alice, Query: "x", Rows: []sdk.ManifestRow{{Title: "x"}}},
	} {
		if _, err := New().Select(context.Background(), req); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("%s: error %v, want ErrInvalid", name, err)
		}
	}
}

// BenchmarkSelect is one Select over the turn's working set (400 rows)
// and over one background-sweep page (2,000 rows), in-process.
func BenchmarkSelect(b *testing.B) {
	for _, n := range []int{400, 2000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) { benchmarkSelect(b, n) })
	}
}

func benchmarkSelect(b *testing.B, n int) {
	var rows []sdk.ManifestRow
	for i := range n {
		rows = append(rows, row(fmt.Sprintf("r%05d", i), fmt.Sprintf("deploy notes %d about production systems", i), "a description with several terms", i%90, 0))
	}
	s := New()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Select(context.Background(), sdk.SelectRequest{Identity: alice, Query: "how do we deploy the production database safely", Rows: rows}); err != nil {
			b.Fatal(err)
		}
	}
}
