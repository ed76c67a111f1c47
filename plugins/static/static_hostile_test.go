package static

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// longMobList is a bindings file near the size cap: one identity in n
// mobs, each listed twice.
func longMobList(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"realms":{"default":{"mobs":{"alice":[`)
	for i := range 2 * n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"m%d"`, i%n)
	}
	b.WriteString(`]}}}}`)
	return []byte(b.String())
}

// A long mob list keeps each mob once, in the order written.
func TestLongMobListKeepsEachMobOnce(t *testing.T) {
	const n = 5_000
	f, err := Parse(longMobList(n))
	if err != nil {
		t.Fatal(err)
	}
	mobs := f.Realms["default"].Mobs["alice"]
	if len(mobs) != n {
		t.Fatalf("%d mobs kept, want %d", len(mobs), n)
	}
	for i, m := range mobs {
		if m != fmt.Sprintf("m%d", i) {
			t.Fatalf("mob %d is %s, want m%d", i, m, i)
		}
	}
}

// BenchmarkParseLongMobList: the file is read on the request path, under
// the resolver's lock, so its cost must grow with its size, not its
// square (duplicates were found by scanning the list per entry: 400,000
// mobs took over 20 s). Compare mobs=10000 with mobs=200000.
func BenchmarkParseLongMobList(b *testing.B) {
	for _, n := range []int{10_000, 200_000} {
		data := longMobList(n)
		b.Run(fmt.Sprintf("mobs=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Parse(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Duplicate keys are refused, not silently resolved to the last one.
func TestDuplicateBindingsRefused(t *testing.T) {
	for _, data := range []string{
		`{"realms":{"default":{"operators":{"alice":"carol","alice":"mallory"}}}}`,
		`{"realms":{"default":{"mobs":{"alice":["a"],"alice":["b"]}}}}`,
		`{"realms":{"default":{},"default":{}}}`,
	} {
		if _, err := Parse([]byte(data)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", data, err)
		}
	}
}
