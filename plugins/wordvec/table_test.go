package wordvec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTinyGolden holds the converter to the committed tiny table: the
// same source gives the same bytes (quantisation, Zipf estimate, filtered
// words and common component all included).
func TestTinyGolden(t *testing.T) {
	tinyTable(t)
	src, err := os.ReadFile(filepath.Join("testdata", "tiny-wink.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src, tinySource()) {
		t.Fatal("testdata/tiny-wink.json is not what tinySource makes; rerun with -update")
	}
	got, err := Convert(bytes.NewReader(src), tinyKeep)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, tinyFile(t)) {
		t.Fatal("converting testdata/tiny-wink.json no longer gives testdata/tiny.wvt; rerun with -update if the change is meant")
	}
}

func TestConvertKeepsTokenWordsByRank(t *testing.T) {
	tb := tinyTable(t)
	var want []string
	for _, w := range tinyWords {
		if toks := Tokens(w); len(toks) == 1 && toks[0] == w && len(want) < tinyKeep {
			want = append(want, w)
		}
	}
	var got []string
	for i := range tb.Len() {
		got = append(got, tb.Word(i))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("words %q, want %q", got, want)
	}
	for _, left := range []string{",", ".", "'s", "Paris", "-"} {
		if tb.Lookup([]byte(left)) >= 0 {
			t.Errorf("%q is in the table", left)
		}
	}
	// The Zipf estimate counts ranks in the whole source, skipped words
	// included: "i" is the source's 4th word.
	var h float64
	for k := 1; k <= len(tinyWords); k++ {
		h += 1 / float64(k)
	}
	if got, want := tb.Freq(tb.Lookup([]byte("i"))), float32(1/(4*h)); got != want {
		t.Errorf("p(i) = %v, want %v", got, want)
	}
}

func TestTableRoundTrip(t *testing.T) {
	tb := tinyTable(t)
	d := tb.Data()
	data, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, tinyFile(t)) {
		t.Fatal("encoding a loaded table does not give its file back")
	}
	back, err := ParseTable(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range back.Len() {
		if got := back.Lookup([]byte(back.Word(i))); got != i {
			t.Errorf("Lookup(%q) = %d, want %d", back.Word(i), got, i)
		}
	}
	for _, w := range []string{"", "zebra", "THE", "the "} {
		if got := back.Lookup([]byte(w)); got != -1 {
			t.Errorf("Lookup(%q) = %d, want -1", w, got)
		}
	}
	if back.Hash() != tb.Hash() || len(back.Hash()) != 64 {
		t.Errorf("hash %q, want %q", back.Hash(), tb.Hash())
	}
}

// TestQuantise holds the int8 encoding to within half a step of the
// source value.
func TestQuantise(t *testing.T) {
	for _, v := range [][]float32{{0.5, -1, 0.25, 0}, {3, 3, -3}, {0, 0}, {1e-20, -2e-20}} {
		scale, q := quantise(v)
		if !(scale > 0) {
			t.Fatalf("%v: scale %v", v, scale)
		}
		for i, x := range v {
			if q[i] < -127 {
				t.Fatalf("%v: %d below -127", v, q[i])
			}
			if diff := math.Abs(float64(x) - float64(scale)*float64(q[i])); diff > float64(scale)/2*1.0001 {
				t.Errorf("%v[%d]: %v back as %v", v, i, x, scale*float32(q[i]))
			}
		}
	}
}

// setCRC rewrites a body's checksum, so a test reaches the check after it.
func setCRC(b []byte) []byte {
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	return b
}

func TestParseTableRejects(t *testing.T) {
	good := tinyFile(t)
	tb := tinyTable(t)
	n, dims := tb.Len(), tb.Dims()
	vocab := 0
	for i := range n {
		vocab += 1 + len(tb.Word(i))
	}
	pcAt, vocabAt := headerBytes, headerBytes+4*dims
	freqAt := vocabAt + vocab
	scaleAt, vecAt := freqAt+4*n, freqAt+8*n
	put32 := func(at int, v uint32) func([]byte) []byte {
		return func(b []byte) []byte { binary.LittleEndian.PutUint32(b[at:], v); return setCRC(b) }
	}
	putF := func(at int, f float32) func([]byte) []byte { return put32(at, math.Float32bits(f)) }
	cases := []struct {
		name, want string
		edit       func([]byte) []byte
	}{
		{"empty", "too short", func([]byte) []byte { return nil }},
		{"magic", "wrong magic", func(b []byte) []byte { b[0] = 'X'; return setCRC(b) }},
		{"version", "version 2", func(b []byte) []byte { b[4] = 2; return setCRC(b) }},
		{"checksum", "checksum", func(b []byte) []byte { b[vecAt]++; return b }},
		{"truncated", "checksum", func(b []byte) []byte { return b[:len(b)-5] }},
		{"truncated with checksum", "the header implies", func(b []byte) []byte { return setCRC(b[:len(b)-1]) }},
		{"zero dims", "dimensions 0", func(b []byte) []byte { b[6], b[7] = 0, 0; return setCRC(b) }},
		{"count", "the header implies", put32(8, uint32(n+1))},
		{"huge count", "word count", put32(8, math.MaxUint32)},
		{"sif_a", "sif_a", putF(12, 1.5)},
		{"sif_a NaN", "sif_a", putF(12, float32(math.NaN()))},
		{"vocab bytes", "the header implies", put32(16, uint32(vocab+1))},
		{"pc length", "common component has length", putF(pcAt, 7)},
		{"pc NaN", "not finite", putF(pcAt, float32(math.Inf(1)))},
		{"word length", "word 0: length 200 does not fit", func(b []byte) []byte { b[vocabAt] = 200; return setCRC(b) }},
		{"upper case", "not lower case", func(b []byte) []byte { b[vocabAt+1] = 'T'; return setCRC(b) }},
		{"not a token", "not one token", func(b []byte) []byte { b[vocabAt+1] = ' '; return setCRC(b) }},
		{"not UTF-8", "not UTF-8", func(b []byte) []byte { b[vocabAt+1] = 0xff; return setCRC(b) }},
		{"freq order", "frequency order", putF(freqAt+4, 0.9)},
		{"freq zero", "outside (0, 1]", putF(freqAt+4*(n-1), 0)},
		{"freq sum", "over 1", func(b []byte) []byte {
			for i := range n {
				binary.LittleEndian.PutUint32(b[freqAt+4*i:], math.Float32bits(0.5))
			}
			return setCRC(b)
		}},
		{"scale zero", "outside", putF(scaleAt, 0)},
		{"scale tiny", "outside", putF(scaleAt, 1e-31)},
		{"scale huge", "outside", putF(scaleAt, 2e36)},
		{"scale NaN", "outside", putF(scaleAt, float32(math.NaN()))},
		{"scale inf", "outside", putF(scaleAt+4, float32(math.Inf(1)))},
		{"int8 -128", "-128", func(b []byte) []byte { b[vecAt+3] = 0x80; return setCRC(b) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseTable(c.edit(bytes.Clone(good)))
			if !errors.Is(err, ErrBadTable) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrBadTable saying %q", err, c.want)
			}
		})
	}
}

func TestEncodeRejects(t *testing.T) {
	base := func() TableData {
		return TableData{Dims: 2, SIFA: 1e-3, Words: []string{"a", "b"}, Freq: []float32{0.2, 0.1}, Scale: []float32{1, 1}, Vecs: []int8{1, 2, 3, 4}}
	}
	good := base()
	if _, err := good.Encode(); err != nil {
		t.Fatalf("a good table: %v", err)
	}
	cases := map[string]func(*TableData){
		"short vectors":  func(d *TableData) { d.Vecs = d.Vecs[:3] },
		"long word":      func(d *TableData) { d.Words[0] = strings.Repeat("x", 256) },
		"duplicate word": func(d *TableData) { d.Words[1] = "a" },
		"pc length":      func(d *TableData) { d.PC = []float32{1} },
		"pc not unit":    func(d *TableData) { d.PC = []float32{1, 1} },
	}
	for name, edit := range cases {
		d := base()
		edit(&d)
		if _, err := d.Encode(); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

func TestConvertRejects(t *testing.T) {
	const head = `{"l2NormIndex":2,"wordIndex":3,"size":2,"dimensions":2,"words":["a","b"],`
	cases := []struct{ name, src, want string }{
		{"not an object", `[1]`, "where {"},
		{"truncated", head + `"vectors":{"a":[0.5,0.25,1,0]`, "EOF"},
		{"no vectors", head + `"unkVector":[]}`, `no "vectors"`},
		{"vectors first", `{"vectors":{"a":[1,2,1,0]},"dimensions":2}`, `"dimensions" must come first`},
		{"indices inside the vector", `{"l2NormIndex":1,"wordIndex":2,"size":1,"dimensions":2,"words":["a"],"vectors":{}}`, `"l2NormIndex" (1)`},
		{"size disagrees", `{"l2NormIndex":2,"wordIndex":3,"size":3,"dimensions":2,"words":["a","b"],"vectors":{}}`, `"size" (3)`},
		{"short entry", head + `"vectors":{"a":[0.5,1,0]}}`, "3 numbers, want 4"},
		{"wrong rank", head + `"vectors":{"a":[0.5,0.25,1,1]}}`, "does not name it"},
		{"fractional rank", head + `"vectors":{"a":[0.5,0.25,1,0.5]}}`, "does not name it"},
		{"duplicate", head + `"vectors":{"a":[0.5,0.25,1,0],"a":[0.5,0.25,1,0]}}`, "does not name it"},
		{"huge", head + `"vectors":{"a":[1e300,0.25,1,0]}}`, "not a finite float32"},
		{"string value", head + `"vectors":{"a":["x",0.25,1,0]}}`, "cannot unmarshal"},
		{"trailing data", head + `"vectors":{"a":[0.5,0.25,1,0]}} {}`, "after the top-level object"},
		{"size after the vectors", head + `"vectors":{"a":[0.5,0.25,1,0]},"size":3000000000}`, `size after "vectors"`},
		{"dimensions after the vectors", head + `"vectors":{"a":[0.5,0.25,1,0]},"dimensions":7}`, `dimensions after "vectors"`},
		{"vectors twice", head + `"vectors":{"a":[0.5,0.25,1,0]},"vectors":{"b":[0.5,0.25,1,1]}}`, `"vectors" twice`},
		{"words after the vectors", head + `"vectors":{"a":[0.5,0.25,1,0]},"words":["b"]}`, `words after "vectors"`},
		{"no usable word", `{"l2NormIndex":2,"wordIndex":3,"size":1,"dimensions":2,"words":[","],"vectors":{",":[0.5,0.25,1,0]}}`, "no usable word"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Convert(strings.NewReader(c.src), 10)
			if !errors.Is(err, ErrSource) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrSource saying %q", err, c.want)
			}
		})
	}
	if _, err := Convert(strings.NewReader(head+`"vectors":{"a":[0.5,0.25,1,0]}}`), 10); err != nil {
		t.Fatalf("a good source: %v", err)
	}
}
