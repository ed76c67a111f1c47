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
