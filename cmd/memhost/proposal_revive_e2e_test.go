package main

import (
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// TestPendingProposalRevivesNoExpiredRecord: a pending proposal of the
// content an expired shared record holds, imported or left by an agent
// (proposals are stored through the import path), leaves that record
// expired on every provider: only an active record keeps a content
// recallable, and an agent's proposal must not make anything recallable
// before review. The providers that keep one live copy of a content per
// scope (sqlite, bleve, postgres) do not store such a proposal: the
// import skips it and the agent's write answers 409; markdown stores it
// beside the expired record, pending.
func TestPendingProposalRevivesNoExpiredRecord(t *testing.T) {
	t.Parallel()
	const title, body = "Door code", "The side door code is 4711."
	expired := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	full := func(id string, status sdk.Status, tags []string, expires time.Time) sdk.Record {
		at := time.Date(2019, 6, 1, 0, 0, 0, 0, time.UTC)
		return sdk.Record{ID: id, Realm: "default", Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: title, Body: body,
			Tags: tags, Trust: sdk.TrustAgentObserved, Status: status, CreatedAt: at, UpdatedAt: at, ExpiresAt: expires}
	}
	cases := []struct {
		name    string
		propose func(t *testing.T, m *instance, stores bool)
	}{
		{"imported proposal", func(t *testing.T, m *instance, stores bool) {
			recs := []sdk.Record{full("pending-1", sdk.StatusQuarantined, []string{"memhost:proposal"}, time.Time{})}
			var res struct{ Imported, Skipped int }
			if code := m.do("POST", "/v1/import", map[string]any{"records": recs}, &res); code != 200 {
				t.Fatalf("import of the proposal = %d\n%s", code, m.logs())
			}
			want := 0
			if stores {
				want = 1
			}
			if res.Imported != want || res.Skipped != 1-want {
				t.Errorf("import of the proposal = %+v, want %d imported", res, want)
			}
		}},
		{"agent's proposal", func(t *testing.T, m *instance, stores bool) {
			m.token = agentSecret
			defer func() { m.token = appSecret }()
			rec := map[string]any{"scope": "realm", "kind": "fact", "title": title, "body": body}
			var e apiError
			code := m.do("POST", "/v1/records", map[string]any{"records": []any{rec}}, &e)
			switch {
			case stores && code != 202:
				t.Errorf("the agent's proposal = %d %+v, want 202", code, e)
			case !stores && (code != 409 || e.Error.Code != "conflict" || !strings.Contains(e.Error.Message, "expired")):
				t.Errorf("the agent's proposal = %d %+v, want 409 naming an expired holder", code, e)
			}
		}},
	}
	for _, pc := range providerConfigs {
		for _, tc := range cases {
			t.Run(pc.plugin+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				env := append(envFor(t, pc.env), "MEMHOST_TEST_APP="+appSecret, "MEMHOST_TEST_AGENT="+agentSecret)
				m := startMemhost(t, providerDeployment(pc.plugin, pc.config)+rolesTokens, env...)
				m.token = appSecret
				old := []sdk.Record{full("expired-1", sdk.StatusActive, nil, expired)}
				if code := m.do("POST", "/v1/import", map[string]any{"records": old}, nil); code != 200 {
					t.Fatalf("import of the expired record = %d\n%s", code, m.logs())
				}
				// markdown keeps no one-live-copy rule: the proposal is
				// stored beside the expired record.
				tc.propose(t, m, pc.plugin == "markdown")
				var got sdk.Record
				if code := m.do("GET", "/v1/records/expired-1", nil, &got); code != 200 {
					t.Fatalf("GET the expired record = %d", code)
				}
				if !got.ExpiresAt.Equal(expired) || !got.UpdatedAt.Equal(old[0].UpdatedAt) {
					t.Errorf("the expired record now expires %v, updated %v; want %v, %v: the proposal changed it", got.ExpiresAt, got.UpdatedAt, expired, old[0].UpdatedAt)
				}
				for _, h := range recall(t, m, "carol", "side door code").Hits {
					t.Errorf("recall before any review found %s", h.Record.ID)
				}
			})
		}
	}
}
