package sqlite

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// vectorIDs answers the ids recall ranks for a query vector alone.
func vectorIDs(t *testing.T, s *Store, v []float32) []string {
	t.Helper()
	return recallIDs(t, s, sdk.RecallQuery{Realm: realm, QueryVector: v, VectorModel: "m", Limit: 10})
}

// TestVectorsPersist: vectors reach recall, survive a crash (the index
// log), a clean reopen (the snapshot) and a rebuild (the vectors table),
// and leave with their record.
func TestVectorsPersist(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memory.db")
	s := openAt(t, path)
	ids := mustRemember(t, s, realm, rec(alice, "Walrus", "tusks"), rec(alice, "Otter", "river"), rec(bob, "Seal", "cousin"))
	walrus, otter, seal := ids[0], ids[1], ids[2]
	err := s.PutVectors(ctx, realm, []sdk.RecordVector{
		{ID: walrus, Model: "m", Vector: []float32{1, 0, 0}},
		{ID: otter, Model: "m", Vector: []float32{0, 1, 0}},
		{ID: "gone", Model: "m", Vector: []float32{0, 1, 0}}, // skipped
		{ID: seal, Model: "m", Vector: []float32{0, 0, 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	near := []float32{0.1, 0.9, 0.05}
	want := []string{otter, walrus, seal}
	if got := vectorIDs(t, s, near); !slices.Equal(got, want) {
		t.Fatalf("vector recall = %v, want %v", got, want)
	}
	// Filters hold on the semantic half.
	if got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Scopes: []sdk.Scope{bob}, QueryVector: near, VectorModel: "m"}); !slices.Equal(got, []string{seal}) {
		t.Fatalf("bob's vector recall = %v, want only %s", got, seal)
	}
	if rowCount(t, s, "vectors") != 3 {
		t.Fatalf("%d vector rows, want 3", rowCount(t, s, "vectors"))
	}
	missing := func(s *Store, model string) []string {
		t.Helper()
		got, err := s.MissingVectors(ctx, realm, model, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := missing(s, "m"); len(got) != 0 {
		t.Fatalf("missing vectors of m = %v, want none", got)
	}
	if got := missing(s, "m2"); !slices.Equal(got, sortedCopy(ids)) {
		t.Fatalf("missing vectors of m2 = %v, want every id", got)
	}

	crashed := crashImage(t, path) // the vectors are in the log only
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		path string
		prep func(p string)
	}{
		{"replayed log", crashed, nil},
		{"snapshot", path, nil},
		{"rebuilt", crashImage(t, path), func(p string) { os.Remove(p + ".index"); os.Remove(p + ".index.log") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.prep != nil {
				tc.prep(tc.path)
			}
			s := openAt(t, tc.path)
			if got := vectorIDs(t, s, near); !slices.Equal(got, want) {
				t.Fatalf("vector recall = %v, want %v", got, want)
			}
		})
	}

	s = openAt(t, path)
	if _, err := s.Forget(ctx, realm, []string{walrus}); err != nil {
		t.Fatal(err)
	}
	newSeal, err := s.Supersede(ctx, realm, seal, rec(bob, "Seal", "grey cousin"))
	if err != nil {
		t.Fatal(err)
	}
	if n := rowCount(t, s, "vectors"); n != 1 {
		t.Fatalf("%d vector rows after forget and supersede, want 1", n)
	}
	if got := vectorIDs(t, s, []float32{1, 0, 0}); !slices.Equal(got, []string{otter}) {
		t.Fatalf("vector recall after forget and supersede = %v, want only %s (the new seal has no vector)", got, otter)
	}
	if got := missing(s, "m"); !slices.Equal(got, []string{newSeal}) {
		t.Fatalf("missing = %v, want the replacement %s", got, newSeal)
	}

	// A vector of another length than the model's, or a query vector
	// of another length or model, is invalid.
	err = s.PutVectors(ctx, realm, []sdk.RecordVector{{ID: newSeal, Model: "m", Vector: []float32{1, 0}}})
	wantErr(t, "a vector of other dimensions", err, sdk.ErrInvalid)
	if n := rowCount(t, s, "vectors"); n != 1 {
		t.Fatalf("a refused batch stored vectors (%d rows)", n)
	}
	_, err = s.Recall(ctx, sdk.RecallQuery{Realm: realm, QueryVector: []float32{1, 0}, VectorModel: "m"})
	wantErr(t, "a query vector of other dimensions", err, sdk.ErrInvalid)
	_, err = s.Recall(ctx, sdk.RecallQuery{Realm: realm, QueryVector: []float32{1, 0, 0}, VectorModel: "other"})
	wantErr(t, "a query vector of another model", err, sdk.ErrInvalid)
}

// FuzzFrameOp: any bytes decode to index changes or an error, never a
// panic; a vector put written by appendOp reads back exactly.
func FuzzFrameOp(f *testing.F) {
	vecOp := indexOp{realm: "acme", vec: &sdk.RecordVector{ID: "r1", Model: "m/1", Vector: []float32{1, -0.5, 3e-8}}}
	f.Add(appendOp(nil, &vecOp))
	f.Add(appendOp(nil, &indexOp{del: true, realm: "acme", id: "r2"}))
	f.Add([]byte{opVec, 4, 'a', 'c', 'm', 'e', 1, 'r', 1, 'm', 200})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := frameReader{s: string(data)}
		op := r.op()
		if r.err != nil || op.vec == nil {
			return
		}
		again := frameReader{s: string(appendOp(nil, &op))}
		back := again.op()
		if again.err != nil || back.realm != op.realm || back.vec.ID != op.vec.ID || back.vec.Model != op.vec.Model ||
			!slices.EqualFunc(back.vec.Vector, op.vec.Vector, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
			t.Fatalf("vector op %+v read back as %+v (%v)", op.vec, back.vec, again.err)
		}
	})
}
