package sessionstore

import (
	"slices"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
)

// TestReadsCountAsVisitsForTheBound: a visit that only reads (a turn of a
// session whose budget is spent, or whose records were all shown) is a
// visit, so the realm bound must not drop that session as the least
// recently visited while an older one sits idle: its budget and dedup set
// would start over, and its next turns would inject again what it holds.
func TestReadsCountAsVisitsForTheBound(t *testing.T) {
	read := func(*coordinator.SessionState) bool { return false }
	tests := []struct {
		name   string
		bound  int
		visits []string // identity/session; a "?" prefix is a read-only visit
		gone   []string
		kept   []string
	}{
		{name: "a read session outlives an idle older one", bound: 3,
			visits: []string{"a/1", "a/2", "a/3", "?a/1", "a/4"}, gone: []string{"a/2"}, kept: []string{"a/1", "a/3", "a/4"}},
		{name: "reads of every session order them", bound: 3,
			visits: []string{"a/1", "a/2", "a/3", "?a/2", "?a/1", "?a/3", "a/4"}, gone: []string{"a/2"}, kept: []string{"a/1", "a/3", "a/4"}},
		{name: "a read session outlives another identity's tie", bound: 4,
			visits: []string{"a/1", "a/2", "b/1", "b/2", "?a/1", "c/1"}, gone: []string{"a/2"}, kept: []string{"a/1", "b/1", "b/2", "c/1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			s, _ := openStore(t, t.TempDir(), Options{PerRealm: tc.bound, Now: clk.now})
			for _, v := range tc.visits {
				clk.advance(time.Second)
				fn := inject(1, v)
				if v[0] == '?' {
					v, fn = v[1:], read
				}
				if err := s.Update(ctx, idKey(v), fn); err != nil {
					t.Fatal(err)
				}
			}
			var gone, kept []string
			for _, v := range append(append([]string{}, tc.gone...), tc.kept...) {
				if st := get(t, s, idKey(v)); st.IsZero() {
					gone = append(gone, v)
				} else {
					kept = append(kept, v)
				}
			}
			if len(gone) != len(tc.gone) || len(kept) != len(tc.kept) || !slices.Equal(gone, tc.gone) {
				t.Fatalf("gone %v, kept %v; want gone %v, kept %v", gone, kept, tc.gone, tc.kept)
			}
		})
	}
}
