package sdk

import (
	"testing"
	"time"
)

// TestRecordTimesInRange: every time a record carries is refused outside
// the years 1-9999 (a record stored with an expiry in year 10000 could no
// longer be answered as JSON nor exported), and the zero time (unset)
// passes.
func TestRecordTimesInRange(t *testing.T) {
	late := time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("", -2*3600)) // year 10000 in UTC
	valid := func() Record {
		return Record{Realm: "r", Scope: "realm", Kind: "fact", Title: "t", Body: "b"}
	}
	for _, tc := range []struct {
		field string
		set   func(*Record)
	}{
		{"", func(*Record) {}},
		{"occurred_at", func(r *Record) { r.OccurredAt = late }},
		{"expires_at", func(r *Record) { r.ExpiresAt = late }},
		{"created_at", func(r *Record) { r.CreatedAt = late }},
		{"updated_at", func(r *Record) { r.UpdatedAt = late }},
		{"last_used_at", func(r *Record) { r.LastUsedAt = late }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			r := valid()
			tc.set(&r)
			checkField(t, r.Validate(), tc.field)
		})
	}
}
