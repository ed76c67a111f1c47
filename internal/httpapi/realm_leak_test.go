package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/memhost/memhost/internal/hybrid"
)

// semanticFake reports semantic recall in two realms.
type semanticFake struct{}

func (semanticFake) Status() []hybrid.Status {
	return []hybrid.Status{{Realm: "default", State: "idle", Embedded: 12}, {Realm: "rival", State: "failing", Embedded: 9000, LastError: "rival's embedder"}}
}

// A token learns nothing of a realm it may not touch, whether or not the
// realm exists (docs/api.md, Auth). GET /v1/plugins used to list the
// semantic state of every realm, naming the other tenants' realms with
// their record counts and errors, to any token. A server without tokens
// (its own host's processes) still sees them all.
func TestPluginsNameOnlyTheTokensRealms(t *testing.T) {
	tokens := []Token{
		{Name: "app", Secret: "app-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication},
		{Name: "bot", Secret: "bot-secret-0123456789", Realms: []string{"default"}, Role: RoleAgent},
		{Name: "both", Secret: "both-secret-0123456789", Realms: []string{"default", "rival"}, Role: RoleApplication},
	}
	withTokens, _ := newTestServer(t, Options{Tokens: tokens, Semantic: semanticFake{}})
	open, _ := newTestServer(t, Options{Semantic: semanticFake{}})
	cases := []struct {
		name, url, token string
		want             []string
	}{
		{"application token", withTokens.URL, "app-secret-0123456789", []string{"default"}},
		{"agent token", withTokens.URL, "bot-secret-0123456789", []string{"default"}},
		{"token of both realms", withTokens.URL, "both-secret-0123456789", []string{"default", "rival"}},
		{"no tokens configured", open.URL, "", []string{"default", "rival"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := get(t, tc.url+"/v1/plugins", tc.token)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			var answer struct {
				Semantic []hybrid.Status `json:"semantic"`
			}
			if err := json.Unmarshal([]byte(body), &answer); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, st := range answer.Semantic {
				got = append(got, st.Realm)
			}
			if len(got) != len(tc.want) || answer.Semantic == nil {
				t.Fatalf("semantic realms %v, want %v: %s", got, tc.want, body)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("semantic realms %v, want %v: %s", got, tc.want, body)
				}
			}
		})
	}
}
