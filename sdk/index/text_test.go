package index

import "testing"

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
