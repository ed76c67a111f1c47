package sdk

import "testing"

// TestHasVisibleText: what memhost and the conformance kit both treat as
// an empty summary.
func TestHasVisibleText(t *testing.T) {
	for s, want := range map[string]bool{
		"":                           false,
		" \t\r\n":                    false,
		"\u00a0\u3000\u2028\u2029":   false,
		"\u200b\u200b":               false,
		"\ufeff\u2060\u200d \n":      false,
		"\x00\x07\x1b":               false,
		"\xff\xfe":                   false,
		"\ufffd\ufffd":               false,
		"\u200bdecided: ship friday": true,
		"✓":                          true,
		"决定":                         true,
		"-":                          true,
	} {
		if got := HasVisibleText(s); got != want {
			t.Errorf("HasVisibleText(%q) = %v, want %v", s, got, want)
		}
	}
}
