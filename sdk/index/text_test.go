package index

import (
	"bytes"
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

// A tag stored before the host sent tags in NFC may be decomposed (e and a
// combining accent); the filters, now always in NFC, must still find it, a
// snapshot included, and an exclusion must still keep it out.
func TestTagsMatchInNFC(t *testing.T) {
	ix, _ := New(Options{Weights: ftsWeights, Stats: StatsRealm, ContextWeight: ContextWeight})
	if err := ix.Put(Doc{ID: "old", Realm: "r", Scope: "realm", Tags: []string{"cafe\u0301"}, Fields: [][]string{nil, {"espresso"}, nil, nil}}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ix.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := Decode(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*Index{ix, back} {
		for _, tag := range []string{"caf\u00e9", "CAF\u00c9", "cafe\u0301"} {
			hits, err := x.Search(Query{Realm: "r", Terms: []string{"espresso"}, Tags: []string{tag}, Limit: 5})
			if err != nil || len(hits) != 1 {
				t.Errorf("filter %q: %v, %v; want the record", tag, hits, err)
			}
			hits, err = x.Search(Query{Realm: "r", Terms: []string{"espresso"}, ExcludeTags: []string{tag}, Limit: 5})
			if err != nil || len(hits) != 0 {
				t.Errorf("exclusion %q: %v, %v; want none", tag, hits, err)
			}
		}
	}
}
