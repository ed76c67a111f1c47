package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk/tokenize"
)

// TestSnapshotRoundTrip reopens a churned index from its snapshot and asks
// both the same queries: the answers, scores included, are identical, and
// the reopened index keeps taking writes.
func TestSnapshotRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("single-goroutine round trips of large indexes; the plain run checks it")
	}
	for _, ctx := range []float64{0, 0.5} {
		t.Run(fmt.Sprintf("context weight %v", ctx), func(t *testing.T) { testSnapshotRoundTrip(t, ctx) })
	}
}

func testSnapshotRoundTrip(t *testing.T, ctx float64) {
	defer func(w int) { exhaustiveWork = w }(exhaustiveWork)
	exhaustiveWork = 0
	c := newThreadCorpus(t, 7, 80, StatsIndex, ctx)
	for range 2000 {
		c.step()
	}
	back := snapshotRoundTrip(t, c.ix)
	if back.Len() != c.ix.Len() {
		t.Fatalf("Len after decode = %d, want %d", back.Len(), c.ix.Len())
	}
	for range 200 {
		q := c.query()
		want, _ := c.ix.Search(q)
		got, err := back.Search(q)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("query %+v after decode:\n got %v (%v)\nwant %v", q, got, err, want)
		}
	}
	// Writes after reopening land as on the original.
	c.ix = back
	for range 300 {
		c.step()
	}
	for range 100 {
		c.check(c.query())
	}
}

func TestDecodeRefuses(t *testing.T) {
	ix, _ := New(Options{Weights: ftsWeights})
	_ = ix.Put(Doc{ID: "a", Realm: "r", Scope: "realm", Tags: []string{"x"}, Fields: [][]string{{"x"}, {"coffee"}, nil, {"beans", "coffee"}}})
	var buf bytes.Buffer
	if err := ix.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	flipped := slices.Clone(good)
	flipped[len(flipped)/2] ^= 1
	cases := map[string][]byte{
		"empty":                 nil,
		"other file":            []byte("hello, world"),
		"truncated":             good[:len(good)-3],
		"trailing bytes":        append(slices.Clone(good), 0),
		"a bit flipped":         flipped,
		"only its magic":        []byte(magic),
		"trailing bytes summed": resum(append(slices.Clone(good[:len(good)-4]), 0, 0, 0, 0, 0)),
	}
	for name, data := range cases {
		if _, err := Decode(bytes.NewReader(data)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode = %v, want ErrCorrupt", name, err)
		}
	}
	// A snapshot cut by another tokenizer version is stale, not corrupt:
	// its caller rebuilds rather than reporting damage.
	stale := resum(slices.Concat([]byte(magic), binary.AppendUvarint(nil, tokenize.Version+1), good[len(magic)+1:]))
	if _, err := Decode(bytes.NewReader(stale)); !errors.Is(err, ErrStale) {
		t.Errorf("other tokenizer version: Decode = %v, want ErrStale", err)
	}
}

// FuzzDecode: any input either decodes to an index that answers queries
// and re-encodes to the same snapshot, or is refused with ErrCorrupt (or
// ErrStale, for a tokenizer version other than this one).
func FuzzDecode(f *testing.F) {
	c := newCorpus(f, 3, 20, StatsIndex)
	for range 40 {
		c.step()
	}
	var buf bytes.Buffer
	_ = c.ix.Encode(&buf)
	f.Add(buf.Bytes())
	c = newThreadCorpus(f, 3, 20, StatsIndex, 0.5)
	for range 40 {
		c.step()
	}
	buf.Reset()
	_ = c.ix.Encode(&buf)
	f.Add(buf.Bytes())
	vc := &vecCorpus{corpus: newCorpus(f, 4, 20, StatsIndex), vecs: map[string]refVec{}}
	for range 60 {
		vc.step()
	}
	buf.Reset()
	_ = vc.ix.Encode(&buf)
	f.Add(buf.Bytes())
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Summed again, so that what the input changed reaches the checks
		// behind the checksum's.
		ix, err := Decode(bytes.NewReader(resum(data)))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrStale) {
				t.Fatalf("Decode error %v wraps neither ErrCorrupt nor ErrStale", err)
			}
			return
		}
		for _, r := range realms {
			if _, err := ix.Search(Query{Realm: r, Terms: strings.Fields("w1 w2 w3"), Limit: 5}); err != nil {
				t.Fatal(err)
			}
			// A loaded vector of any length is refused or scored, never a panic.
			for _, dims := range []int{4, 6} {
				q := Query{Realm: r, Terms: []string{"w1"}, Vector: make([]float32, dims), Model: "m1", Limit: 5}
				q.Vector[0] = 1
				if _, err := ix.Search(q); err != nil && !errors.Is(err, ErrInvalid) {
					t.Fatal(err)
				}
			}
		}
		var again bytes.Buffer
		if err := ix.Encode(&again); err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(&again); err != nil {
			t.Fatalf("re-encoded snapshot refused: %v", err)
		}
	})
}

// TestOldSnapshotsAreStale: a snapshot of every earlier layout holds
// thread context drawn across scopes, or (v6) system tags as text, so it
// is stale (rebuilt by the caller), not read: the v3 and v4 ones of
// testdata (written by bf8a080 and fe3b932), and v5 and v6 ones, the
// layout of today's under the old magics.
func TestOldSnapshotsAreStale(t *testing.T) {
	v3, err := os.ReadFile("testdata/v3-no-vectors.snap")
	if err != nil {
		t.Fatal(err)
	}
	v4, err := os.ReadFile("testdata/v4-flat-postings.snap")
	if err != nil {
		t.Fatal(err)
	}
	c := newThreadCorpus(t, 31, 60, StatsIndex, 0.5)
	for range 200 {
		c.step()
	}
	var now bytes.Buffer
	if err := c.ix.Encode(&now); err != nil {
		t.Fatal(err)
	}
	v5 := slices.Concat([]byte("memhost-index\x00v5\n"), now.Bytes()[len(magic):])
	v6 := slices.Concat([]byte("memhost-index\x00v6\n"), now.Bytes()[len(magic):])
	v7 := slices.Concat([]byte("memhost-index\x00v7\n"), now.Bytes()[len(magic):])
	for _, tc := range []struct {
		name, why string
		data      []byte
	}{
		{"v3", "across scopes", v3}, {"v4", "across scopes", v4}, {"v5", "across scopes", v5},
		{"v2", "across scopes", []byte("memhost-index\x00v2\n")}, {"v6", "system tags", v6},
		{"v7", "not in NFC", v7},
	} {
		if _, err := Decode(bytes.NewReader(tc.data)); !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s snapshot: Decode = %v, want ErrStale saying %q", tc.name, err, tc.why)
		}
	}
	if _, err := Decode(bytes.NewReader(now.Bytes())); err != nil {
		t.Errorf("this layout's snapshot: %v", err)
	}
}

// resum answers b, a snapshot of this layout or not, with its last 4 bytes replaced
// by the checksum of the bytes before them.
func resum(b []byte) []byte {
	if len(b) < len(magic)+4 || string(b[:len(magic)]) != magic {
		return b
	}
	body := len(b) - 4
	return binary.LittleEndian.AppendUint32(slices.Clone(b[:body]), crc32.Checksum(b[:body], castagnoli))
}

func mustSearch(t *testing.T, ix *Index, q Query) []Hit {
	t.Helper()
	hits, err := ix.Search(q)
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

// snapshotRoundTrip encodes ix and answers the index decoded from it.
func snapshotRoundTrip(t testing.TB, ix *Index) *Index {
	t.Helper()
	var buf bytes.Buffer
	if err := ix.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// TestSnapshotReencodes: a decoded snapshot encodes to the same bytes,
// whether its lists were written as held (no deleted document) or
// rebuilt on dense docnos (after deletes), and a delete after decoding
// takes the document's postings as before.
func TestSnapshotReencodes(t *testing.T) {
	ix, _ := New(Options{Weights: ftsWeights})
	words := strings.Fields("coffee tea beans milk sugar cup morning evening bread jam")
	for i := range 300 {
		body := []string{words[i%len(words)], words[(i*7)%len(words)], fmt.Sprintf("w%d", i%37)}
		if err := ix.Put(Doc{ID: fmt.Sprintf("d%d", i), Realm: "r", Scope: "realm", Fields: [][]string{nil, {words[i%3]}, nil, body}}); err != nil {
			t.Fatal(err)
		}
	}
	encode := func(ix *Index) []byte {
		var buf bytes.Buffer
		if err := ix.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	for _, step := range []string{"no deletes", "after deletes"} {
		if step == "after deletes" {
			for i := 0; i < 300; i += 3 {
				ix.Delete("r", fmt.Sprintf("d%d", i))
			}
		}
		first := encode(ix)
		back, err := Decode(bytes.NewReader(first))
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if again := encode(back); !bytes.Equal(again, first) {
			t.Fatalf("%s: the decoded index encodes to other bytes", step)
		}
		q := Query{Realm: "r", Terms: []string{"coffee", "w4"}, Limit: 20}
		want, _ := ix.Search(q)
		if got := mustSearch(t, back, q); !slices.Equal(got, want) {
			t.Fatalf("%s: decoded answers %v, want %v", step, got, want)
		}
		for _, h := range want[:5] {
			ix.Delete("r", h.ID)
			back.Delete("r", h.ID)
		}
		want, _ = ix.Search(q)
		if got := mustSearch(t, back, q); !slices.Equal(got, want) {
			t.Fatalf("%s, deleting after decode: answers %v, want %v", step, got, want)
		}
	}
}

// TestDecodeChecksEveryByte changes each byte of a small snapshot to
// values that move varints and bounds (0, 1, 0x7f, 0x80, 0xff, one more,
// one less, one bit flipped), with the checksum made right again: each
// variant is refused as corrupt or stale, or decodes to an index that
// answers and takes a delete; none panics.
func TestDecodeChecksEveryByte(t *testing.T) {
	ix, _ := New(Options{Weights: ftsWeights})
	for i, body := range []string{"coffee beans", "coffee tea", "tea milk sugar"} {
		_ = ix.Put(Doc{ID: fmt.Sprintf("d%d", i), Realm: "r", Scope: "realm", Fields: [][]string{nil, nil, nil, strings.Fields(body)}})
	}
	var buf bytes.Buffer
	if err := ix.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	refused := 0
	for at := len(magic); at < len(good)-4; at++ {
		for _, v := range []byte{0, 1, 0x7f, 0x80, 0xff, good[at] + 1, good[at] - 1, good[at] ^ 0x10} {
			if v == good[at] {
				continue
			}
			data := slices.Clone(good)
			data[at] = v
			back, err := Decode(bytes.NewReader(resum(data)))
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrStale) {
					t.Fatalf("byte %d = %d: %v", at, v, err)
				}
				refused++
				continue
			}
			if _, err := back.Search(Query{Realm: "r", Terms: []string{"coffee", "tea"}, Limit: 5}); err != nil {
				t.Fatalf("byte %d = %d: search: %v", at, v, err)
			}
			back.Delete("r", "d1")
		}
	}
	if refused == 0 {
		t.Fatal("no changed byte was refused")
	}
}
