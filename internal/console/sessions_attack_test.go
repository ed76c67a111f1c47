package console

import (
	"net/http"
	"testing"
)

// The console keeps a bounded table of sign-ins. Full, it used to drop a
// random one on every new sign-in, so one token signing in again and
// again (a script with one tenant's application token) signed every other
// tenant out. A token now drops its own oldest sign-in once it holds its
// share; others' sign-ins stay, and so does the token's newest.
func TestOneTokensSignInsSignNoOtherTokenOut(t *testing.T) {
	other := Token{Name: "rival", Secret: "rival-secret-0123456789", Realms: []string{"default"}, Application: true}
	c, _ := newConsole(t, appToken, other)
	cookie := func(t *testing.T, secret string) http.Header {
		t.Helper()
		w := signIn(t, c, secret, nil)
		if w.Code != http.StatusSeeOther || len(w.Result().Cookies()) != 1 {
			t.Fatalf("sign-in = %d %v", w.Code, w.Result().Cookies())
		}
		return http.Header{"Cookie": {w.Result().Cookies()[0].String()}}
	}
	rival := cookie(t, other.Secret)
	var last http.Header
	for range 10 * maxSessions {
		last = cookie(t, appToken.Secret)
	}
	for name, h := range map[string]http.Header{"the other token's sign-in": rival, "the flooding token's newest sign-in": last} {
		if w := serve(c, "GET", "/ui/records", nil, h); w.Code != http.StatusOK {
			t.Errorf("%s after the flood: GET /ui/records = %d %s, want 200", name, w.Code, w.Header().Get("Location"))
		}
	}
}
