package markdown

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
)

func (tp *testProvider) vectorIDs(t *testing.T, v []float32) []string {
	t.Helper()
	return hitIDs(tp.recall(t, sdk.RecallQuery{QueryVector: v, VectorModel: "m", Limit: 10}))
}

func (tp *testProvider) missing(t *testing.T) []string {
	t.Helper()
	ids, err := tp.MissingVectors(ctx, sdk.DefaultRealm, "m", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func (tp *testProvider) putVectors(t *testing.T, vecs ...sdk.RecordVector) {
	t.Helper()
	if err := tp.PutVectors(ctx, sdk.DefaultRealm, vecs); err != nil {
		t.Fatal(err)
	}
}

// TestVectorsPersist: vectors reach recall and survive a reopen from the
// snapshot and one without it (the realm's vector file); a hand edit drops
// a record's vector, here and across a reopen; a torn tail is cut by the
// next append; a file mostly of dead frames is compacted at open.
func TestVectorsPersist(t *testing.T) {
	poll := modes[1]
	tp := newTestProvider(t, poll)
	root := tp.root
	ids := tp.remember(t, sdk.DefaultRealm, rec(alice, "Walrus", "tusks"), rec(alice, "Otter", "river"), rec(bob, "Seal", "cousin"))
	walrus, otter, seal := ids[0], ids[1], ids[2]
	tp.putVectors(t,
		sdk.RecordVector{ID: walrus, Model: "m", Vector: []float32{1, 0, 0}},
		sdk.RecordVector{ID: otter, Model: "m", Vector: []float32{0, 1, 0}},
		sdk.RecordVector{ID: "gone", Model: "m", Vector: []float32{0, 1, 0}},
		sdk.RecordVector{ID: seal, Model: "m", Vector: []float32{0, 0, 1}},
	)
	near := []float32{0.1, 0.9, 0.05}
	want := []string{otter, walrus, seal}
	if got := tp.vectorIDs(t, near); !slices.Equal(got, want) {
		t.Fatalf("vector recall = %v, want %v", got, want)
	}
	tp.Close()
	tp = openTestProvider(t, root, poll)
	if !tp.st.fromSnapshot {
		t.Fatal("the reopen did not use the snapshot")
	}
	if got := tp.vectorIDs(t, near); !slices.Equal(got, want) {
		t.Fatalf("vector recall from the snapshot = %v, want %v", got, want)
	}
	tp.Close()
	if err := os.Remove(filepath.Join(root, DefaultSnapshot)); err != nil {
		t.Fatal(err)
	}
	tp = openTestProvider(t, root, poll)
	if got := tp.vectorIDs(t, near); !slices.Equal(got, want) || len(tp.missing(t)) != 0 {
		t.Fatalf("vector recall from the files = %v (missing %v), want %v", got, tp.missing(t), want)
	}

	// A hand edit of the otter's text: its vector no longer holds.
	editInPlace(t, tp.path(sdk.DefaultRealm, alice, otter), func(s string) string { return strings.Replace(s, "river", "sea", 1) })
	tp.clock.Advance(tp.opts.poll)
	if got := tp.missing(t); !slices.Equal(got, []string{otter}) {
		t.Fatalf("missing after a hand edit = %v, want %s", got, otter)
	}
	if got := tp.vectorIDs(t, near); !slices.Equal(got, []string{walrus, seal}) {
		t.Fatalf("vector recall after a hand edit = %v, want walrus then seal", got)
	}
	tp.Close()
	tp = openTestProvider(t, root, poll)
	if got := tp.missing(t); !slices.Equal(got, []string{otter}) {
		t.Fatalf("missing after reopening an edited root = %v, want %s", got, otter)
	}

	// A torn tail: the next append cuts it, so its frame reads back.
	vecPath := tp.st.vectorsPath(sdk.DefaultRealm)
	f, err := os.OpenFile(vecPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{9, 0, 0, 0, 1, 2})
	f.Close()
	tp.Close()
	tp = openTestProvider(t, root, poll)
	tp.putVectors(t, sdk.RecordVector{ID: otter, Model: "m", Vector: []float32{0, 1, 0}})
	tp.Close()
	os.Remove(filepath.Join(root, DefaultSnapshot))
	tp = openTestProvider(t, root, poll)
	if got := tp.missing(t); len(got) != 0 {
		t.Fatalf("missing after a put behind a torn tail = %v, want none", got)
	}

	// Many puts of one vector: the file is compacted at the next open.
	for range 100 {
		tp.putVectors(t, sdk.RecordVector{ID: walrus, Model: "m", Vector: []float32{1, 0, 0}})
	}
	size := func() int64 {
		fi, err := os.Stat(vecPath)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	tp.Close()
	tp = openTestProvider(t, root, poll)
	if after := size(); after*10 > before {
		t.Fatalf("the vector file was not compacted: %d bytes, %d before", after, before)
	}
	if got := tp.vectorIDs(t, near); !slices.Equal(got, want) {
		t.Fatalf("vector recall after compaction = %v, want %v", got, want)
	}

	// Forgetting drops the vector; a bad length or model is invalid.
	if _, err := tp.Forget(ctx, sdk.DefaultRealm, []string{walrus}); err != nil {
		t.Fatal(err)
	}
	if got := tp.vectorIDs(t, []float32{1, 0, 0}); slices.Contains(got, walrus) {
		t.Fatalf("a forgotten record is recalled by its vector: %v", got)
	}
	err = tp.PutVectors(ctx, sdk.DefaultRealm, []sdk.RecordVector{{ID: otter, Model: "m", Vector: []float32{1, 2}}})
	if !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("a vector of another length: %v, want invalid", err)
	}
	if _, err := tp.Recall(ctx, sdk.RecallQuery{Realm: sdk.DefaultRealm, QueryVector: []float32{1, 0}, VectorModel: "m"}); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("a query vector of another length: %v, want invalid", err)
	}
}

// FuzzParseVectors: any bytes parse to whole frames only, never a panic;
// what parsed, written again, parses to the same.
func FuzzParseVectors(f *testing.F) {
	good := appendVecFrame([]byte(vectorsMagic), &vecEntry{id: "r1", model: "m", digest: 7, v: []float32{1, -2.5}})
	good = appendVecFrame(good, &vecEntry{id: "r2", model: "BAAI/bge", digest: 1 << 60, v: []float32{0, 0, 3}})
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add([]byte(vectorsMagic[:5]))
	f.Add([]byte("not a vector file"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, vf, err := parseVectors(data)
		if err != nil {
			if !errors.Is(err, errBadVectors) {
				t.Fatalf("error %v is not errBadVectors", err)
			}
			return
		}
		if vf.good > int64(len(data)) || len(entries) > vf.frames {
			t.Fatalf("%d good bytes of %d, %d entries of %d frames", vf.good, len(data), len(entries), vf.frames)
		}
		b := []byte(vectorsMagic)
		for _, e := range entries {
			b = appendVecFrame(b, &e)
		}
		again, _, err := parseVectors(b)
		if err != nil || len(again) != len(entries) {
			t.Fatalf("re-encoded entries parse to %d, %v; want %d", len(again), err, len(entries))
		}
		for id, e := range entries {
			a := again[id]
			if a.model != e.model || a.digest != e.digest || !slices.EqualFunc(a.v, e.v, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) }) {
				t.Fatalf("entry %q changed: %+v, was %+v", id, a, e)
			}
		}
	})
}

// TestDamagedVectorFileIsSetAside: a realm's vector file whose magic is
// damaged is moved aside (path.damaged) instead of failing every later
// write of the realm's vectors, whether the store reopens from its
// snapshot (the file is first read by the next write) or from the files;
// the vectors written after it read back from the new file.
func TestDamagedVectorFileIsSetAside(t *testing.T) {
	for _, fromSnapshot := range []bool{true, false} {
		t.Run(map[bool]string{true: "reopened from the snapshot", false: "reopened from the files"}[fromSnapshot], func(t *testing.T) {
			poll := modes[1]
			tp := newTestProvider(t, poll)
			root := tp.root
			ids := tp.remember(t, sdk.DefaultRealm, rec(alice, "Walrus", "tusks"), rec(alice, "Otter", "river"))
			tp.putVectors(t, sdk.RecordVector{ID: ids[0], Model: "m", Vector: []float32{1, 0, 0}})
			vecPath := tp.st.vectorsPath(sdk.DefaultRealm)
			tp.Close()
			f, err := os.OpenFile(vecPath, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt([]byte("XXXX"), 0)
			f.Close()
			if !fromSnapshot {
				if err := os.Remove(filepath.Join(root, DefaultSnapshot)); err != nil {
					t.Fatal(err)
				}
			}
			tp = openTestProvider(t, root, poll)
			tp.putVectors(t, sdk.RecordVector{ID: ids[1], Model: "m", Vector: []float32{0, 1, 0}})
			if _, err := os.Stat(vecPath + ".damaged"); err != nil {
				t.Fatalf("the damaged file was not set aside: %v", err)
			}
			tp.Close()
			os.Remove(filepath.Join(root, DefaultSnapshot))
			tp = openTestProvider(t, root, poll)
			if got := tp.missing(t); !slices.Equal(got, []string{ids[0]}) {
				t.Fatalf("missing after a reopen from the files = %v, want only %s (its vector was in the damaged file)", got, ids[0])
			}
			tp.Close()
		})
	}
}

// TestVectorFrameLengthCannotWrap: a frame whose stated component count
// times four wraps around to its real length is refused, not allocated.
func TestVectorFrameLengthCannotWrap(t *testing.T) {
	var p []byte
	p = binary.AppendUvarint(p, 1)
	p = append(p, 'a')
	p = binary.AppendUvarint(p, 1)
	p = append(p, 'm')
	p = binary.LittleEndian.AppendUint64(p, 0)
	p = binary.AppendUvarint(p, 1<<62+1) // times 4 wraps to 4
	p = binary.LittleEndian.AppendUint32(p, 0)
	if _, ok := decodeVecFrame(p); ok {
		t.Fatal("a frame of 2^62+1 components in 4 bytes decoded")
	}
}

// TestVectorFileLinkIsNotFollowed: from an outside review. The realm's
// vector file was opened through a symbolic link at its name, so a link
// planted while the plugin ran had the file it led to, outside the root,
// truncated and overwritten with frames, and a dangling one had its
// target created.
func TestVectorFileLinkIsNotFollowed(t *testing.T) {
	for _, c := range []struct {
		name    string
		content string // of the link's target; "" for a link to nothing
		before  bool   // planted before the first vector is stored
	}{
		{"a link to a file planted while open", "precious\n", false},
		{"a dangling link planted while open", "", false},
		{"a link to a file before the first vector", "precious\n", true},
		{"a dangling link before the first vector", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp := newTestProvider(t, modes[1])
			ids := tp.remember(t, sdk.DefaultRealm, rec(alice, "Walrus", "tusks"), rec(alice, "Otter", "river"))
			vecPath := tp.st.vectorsPath(sdk.DefaultRealm)
			victim := filepath.Join(t.TempDir(), "victim")
			if c.content != "" {
				if err := os.WriteFile(victim, []byte(c.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if !c.before {
				tp.putVectors(t, sdk.RecordVector{ID: ids[0], Model: "m", Vector: []float32{1, 0, 0}})
				if err := os.Remove(vecPath); err != nil {
					t.Fatal(err)
				}
			} else if err := os.MkdirAll(filepath.Dir(vecPath), dirPerm); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(victim, vecPath); err != nil {
				t.Fatal(err)
			}
			tp.putVectors(t, sdk.RecordVector{ID: ids[1], Model: "m", Vector: []float32{0, 1, 0}})
			got, err := os.ReadFile(victim)
			switch {
			case c.content == "" && !errors.Is(err, os.ErrNotExist):
				t.Fatalf("the link's target was created: %q, %v", got, err)
			case c.content != "" && string(got) != c.content:
				t.Fatalf("the link's target now holds %q, want %q", got, c.content)
			}
			if fi, err := os.Lstat(vecPath); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("the realm's vectors are not in a plain file of their own: %v, %v", fi, err)
			}
			if got := tp.vectorIDs(t, []float32{0, 1, 0}); len(got) == 0 || got[0] != ids[1] {
				t.Fatalf("vector recall = %v, want %s first", got, ids[1])
			}
		})
	}
}
