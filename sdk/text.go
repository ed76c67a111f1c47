package sdk

import "unicode/utf8"

// CutText answers s cut to at most n bytes at a character's start, so a
// valid text stays valid (a split character would show as U+FFFD).
func CutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
