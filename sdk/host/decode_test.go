package host

import (
	"errors"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// TestCallerCannotSetStoreFields: a record to write that sets a field the
// store owns is refused before it is sent, naming the field.
func TestCallerCannotSetStoreFields(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		set   func(*sdk.Record)
		field string
	}{
		{func(r *sdk.Record) {}, ""},
		{func(r *sdk.Record) { r.ExpiresAt = now; r.ID = "mine"; r.Trust = sdk.TrustOperator }, ""},
		{func(r *sdk.Record) { r.Status = sdk.StatusActive }, "records[1].status"},
		{func(r *sdk.Record) { r.Supersedes = "x" }, "records[1].supersedes"},
		{func(r *sdk.Record) { r.ContentHash = "abc" }, "records[1].content_hash"},
		{func(r *sdk.Record) { r.UseCount = 3 }, "records[1].use_count"},
		{func(r *sdk.Record) { r.CreatedAt = now }, "records[1].created_at"},
		{func(r *sdk.Record) { r.UpdatedAt = now }, "records[1].updated_at"},
		{func(r *sdk.Record) { r.LastUsedAt = now }, "records[1].last_used_at"},
	} {
		recs := []sdk.Record{{Title: "a"}, {Title: "b"}}
		tc.set(&recs[1])
		in, err := recordsToInput(recs)
		var fe *sdk.FieldError
		switch {
		case tc.field == "" && (err != nil || len(in) != 2 || in[1].Id != recs[1].ID):
			t.Errorf("caller fields %+v: %v", recs[1], err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, sdk.ErrInvalid)):
			t.Errorf("want a refusal of %s, got %v", tc.field, err)
		}
	}
}
