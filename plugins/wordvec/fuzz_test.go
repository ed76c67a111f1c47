package wordvec

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseTable feeds the loader arbitrary bytes. Half the inputs get a
// valid checksum appended, so the fuzzer reaches past it. A table that
// loads must encode back to the same bytes and embed text without panic
// into a vector of its dimensions.
func FuzzParseTable(f *testing.F) {
	good := tinyFile(f)
	f.Add(good, false)
	f.Add(good[:len(good)-4], true)
	f.Add(good[:headerBytes], true)
	f.Add([]byte(tableMagic), false)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, data []byte, addCRC bool) {
		if addCRC {
			data = setCRC(append(bytes.Clone(data), 0, 0, 0, 0))
		}
		tb, err := ParseTable(data)
		if err != nil {
			if !errors.Is(err, ErrBadTable) {
				t.Fatalf("error %v does not wrap ErrBadTable", err)
			}
			return
		}
		d := tb.Data()
		back, err := d.Encode()
		if err != nil {
			t.Fatalf("a loaded table does not encode: %v", err)
		}
		if !bytes.Equal(back, data) {
			t.Fatal("a loaded table encodes to other bytes")
		}
		if v := NewEmbedder(tb).Embed("the well-being of o'neill's café can't wait"); len(v) != tb.Dims() {
			t.Fatalf("%d dimensions, want %d", len(v), tb.Dims())
		}
	})
}

// FuzzConvert feeds the converter arbitrary JSON: it answers a loadable
// table or an error wrapping ErrSource, never a panic.
func FuzzConvert(f *testing.F) {
	tiny, err := os.ReadFile(filepath.Join("testdata", "tiny-wink.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tiny)
	f.Add([]byte(`{"l2NormIndex":1,"wordIndex":2,"size":1,"dimensions":1,"words":["a"],"vectors":{"a":[0.5,1,0]}}`))
	f.Add([]byte(`{"vectors":{}}`))
	f.Fuzz(func(t *testing.T, src []byte) {
		data, err := Convert(bytes.NewReader(src), 8)
		if err != nil {
			return
		}
		if _, err := ParseTable(data); err != nil {
			t.Fatalf("the converter wrote a table that does not load: %v", err)
		}
	})
}

// FuzzTokens holds the tokenizer to its definition on any input: tokens
// are non-empty, lower case, start and end with a word rune, and cutting
// them again, joined by spaces, gives them back.
func FuzzTokens(f *testing.F) {
	for _, s := range []string{"Don’t stop", "well-being--x", "'quoted' it's'", "ÉCOLE 3.5", "a\xffb", "İstanbul ǅ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks := Tokens(s)
		for _, tok := range toks {
			first, _ := utf8.DecodeRuneInString(tok)
			last, _ := utf8.DecodeLastRuneInString(tok)
			if tok == "" || !isWordRune(first) || !isWordRune(last) || strings.ToLower(tok) != tok {
				t.Fatalf("Tokens(%q) holds %q", s, tok)
			}
		}
		if again := Tokens(strings.Join(toks, " ")); !slices.Equal(again, toks) {
			t.Fatalf("Tokens(%q) = %q, cut again %q", s, toks, again)
		}
	})
}
