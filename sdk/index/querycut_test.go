package index

import (
	"slices"
	"strings"
	"testing"
)

// TestQueryCutKeepsWholeWords: a query cut at MaxQueryBytes inside a
// word leaves that word out rather than make a term of its first
// letters, which the query never held ("hippop" of "hippopotamus", a
// lone 東 of 東京); a word too long to be whole in a term anyway keeps
// its prefix, as its own term would be.
func TestQueryCutKeepsWholeWords(t *testing.T) {
	filler := strings.Repeat("memo ", MaxQueryBytes/5)[:MaxQueryBytes-6] + " "
	short := strings.Repeat("memo ", (MaxQueryBytes-2*MaxTermBytes)/5)
	long := strings.Repeat("x", 4*MaxTermBytes)
	for _, tc := range []struct {
		name, query string
		want        []string
	}{
		{"word across the cut", filler + "hippopotamus", []string{"memo"}},
		{"word ending at the cut", filler + "zebra", []string{"memo", "zebra"}},
		{"word ending at the cut, then more", filler + "zebra hippopotamus", []string{"memo", "zebra"}},
		{"cjk across the cut", filler + "猫東京", []string{"memo"}},
		{"accent across the cut", filler + "abcde\u0301", []string{"memo"}},
		{"giant word across the cut", short + long, []string{"memo", long[:MaxTermBytes]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := QueryTerms(tc.query); !slices.Equal(got, tc.want) {
				t.Fatalf("QueryTerms = %q, want %q", got, tc.want)
			}
		})
	}
}
