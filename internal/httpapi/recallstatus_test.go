package httpapi

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// statusBlind answers, besides its own recall, the records of extra
// whatever their status, as a provider whose recall forgot its status
// filter (or read a row a write retired meanwhile) might.
type statusBlind struct {
	*coordinatortest.Provider
	extra []sdk.Record
}

func (p statusBlind) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	hits, err := p.Provider.Recall(ctx, q)
	for _, r := range p.extra {
		hits = append(hits, sdk.Hit{Record: r, Score: 1})
	}
	return hits, err
}

// TestRecallAnswersOnlyActiveRecords: from an outside review. POST
// /v1/recall dropped a hit past its expiry but passed on one whose status
// is not active (a pending proposal, quarantined; a superseded record),
// where a turn's injection and memory_recall drop it: a provider that
// answered a pending proposal had it read through /v1/recall before any
// review. Only active records are answered now.
func TestRecallAnswersOnlyActiveRecords(t *testing.T) {
	p := coordinatortest.NewProvider(sdk.CapWrite, sdk.CapFetch)
	p.MustAdd("default", sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "harbour walk", Body: "alice likes the harbour"})
	var extra []sdk.Record
	for _, c := range []struct {
		status sdk.Status
		title  string
	}{
		{sdk.StatusQuarantined, "PROPOSED harbour"},
		{sdk.StatusSuperseded, "SUPERSEDED harbour"},
		{sdk.StatusTombstoned, "TOMBSTONED harbour"},
	} {
		r := sdk.Record{ID: sdk.NewRecordID(time.Now()), Realm: "default", Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact,
			Title: c.title, Body: "b", Status: c.status, Trust: sdk.TrustAgentObserved}
		extra = append(extra, r)
	}
	const app = "app-secret-0123456789"
	srv := tokenServer(t, func(string) (sdk.Provider, error) { return statusBlind{p, extra}, nil },
		[]Token{{Name: "app", Secret: app, Realms: []string{"default"}, Role: RoleApplication}})
	code, body := callAs(t, srv, app, "POST", "/v1/recall", `{"identity":{"id":"alice"},"query":"harbour"}`)
	if code != 200 || !strings.Contains(body, "harbour walk") {
		t.Fatalf("recall = %d %s, want alice's active record", code, body)
	}
	for _, r := range extra {
		if strings.Contains(body, r.Title) {
			t.Errorf("recall answered the %s record %q: %s", r.Status, r.Title, body)
		}
	}
}
