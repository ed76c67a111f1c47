package console

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"
)

// memShared is a SharedSessions in memory: what PostgreSQL keeps for
// every host, here for two consoles standing for a host before and after
// a restart.
type memShared struct {
	mu   sync.Mutex
	rows map[string]sharedRow
}

type sharedRow struct {
	token, csrf string
	expires     time.Time
}

func (m *memShared) Put(_ context.Context, digest, token, csrf string, expires time.Time, _, _ int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rows[digest] = sharedRow{token, csrf, expires}
	return nil
}

func (m *memShared) Get(_ context.Context, digest string) (string, string, time.Time, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.rows[digest]
	return r.token, r.csrf, r.expires, ok && time.Now().Before(r.expires), nil
}

func (m *memShared) Delete(_ context.Context, digest string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.rows, digest)
	return nil
}

// A sign-in kept in the shared store outlives the host that made it. An
// operator who rotates a leaked application token (same name, a new
// secret) and restarts the hosts must sign out whoever signed in with the
// old secret, as a restart did when sign-ins lived in memory; the shared
// row used to name the token only, so the old secret's sign-in went on
// acting as the new token for its 8 hours.
func TestSharedSignInEndsWhenItsTokenChanges(t *testing.T) {
	rotated := appToken
	rotated.Secret = "rotated-secret-0123456789"
	agent := appToken
	agent.Application = false
	other := Token{Name: "rival", Secret: "rival-secret-0123456789", Realms: []string{"default"}, Application: true}
	cases := []struct {
		name  string
		after []Token // the tokens of the host after its restart
		want  int
	}{
		{"the same token", []Token{appToken}, http.StatusOK},
		{"the token's secret rotated", []Token{rotated}, http.StatusSeeOther},
		{"the token removed", []Token{other}, http.StatusSeeOther},
		{"the token made an agent token", []Token{agent}, http.StatusSeeOther},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := &memShared{rows: map[string]sharedRow{}}
			open := func(tokens ...Token) *Console {
				c, err := New(Options{API: &fakeAPI{}, Tokens: tokens, Realms: []string{"default", "acme"}, Shared: store})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(c.Close)
				return c
			}
			before := open(appToken)
			w := signIn(t, before, appToken.Secret, nil)
			if w.Code != http.StatusSeeOther || len(w.Result().Cookies()) != 1 {
				t.Fatalf("sign-in = %d %v", w.Code, w.Result().Cookies())
			}
			cookie := http.Header{"Cookie": {w.Result().Cookies()[0].String()}}
			after := open(tc.after...)
			if w := serve(after, "GET", "/ui/records", nil, cookie); w.Code != tc.want {
				t.Errorf("GET /ui/records after the restart = %d %s, want %d", w.Code, w.Header().Get("Location"), tc.want)
			}
		})
	}
}
