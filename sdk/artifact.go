package sdk

import (
	"unicode"
	"unicode/utf8"
)

// HasVisibleText reports whether s holds a character a reader sees: not
// only spaces, controls, format characters (zero-width spaces, a
// byte-order mark) or invalid bytes and U+FFFD, which a model would read
// as an empty summary. memhost refuses a compactor's artifact without
// visible text as empty (compaction_empty), and the conformance kit holds
// compactors to the same rule through this one function.
func HasVisibleText(s string) bool {
	for _, r := range s {
		if r != utf8.RuneError && unicode.IsGraphic(r) && !unicode.IsSpace(r) {
			return true
		}
	}
	return false
}
