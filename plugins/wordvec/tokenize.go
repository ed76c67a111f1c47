package wordvec

import (
	"bytes"
	"unicode"
	"unicode/utf8"
)

// The tokenizer cuts what GloVe's vocabulary holds, which sdk/tokenize
// does not fit: that one stems and drops stop words, and GloVe keys whole
// lower-case words ("routines", "the"), hyphenated words ("cross-country")
// and the Penn Treebank's contraction pieces ("n't"). A token here is a
// lower-cased run of letters, digits and combining marks, joined across
// an inner hyphen or apostrophe (the typographic apostrophe counts as one).

// Tokens answers the tokens of s in order.
func Tokens(s string) []string {
	var out []string
	eachToken(s, nil, func(tok []byte) { out = append(out, string(tok)) })
	return out
}

func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r)
}

// joiner answers the byte a rune joins words with, or 0.
func joiner(r rune) byte {
	switch r {
	case '-':
		return '-'
	case '\'', '\u2019':
		return '\''
	}
	return 0
}

// eachToken calls emit with each token of s, lower-cased into buf (reused;
// emit must not keep the slice).
func eachToken(s string, buf []byte, emit func([]byte)) {
	tok := buf[:0]
	var pending byte // a joiner seen after a word rune, kept if another follows
	flush := func() {
		if len(tok) > 0 {
			emit(tok)
		}
		tok, pending = tok[:0], 0
	}
	for _, r := range s {
		switch {
		case isWordRune(r):
			if pending != 0 {
				tok = append(tok, pending)
				pending = 0
			}
			tok = utf8.AppendRune(tok, unicode.ToLower(r))
		case joiner(r) != 0 && len(tok) > 0 && pending == 0:
			pending = joiner(r)
		default:
			flush()
		}
	}
	flush()
}

// contractions maps a clitic to the word GloVe's vocabulary has for it; ""
// drops it (the possessive 's adds nothing a static vector can use).
var contractions = []struct{ suffix, word string }{
	{"n't", "not"}, {"'s", ""}, {"'re", "are"}, {"'ll", "will"}, {"'ve", "have"}, {"'d", "would"}, {"'m", "am"},
}

// negStems are the stems "n't" leaves that are not words themselves.
var negStems = map[string]string{"ca": "can", "wo": "will", "sha": "shall", "ai": "is"}

// lookupToken calls found with the rank of each table word tok stands for:
// the token itself when the table has it, otherwise its parts (a
// contraction's stem and clitic, a hyphenated word's pieces). Parts the
// table lacks are skipped.
func (t *Table) lookupToken(tok []byte, found func(int)) {
	if i := t.Lookup(tok); i >= 0 {
		found(i)
		return
	}
	if h := bytes.IndexByte(tok, '-'); h >= 0 {
		for part := range bytes.SplitSeq(tok, []byte{'-'}) {
			if len(part) > 0 {
				t.lookupToken(part, found)
			}
		}
		return
	}
	if bytes.IndexByte(tok, '\'') < 0 {
		return
	}
	for _, c := range contractions {
		stem, ok := bytes.CutSuffix(tok, []byte(c.suffix))
		if !ok || len(stem) == 0 {
			continue
		}
		if c.suffix == "n't" {
			if w, ok := negStems[string(stem)]; ok {
				stem = []byte(w)
			}
		}
		t.lookupToken(stem, found)
		if c.word != "" {
			t.lookupToken([]byte(c.word), found)
		}
		return
	}
	for part := range bytes.SplitSeq(tok, []byte{'\''}) {
		if len(part) > 0 {
			t.lookupToken(part, found)
		}
	}
}
