package sdk

import (
	"strings"
	"testing"
)

// TestValidateNamesAMissingField: a client that leaves scope or kind out
// is told the field is required, not that "" is malformed or unknown.
func TestValidateNamesAMissingField(t *testing.T) {
	for _, tc := range []struct {
		field string
		r     Record
	}{
		{"scope", Record{Kind: KindFact, Title: "t", Body: "b"}},
		{"kind", Record{Scope: RealmScope, Title: "t", Body: "b"}},
	} {
		err := tc.r.Validate()
		if err == nil {
			t.Fatalf("a record without %s validates", tc.field)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, tc.field+": is required") || strings.Contains(msg, `""`) {
			t.Errorf("a record without %s: %q; want it to say %s is required", tc.field, msg, tc.field)
		}
	}
}
