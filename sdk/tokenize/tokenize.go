// Package tokenize is memhost's one tokenizer, shared by the host and by
// plugins so that a query and a record are cut into terms the same way.
//
// It is Unicode-aware: a term is a run of letters, digits and combining
// marks of any script, lower-cased. Han, Hiragana, Katakana and Hangul have
// no spaces between words, so their runs are cut into overlapping bigrams
// (a lone character stands as itself). Common English stopwords and
// one-letter Latin words are dropped.
package tokenize

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tokens returns every term of s in order, repeats included.
func Tokens(s string) []string {
	var out []string
	each(s, func(t string) bool { out = append(out, t); return true })
	return out
}

// Terms returns the distinct terms of s in first-seen order.
func Terms(s string) []string {
	var out []string
	seen := map[string]struct{}{}
	each(s, func(t string) bool {
		if _, ok := seen[t]; !ok {
			seen[t] = struct{}{}
			out = append(out, t)
		}
		return true
	})
	return out
}

// HasTerms reports whether s holds at least one term. It stops at the
// first one, so it is cheap on long text.
func HasTerms(s string) bool {
	found := false
	each(s, func(string) bool { found = true; return false })
	return found
}

// IsCJK reports whether r belongs to a script written without spaces.
func IsCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r)
}

// each calls emit with each term of s until emit answers false.
func each(s string, emit func(string) bool) {
	var word strings.Builder
	var cjk []rune
	live := true
	flushWord := func() {
		if word.Len() == 0 {
			return
		}
		w := word.String()
		word.Reset()
		if _, stop := stopwords[w]; stop {
			return
		}
		if r, size := utf8.DecodeRuneInString(w); size == len(w) && r < utf8.RuneSelf && unicode.IsLetter(r) {
			return
		}
		live = live && emit(w)
	}
	flushCJK := func() {
		switch len(cjk) {
		case 0:
			return
		case 1:
			live = live && emit(string(cjk))
		default:
			for i := 0; live && i+1 < len(cjk); i++ {
				live = emit(string(cjk[i : i+2]))
			}
		}
		cjk = cjk[:0]
	}
	for _, r := range s {
		if !live {
			return
		}
		switch {
		case r == utf8.RuneError:
			flushWord()
			flushCJK()
		case IsCJK(r):
			flushWord()
			cjk = append(cjk, r)
		case isWordRune(r):
			flushCJK()
			word.WriteRune(unicode.ToLower(r))
		default:
			flushWord()
			flushCJK()
		}
	}
	if live {
		flushWord()
	}
	if live {
		flushCJK()
	}
}

// stopwords are dropped from every term list: words so common that they
// carry no topic.
var stopwords = func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are as at be because
been before being below between both but by can could did do does doing don down during each few for from
further had has have having he her here hers herself him himself his how i if in into is it its itself just
me more most my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those through to
too under until up very was we were what when where which while who whom why will with would you your yours
yourself yourselves s t ll re ve d m`) {
		m[w] = struct{}{}
	}
	return m
}()
