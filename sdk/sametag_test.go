package sdk

import "testing"

func TestSameTag(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"coffee", "Coffee", true},
		{"caf\u00e9", "cafe\u0301", true},
		{"CAFE\u0301", "caf\u00e9", true},
		{"cafe", "caf\u00e9", false},
		{"tea", "coffee", false},
	} {
		if got := SameTag(c.a, c.b); got != c.want {
			t.Errorf("SameTag(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// A record stored before the host sent tags in NFC may hold a decomposed
// tag: HasTag (the SDK's neighbour filter, the guide's) must match it.
func TestHasTagInNFC(t *testing.T) {
	r := Record{Tags: []string{"cafe\u0301"}}
	if !r.HasTag("caf\u00e9") || !r.HasTag("CAF\u00c9") {
		t.Error("a decomposed tag does not match its composed form")
	}
}
