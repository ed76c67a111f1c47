package usage

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

func TestWorkingSet(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	row := func(id string, rank float64, ageHours int) sdk.ManifestRow {
		return sdk.ManifestRow{ID: id, Rank: rank, UpdatedAt: base.Add(-time.Duration(ageHours) * time.Hour)}
	}
	errRead := errors.New("read failed")
	cases := []struct {
		name     string
		k        int
		used     []sdk.ManifestRow
		unused   []sdk.ManifestRow
		readErr  error
		want     []string
		wantAsk  int // the n unused was asked for; 0 when it must not be asked
		wantFail bool
	}{
		{name: "ranked first, then the newest unused", k: 2,
			used:   []sdk.ManifestRow{row("u1", 1, 0), row("u3", 3, 5), row("u2", 2, 1)},
			unused: []sdk.ManifestRow{row("n-old", 0, 9), row("n-new", 0, 1), row("n-mid", 0, 4)},
			want:   []string{"u3", "u2", "n-new", "n-mid"}, wantAsk: 2},
		{name: "few used leave room for more unused", k: 2,
			used:   []sdk.ManifestRow{row("u1", 1, 0)},
			unused: []sdk.ManifestRow{row("a", 0, 3), row("b", 0, 2), row("c", 0, 1), row("d", 0, 0)},
			want:   []string{"u1", "d", "c", "b"}, wantAsk: 3},
		{name: "equal ranks and times keep the read order", k: 3,
			used:   []sdk.ManifestRow{row("x", 2, 0), row("y", 2, 0)},
			unused: []sdk.ManifestRow{row("p", 0, 1), row("q", 0, 1)},
			want:   []string{"x", "y", "p", "q"}, wantAsk: 4},
		{name: "no unused rows", k: 1,
			used: []sdk.ManifestRow{row("u1", 1, 0)},
			want: []string{"u1"}, wantAsk: 1},
		{name: "the unused read fails", k: 1, readErr: errRead, wantAsk: 2, wantFail: true},
		{name: "k above the cap is capped", k: MaxWorkingSetK + 10,
			used: []sdk.ManifestRow{row("u1", 1, 0)},
			want: []string{"u1"}, wantAsk: 2*MaxWorkingSetK - 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			asked := 0
			got, err := WorkingSet(tc.k, slices.Clone(tc.used), func(n int) ([]sdk.ManifestRow, error) {
				asked = n
				return slices.Clone(tc.unused), tc.readErr
			})
			if asked != tc.wantAsk {
				t.Errorf("unused asked for %d rows, want %d", asked, tc.wantAsk)
			}
			if tc.wantFail {
				if !errors.Is(err, tc.readErr) || got != nil {
					t.Fatalf("WorkingSet = %v, %v; want the read's error", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ids := make([]string, len(got))
			for i, r := range got {
				ids[i] = r.ID
			}
			if !slices.Equal(ids, tc.want) {
				t.Fatalf("rows %v, want %v", ids, tc.want)
			}
		})
	}
	// A k of 0 lists nothing and asks for nothing.
	got, err := WorkingSet(0, []sdk.ManifestRow{row("u", 1, 0)}, func(int) ([]sdk.ManifestRow, error) {
		t.Fatal("unused asked with no room")
		return nil, nil
	})
	if err != nil || len(got) != 0 {
		t.Fatalf("WorkingSet(0) = %v, %v; want nothing", got, err)
	}
}
