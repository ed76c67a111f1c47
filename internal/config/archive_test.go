package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestArchiveForRealm: a realm's own block decides, a realm without one
// archives as the default realm does, and a block without archive keys
// has the defaults.
func TestArchiveForRealm(t *testing.T) {
	for _, c := range []struct {
		name, hcl, realm string
		want             RealmArchive
	}{
		{"own block", `realm "acme" {
  provider = "main"
  archive_max_age_days = 30
}`, "acme",
			RealmArchive{Enabled: true, MaxAge: 30 * 24 * time.Hour, MaxRecords: 10000}},
		{"off", `realm "acme" {
  provider = "main"
  archive = false
}`, "acme", RealmArchive{MaxRecords: 10000}},
		{"no keys", `realm "acme" { provider = "main" }`, "acme", DefaultArchive},
		{"no block: the default realm's", `realm "default" {
  provider = "main"
  archive_max_records = 0
}`, "other",
			RealmArchive{Enabled: true}},
		{"no block at all", ``, "other", DefaultArchive},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "memhost.hcl")
			if err := os.WriteFile(path, []byte("provider \"main\" { plugin = \"sqlite\" }\n"+c.hcl+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := testOptions(t).Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.ArchiveForRealm(c.realm); got != c.want {
				t.Errorf("ArchiveForRealm(%s) = %+v, want %+v", c.realm, got, c.want)
			}
		})
	}
}
