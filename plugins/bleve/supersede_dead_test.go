package bleve

import (
	"errors"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestSupersedeOfARetiredRecordIsAConflict: from an outside review.
// Supersede of a record no longer active is a conflict (protocol.md),
// except a retry of the supersede that retired it, which answers the
// replacement it stored; as sqlite and postgres answer. bleve took any
// live holder of the replacement's content for that retry, so superseding
// an already superseded record with content another record holds
// answered that record's id as a success.
func TestSupersedeOfARetiredRecordIsAConflict(t *testing.T) {
	p := newProvider(t, "")
	const scope = "identity:alice"
	ids, err := p.Remember(ctx, "default", []sdk.Record{rec(scope, "plan", "first plan"), rec(scope, "other", "other content")})
	if err != nil {
		t.Fatal(err)
	}
	old, other := ids[0], ids[1]
	successor, err := p.Supersede(ctx, "default", old, rec(scope, "plan", "second plan"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		rep     sdk.Record
		want    string // "" for a conflict
		wantErr bool
	}{
		{"a retry of the supersede", rec(scope, "plan", "second plan"), successor, false},
		{"content another record holds", rec(scope, "other", "other content"), "", true},
		{"new content", rec(scope, "plan", "third plan"), "", true},
	} {
		id, err := p.Supersede(ctx, "default", old, c.rep)
		switch {
		case c.wantErr && !errors.Is(err, sdk.ErrConflict):
			t.Errorf("Supersede of the superseded record with %s = %q, %v; want a conflict", c.name, id, err)
		case !c.wantErr && (err != nil || id != c.want):
			t.Errorf("Supersede of the superseded record with %s = %q, %v; want %q", c.name, id, err, c.want)
		}
	}
	got, err := p.Get(ctx, "default", []string{other})
	if err != nil || len(got) != 1 || got[0].Supersedes != "" || got[0].Status != sdk.StatusActive {
		t.Fatalf("the other record = %+v, %v; want it active, superseding nothing", got, err)
	}
}
