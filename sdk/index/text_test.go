package index

import (
	"strings"
	"testing"
)

func TestTagText(t *testing.T) {
	for _, c := range []struct {
		tags []string
		want string
	}{
		{nil, ""},
		{[]string{"red", "blue"}, "red blue"},
		{[]string{"memhost:user"}, ""},
		{[]string{"red", "memhost:assistant", "blue"}, "red blue"},
		{[]string{"memhost:proposal", "red"}, "red"},
		// Tags compare case-folded, so the namespace does too, look-alikes
		// of the same case orbit included (U+017F folds to s).
		{[]string{"MEMHOST:User", "Memho\u017ft:user", "red"}, "red"},
		// Only the namespace: a tag that merely holds the word stays text.
		{[]string{"memhost", "memhost-user", "team:memhost:user", "memhostuser"}, "memhost memhost-user team:memhost:user memhostuser"},
		// So is a ligature (U+FB06 "st"): one letter, outside s's orbit.
		{[]string{"memho\ufb06:", "memho\ufb06:user"}, "memho\ufb06: memho\ufb06:user"},
		// Full-width letters are another tag, not the namespace.
		{[]string{"\uff4d\uff45\uff4d\uff48\uff4f\uff53\uff54:user"}, "\uff4d\uff45\uff4d\uff48\uff4f\uff53\uff54:user"},
	} {
		if got := TagText(c.tags); got != c.want {
			t.Errorf("TagText(%q) = %q, want %q", c.tags, got, c.want)
		}
	}
}

// FuzzIsSystemTag holds IsSystemTag, which folds only the prefix's runes,
// to its definition: FoldTag(tag) starts with the folded prefix. The
// seeds run as a plain test.
func FuzzIsSystemTag(f *testing.F) {
	for _, seed := range []string{"", "memhost:", "memhost:user", "MEMHOST:proposal", "Memho\u017ft:user", "memho\ufb06:", "memhost", "memhos", "memhost-user",
		"\uff4d\uff45\uff4d\uff48\uff4f\uff53\uff54:user", "\xffmemhost:", "memhost\xff", "\u212aey", "m\u0301emhost:"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, tag string) {
		want := strings.HasPrefix(FoldTag(tag), foldedSystemTagPrefix)
		if got := IsSystemTag(tag); got != want {
			t.Fatalf("IsSystemTag(%q) = %v, want %v (FoldTag %q)", tag, got, want, FoldTag(tag))
		}
	})
}
