package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestClientLoadsWhatServeLoads: a client command reads the deployment's
// config without its secrets, so the placeholders it reads instead must
// pass every check the real values pass, a short variable name included.
func TestClientLoadsWhatServeLoads(t *testing.T) {
	for _, src := range []string{
		"host_key_env = \"HK\"\n",
		"host_key_env = \"MEMHOST_HOST_KEY\"\n",
		"token \"a\" {\n  secret_env = \"A\"\n  realms = [\"default\"]\n}\ntoken \"b\" {\n  secret_env = \"B\"\n  realms = [\"default\"]\n}\n",
	} {
		path := filepath.Join(t.TempDir(), "memhost.hcl")
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		f := configFlag{path: path}
		if _, err := f.loadForClient(); err != nil {
			t.Errorf("a client refuses\n%s: %v", src, err)
		}
	}
}
