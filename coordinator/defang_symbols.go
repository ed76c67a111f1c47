package coordinator

import (
	"sync"
	"unicode/utf8"
)

// Leet spelling writes letters with symbols as it does with digits:
// memho$t, observat!on, @gent, mem-+oken, m€m, t○ken. A model reads those
// words as readily as memho5t, so each such symbol has the letter it
// stands for as its second reading (bmpFoldTable.sound for the BMP
// symbols, asciiSymbolSound for ASCII), as Cyrillic Н has n: read by its
// shape it stays what it was (punctuation, a separator, or its
// transliteration), so "a@b.com", "C++", "100%!" and "$5" read as before,
// and a marker spelled with symbols is matched either way, letter by
// letter.

// asciiSymbolLetters is the letter each ASCII symbol stands for; "()"
// stands for o (asciiSymbolSound).
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
	return &t
})

// parensSound is the folded o that "()" reads as.
var parensSound = sync.OnceValue(func() []rune {
	var units []rune
	emitASCII("o", func(u rune) { units = append(units, u) })
	return units
})

// asciiSymbolSound answers the second reading of the ASCII symbol at s[i]
// and the bytes it spans: its letter, or o for "()"; nil when it has none.
func asciiSymbolSound(s string, i int) ([]rune, int) {
	if s[i] == '(' && i+1 < len(s) && s[i+1] == ')' {
		return parensSound(), 2
	}
	return asciiSounds()[s[i]], 1
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
