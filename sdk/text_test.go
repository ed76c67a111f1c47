package sdk

import "testing"

func TestCutText(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc"},
		{"a€b", 2, "a"}, // € is 3 bytes: never split
		{"a€b", 4, "a€"},
		{"€", 0, ""},
		{"abc", -1, ""},
	} {
		if got := CutText(c.in, c.n); got != c.want {
			t.Errorf("CutText(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
