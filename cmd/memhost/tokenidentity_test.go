package main

import (
	"errors"
	"testing"

	"github.com/memhost/memhost/internal/config"
	"github.com/memhost/memhost/sdk"
)

// TestStdioMCPHoldsTokenIdentity: `memhost mcp` over stdio holds the
// identity it serves to MEMHOST_TOKEN's token when the config declares
// tokens, as /mcp does, and acts under that token's name.
func TestStdioMCPHoldsTokenIdentity(t *testing.T) {
	secrets := map[string]string{"T_ALICE": "alice-secret-0123456789abcdef", "T_RUNTIME": "runtime-secret-0123456789abcdef"}
	opts := config.Options{LookupEnv: func(k string) (string, bool) { v, ok := secrets[k]; return v, ok }}
	withTokens, err := opts.Parse("m.hcl", []byte(`
token "alice" {
  secret_env = "T_ALICE"
  realms     = ["default"]
  identity   = "alice"
}
token "runtime" {
  secret_env = "T_RUNTIME"
  realms     = ["default"]
}`))
	if err != nil {
		t.Fatal(err)
	}
	without, err := opts.Parse("m.hcl", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what   string
		cfg    *config.Config
		token  string
		id     sdk.Identity
		denied bool // a permission refusal; ok false otherwise means any error
		ok     bool
		name   string // the token the tools act under
	}{
		{"no tokens declared", without, "", sdk.Identity{Realm: "default", ID: "bob"}, false, true, ""},
		{"tokens declared, none given", withTokens, "", sdk.Identity{Realm: "default", ID: "alice"}, false, false, ""},
		{"an unknown token", withTokens, "nope-nope-nope-nope-nope", sdk.Identity{Realm: "default", ID: "alice"}, false, false, ""},
		{"alice's token as alice", withTokens, secrets["T_ALICE"], sdk.Identity{Realm: "default", ID: "alice"}, false, true, "alice"},
		{"alice's token as bob", withTokens, secrets["T_ALICE"], sdk.Identity{Realm: "default", ID: "bob"}, true, false, ""},
		{"alice's token in another realm", withTokens, secrets["T_ALICE"], sdk.Identity{Realm: "acme", ID: "alice"}, true, false, ""},
		{"an unbound token as bob", withTokens, secrets["T_RUNTIME"], sdk.Identity{Realm: "default", ID: "bob"}, false, true, "runtime"},
	} {
		t.Setenv(TokenEnv, tc.token)
		name, err := checkTokenIdentity(tc.cfg, tc.id)
		if err == nil && name != tc.name {
			t.Errorf("%s: token %q, want %q", tc.what, name, tc.name)
		}
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v", tc.what, err)
		case !tc.ok && err == nil:
			t.Errorf("%s: accepted", tc.what)
		case tc.denied && !errors.Is(err, sdk.ErrPermission):
			t.Errorf("%s: %v, want a permission refusal", tc.what, err)
		}
	}
}
