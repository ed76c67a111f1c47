package wordvec

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/tiny-wink.json and testdata/tiny.wvt")

// tinyWords is the tiny source's vocabulary in rank order: common words,
// pieces the converter must leave out (punctuation, clitics no token
// matches), a hyphenated word and an upper-case entry.
var tinyWords = []string{
	"the", ",", ".", "i", "to", "and", "a", "'s", "of", "my", "n't", "do", "can", "not", "will", "is",
	"read", "before", "bed", "usually", "evening", "routine", "tips", "any", "for", "book", "sleep",
	"night", "morning", "coffee", "stock", "market", "fell", "sharply", "well", "known", "well-being",
	"Paris", "o'neill", "café", "2024", "-", "he", "aardvark",
}

const (
	tinyDims  = 8
	tinyWidth = tinyDims + 2 // vector, l2 norm, rank
	tinyKeep  = 38           // words the tiny table keeps: all but the last usable one
)

// tinySource answers the tiny wink-layout JSON document: the package's
// key order and shape, small random vectors.
func tinySource() []byte {
	r := rand.New(rand.NewPCG(7, 11))
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"precision":8,"l2NormIndex":%d,"wordIndex":%d,"size":%d,"dimensions":%d,"words":`, tinyDims, tinyDims+1, len(tinyWords), tinyDims)
	words, _ := json.Marshal(tinyWords)
	b.Write(words)
	b.WriteString(`,"vectors":{`)
	// Not in rank order: the converter must not depend on the order of
	// the vectors object.
	order := r.Perm(len(tinyWords))
	for n, i := range order {
		if n > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(tinyWords[i])
		fmt.Fprintf(&b, "%s:[", key)
		for range tinyDims {
			fmt.Fprintf(&b, "%.5f,", r.NormFloat64())
		}
		fmt.Fprintf(&b, "1.0,%d]", i)
	}
	b.WriteString(`},"unkVector":[0,0,0,0,0,0,0,0,0,-1]}`)
	return b.Bytes()
}

// tinyTable loads testdata/tiny.wvt, rewriting both tiny files first
// under -update. TestTinyGolden holds the pair to the converter.
func tinyTable(t testing.TB) *Table {
	t.Helper()
	src, table := filepath.Join("testdata", "tiny-wink.json"), filepath.Join("testdata", "tiny.wvt")
	if *update {
		data := tinySource()
		out, err := Convert(bytes.NewReader(data), tinyKeep)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(src, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(table, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tb, err := LoadTable(table)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// tinyFile answers testdata/tiny.wvt's bytes.
func tinyFile(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "tiny.wvt"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// encoded answers d encoded and loaded again.
func encoded(t testing.TB, d TableData) *Table {
	t.Helper()
	data, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	tb, err := ParseTable(data)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}
