package config

import (
	"strings"
	"testing"
)

// TestOneMistakeOneProblem: from an outside review. One mistake in a
// file is reported once, at its line: a provider block pasted twice was
// also refused as an ambiguous default realm ("Several providers are
// declared ("p", "p")"), and a token block pasted twice as two tokens
// sharing a secret ("Tokens "t" and "t" have the same secret").
func TestOneMistakeOneProblem(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"provider pasted twice", "provider \"p\" { plugin = \"sqlite\" }\nprovider \"p\" { plugin = \"sqlite\" }\n", `memhost/memhost.hcl:2,10-13: Duplicate instance name; provider "p": the name is already used by provider "p"`},
		{"token pasted twice", "token \"t\" {\n  secret_env = \"MEMHOST_TOKEN_OPS\"\n  realms = [\"default\"]\n}\ntoken \"t\" {\n  secret_env = \"MEMHOST_TOKEN_OPS\"\n  realms = [\"default\"]\n}\n", `memhost/memhost.hcl:5,7-10: Duplicate token; Token "t" is already declared at memhost/memhost.hcl:1.`},
		{"provider without plugin", "provider \"p\" {}\n", "Missing required argument"},
		{"realm without provider", "realm \"a\" {}\n", `The argument "provider" is required`},
		{"realm provider a number", "realm \"a\" { provider = 5 }\n", "provider must be a string, not a number"},
		{"default realm unsafe", "default_realm = \"a b\"\n", `"a b" may hold only letters`},
		{"token realms a string", "token \"t\" {\n  secret_env = \"MEMHOST_TOKEN_OPS\"\n  realms = \"default\"\n}\n", "realms must be a list of strings"},
		{"instance plugin a number", "provider \"p\" { plugin = 1 }\n", "plugin must be a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.src)
			if err == nil {
				t.Fatal("accepted")
			}
			if lines := strings.Split(err.Error(), "\n"); len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Errorf("err:\n%v\nwant one problem saying %q", err, tc.want)
			}
		})
	}
}
