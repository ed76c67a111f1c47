package coordinator

import (
	"sync"
	"unicode/utf8"
)

// Leet spelling writes letters with symbols as it does with digits:
// memho$t, observat!on, @gent, mem-+oken, m€m, t○ken. A model reads those
// words as readily as memho5t, so each such symbol has the letter it
// stands for as its second reading (bmpFoldTable.sound for the BMP
// symbols and the compatibility forms of the ASCII ones, asciiSounds for
// ASCII), as Cyrillic Н has n: read by its shape it stays what it was
// (punctuation, a separator, or its transliteration), so "a@b.com",
// "C++", "100%!" and "$5" read as before, and a marker spelled with
// symbols is matched either way, letter by letter.

// asciiSymbolLetters is the letter each ASCII symbol stands for; "()"
// stands for o (parenPairEnd).
var asciiSymbolLetters = map[byte]byte{
	'$': 's', '@': 'a', '^': 'a', '!': 'i', '|': 'i', '+': 't', '#': 'h',
}

// symbolLetters is the letter each BMP symbol stands for in leet spelling:
// currency signs and set symbols for e, circles for o, crosses and daggers
// for t, and so on. A symbol that has a second reading already (Greek Σ,
// read as o by its shape and s by its sound) keeps it.
var symbolLetters = map[rune]rune{
	'€': 'e', '£': 'e', '∈': 'e', '∊': 'e', '∃': 'e', '∑': 'e', '⋲': 'e', '⋳': 'e',
	'○': 'o', '●': 'o', '◎': 'o', '◉': 'o', '◌': 'o', '◍': 'o', '◦': 'o', '⚪': 'o', '⚫': 'o',
	'⭕': 'o', '⭘': 'o', '❍': 'o', '⊙': 'o', '⊚': 'o', '⊛': 'o', '⊕': 'o', '⊗': 'o', '⊘': 'o', '⦿': 'o',
	'⨀': 'o', '∅': 'o', '⌀': 'o', '°': 'o', 'ʘ': 'o', '∘': 'o',
	'†': 't', '‡': 't', '✝': 't', '✞': 't', '✟': 't', '✠': 't', '☦': 't',
	'∧': 'a', 'Δ': 'a', '∆': 'a',
	'¡': 'i', '¦': 'i',
	'§': 's',
}

// asciiSounds holds the folded units of each ASCII symbol's letter.
var asciiSounds = sync.OnceValue(func() *[utf8.RuneSelf][]rune {
	var t [utf8.RuneSelf][]rune
	for c, letter := range asciiSymbolLetters {
		emitASCII(string(letter), func(u rune) { t[c] = append(t[c], u) })
	}
	for c, letter := range turnedLetters {
		emitASCII(string(letter), func(u rune) { t[c] = append(t[c], u) })
		emitASCII(string(letter), func(u rune) { t[c-'a'+'A'] = append(t[c-'a'+'A'], u) })
	}
	return &t
})

// parensSound is the folded o that "()" reads as.
var parensSound = sync.OnceValue(func() []rune {
	var units []rune
	emitASCII("o", func(u rune) { units = append(units, u) })
	return units
})

// The compatibility forms of these symbols (fullwidth ＄ ＠ ！ ｜ ＃ ＋ （ ）,
// small ﹩ ﹫ ﹢ ﹙, superscript ⁺ ⁽, and so on: every character whose
// compatibility decomposition is the one symbol) read as the symbol does:
// buildBMPFolds gives each symbol its sound in the fold table, and every
// form of it inherits that, as a form of a letter does. A parenthesis's
// sound in the table is the parenthesis itself (parenOf): it reads as o
// only with its pair, "(" then ")" with nothing but skippable characters
// between ("(\u200b)", "( )", "（）", "⁽⁾"), which parenPairEnd finds.

// parenOf answers '(' or ')' when sound is the fold table's second reading
// of a form of that parenthesis, else 0: its reading is the pair's, not
// its own.
func parenOf(sound []rune) rune {
	if len(sound) == 1 && (sound[0] == '(' || sound[0] == ')') {
		return sound[0]
	}
	return 0
}

// parenPairEnd answers the end of the closing parenthesis (any form of it)
// that pairs with an opening one ending at s[j]: the first character from
// j that is not skippable, when it is one, else -1. A line break ends the
// pair. Nothing past that first character is read, so reading every
// opening parenthesis's pair reads each byte at most once more.
func parenPairEnd(s string, j int) int {
	table := bmpFolds()
	for j < len(s) {
		if c := s[j]; c < utf8.RuneSelf {
			switch {
			case c == ')':
				return j + 1
			case (c <= ' ' || c == 0x7f) && !breaksLine(rune(c)):
				j++
				continue
			}
			return -1
		}
		r, size := utf8.DecodeRuneInString(s[j:])
		if r < 0x10000 && table.sound[r] == ')' {
			return j + size
		}
		if breaksLine(r) || !skippable(r) {
			return -1
		}
		j += size
	}
	return -1
}

// leadingSound answers the first unit an ASCII byte may be read as by
// its sound, when it starts one ('(' may start "()"), else -1.
func leadingSound(c byte) rune {
	if c == '(' {
		return parensSound()[0]
	}
	if sound := asciiSounds()[c]; len(sound) > 0 {
		return sound[0]
	}
	return -1
}

// leetSpellings is the letter each run of ASCII characters spells in
// leet: |\/| and /\/\ are m, |\| n, |-| h, |< k, |) d, |2 r, \/ v, \/\/
// w, >< x, |_ l, (_) u, and so on; "()" is o (parenPairEnd). The
// scanner reads such a run both ways: its characters each as what they
// are, and the run, from its first character, as its letter, a letter or
// digit in it then read as nothing (|2 is r, not r and 2). A run of
// letters and digits alone (nn, vv, 12, 13) is not one: words and numbers
// are spelled so.
var leetSpellings = []struct {
	seq    string
	letter byte
}{
	{`/\`, 'a'}, {`/-\`, 'a'}, {`/_\`, 'a'},
	{`|3`, 'b'}, {`!3`, 'b'}, {`]3`, 'b'}, {`|8`, 'b'},
	{`[`, 'c'}, {`{`, 'c'}, {`<`, 'c'},
	{`|)`, 'd'}, {`|>`, 'd'}, {`[)`, 'd'}, {`|]`, 'd'}, {`[>`, 'd'}, {`])`, 'd'},
	{`[-`, 'e'}, {`|=-`, 'e'},
	{`|=`, 'f'}, {`|#`, 'f'}, {`/=`, 'f'},
	{`(_+`, 'g'}, {`(_-`, 'g'}, {`[,`, 'g'},
	{`|-|`, 'h'}, {`]-[`, 'h'}, {`}{`, 'h'}, {`)-(`, 'h'}, {`(-)`, 'h'}, {`}-{`, 'h'}, {`|~|`, 'h'}, {`[-]`, 'h'}, {`/-/`, 'h'}, {`|=|`, 'h'},
	{`_|`, 'j'}, {`_/`, 'j'}, {`]`, 'j'},
	{`|<`, 'k'}, {`|{`, 'k'}, {`|(`, 'k'}, {`]<`, 'k'}, {`|X`, 'k'},
	{`|_`, 'l'}, {`[_`, 'l'}, {`1_`, 'l'},
	{`|\/|`, 'm'}, {`/\/\`, 'm'}, {`^^`, 'm'}, {`[]\/[]`, 'm'}, {`(\/)`, 'm'}, {`|v|`, 'm'}, {`(v)`, 'm'}, {`/|\/|\`, 'm'}, {`|\\/|`, 'm'}, {`/V\`, 'm'}, {`|Y|`, 'm'}, {`|^^|`, 'm'}, {`[V]`, 'm'}, {`{V}`, 'm'},
	{`|\|`, 'n'}, {`/\/`, 'n'}, {`(\)`, 'n'}, {`^/`, 'n'}, {`[\]`, 'n'}, {`{\}`, 'n'}, {`/|/`, 'n'}, {`|V`, 'n'}, {`]\[`, 'n'}, {`<\>`, 'n'},
	{`[]`, 'o'}, {`<>`, 'o'}, {`{}`, 'o'}, {`[ ]`, 'o'},
	{`|*`, 'p'}, {`|o`, 'p'}, {`|D`, 'p'}, {`|"`, 'p'}, {`|>`, 'p'}, {`|^`, 'p'},
	{`(,)`, 'q'}, {`0_`, 'q'}, {`O_`, 'q'},
	{`|2`, 'r'}, {`|?`, 'r'}, {`|Z`, 'r'}, {`|-`, 'r'}, {`|^`, 'r'}, {`/2`, 'r'},
	{`-|-`, 't'}, {`~|~`, 't'}, {`'][`, 't'},
	{`|_|`, 'u'}, {`(_)`, 'u'}, {`\_/`, 'u'}, {`[_]`, 'u'}, {`\_\`, 'u'}, {`L|`, 'u'}, {`/_/`, 'u'},
	{`\/`, 'v'}, {`|/`, 'v'}, {`\|`, 'v'},
	{`\/\/`, 'w'}, {`\^/`, 'w'}, {`|/\|`, 'w'}, {`\|/`, 'w'}, {`'//`, 'w'}, {`\\'`, 'w'}, {`(/\)`, 'w'}, {`\V/`, 'w'}, {`\N`, 'w'}, {`\X/`, 'w'},
	{`><`, 'x'}, {`)(`, 'x'}, {`}{`, 'x'}, {`][`, 'x'},
	{"`/", 'y'}, {`'/`, 'y'}, {`\|/`, 'y'}, {`-/`, 'y'},
	{`~/_`, 'z'}, {`7_`, 'z'}, {`-/_`, 'z'}, {`>_`, 'z'},
}

// leetSpelling is one of leetSpellings with its letter folded.
type leetSpelling struct {
	seq   string
	units []rune
}

// leetSpellingsFrom holds, by first byte, the leet spellings starting
// with it.
var leetSpellingsFrom = sync.OnceValue(func() *[utf8.RuneSelf][]leetSpelling {
	var t [utf8.RuneSelf][]leetSpelling
	for _, sp := range leetSpellings {
		var units []rune
		emitASCII(string(sp.letter), func(u rune) { units = append(units, u) })
		t[sp.seq[0]] = append(t[sp.seq[0]], leetSpelling{sp.seq, units})
	}
	return &t
})

// asciiPlain classes the ASCII bytes the scanner may read by their shape
// alone: asciiShapeOnly, no sound, no leet spelling starts with them, not
// '(' (read with its pair as o); asciiOneSound, the same but for a sound
// of one ASCII unit (a turned letter, a symbol), which the scanner need
// not read when it leads nowhere. A letter or digit among them is read as
// nothing too inside a leet spelling, which the scanner checks.
var asciiPlain = sync.OnceValue(func() *[utf8.RuneSelf]uint8 {
	var t [utf8.RuneSelf]uint8
	sounds, spellings := asciiSounds(), leetSpellingsFrom()
	for c := range utf8.RuneSelf {
		if len(spellings[c]) > 0 || c == '(' {
			continue
		}
		switch sound := sounds[c]; {
		case sound == nil:
			t[c] = asciiShapeOnly
		case len(sound) == 1 && sound[0] < utf8.RuneSelf:
			t[c] = asciiOneSound
		}
	}
	return &t
})

const (
	asciiShapeOnly = 1 + iota
	asciiOneSound
)
