package httpapi

import (
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk/strictjson"
)

func TestNestedDeeper(t *testing.T) {
	for _, tc := range []struct {
		json  string
		limit int
		want  bool
	}{
		{`1`, 0, false},
		{`[]`, 0, true},
		{`[]`, 1, false},
		{`{"a":[1]}`, 2, false},
		{`{"a":[1]}`, 1, true},
		{`{"a":[[]]}`, 2, true},
		{strings.Repeat("[", 64) + strings.Repeat("]", 64), MaxMCPDepth, false},
		{strings.Repeat("[", 65) + strings.Repeat("]", 65), MaxMCPDepth, true},
	} {
		var v any
		if err := strictjson.Decode([]byte(tc.json), &v); err != nil {
			t.Fatal(err)
		}
		if got := nestedDeeper(v, tc.limit); got != tc.want {
			t.Errorf("nestedDeeper(%.20s, %d) = %v, want %v", tc.json, tc.limit, got, tc.want)
		}
	}
}
