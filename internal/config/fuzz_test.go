package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the parser. It must never panic; every
// failure must be a *Error whose every problem has a file position; and
// every accepted config must survive HCL() and a reload unchanged. The
// testdata corpus is the seed, so `go test` runs it as a plain test.
func FuzzParse(f *testing.F) {
	for _, dir := range []string{"valid", "invalid"} {
		for _, file := range corpus(f, dir) {
			src, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(src)
		}
	}
	opts := testOptions(f)
	f.Fuzz(func(t *testing.T, src []byte) {
		c, err := opts.Parse("fuzz.hcl", src)
		if err != nil {
			var cfgErr *Error
			if !errors.As(err, &cfgErr) {
				t.Fatalf("error %T is not a *config.Error: %v", err, err)
			}
			for _, d := range cfgErr.Diagnostics {
				if d.Subject == nil || d.Subject.Filename != "fuzz.hcl" {
					t.Errorf("problem without a position in fuzz.hcl: %s; %s", d.Summary, d.Detail)
				}
			}
			return
		}
		assertRoundTrip(t, opts, c)
	})
}

// assertRoundTrip renders c as HCL, loads that from another directory and
// expects the same configuration (positions aside).
func assertRoundTrip(t testing.TB, opts Options, c *Config) {
	t.Helper()
	out := c.HCL()
	again, err := opts.Parse(filepath.Join(t.TempDir(), "roundtrip.hcl"), out)
	if err != nil {
		t.Fatalf("HCL() output does not load: %v\n%s", err, out)
	}
	if a, b := comparable(c), comparable(again); !reflect.DeepEqual(a, b) {
		t.Fatalf("round trip changed the config\nbefore: %+v\nafter:  %+v\nHCL:\n%s", a, b, out)
	}
}

// comparable strips what legitimately differs between two loads of the
// same settings: where they were written.
func comparable(c *Config) Config {
	out := *c
	out.File, out.pos, out.fileValues = "", nil, nil
	out.Instances = append([]Instance(nil), c.Instances...)
	for i := range out.Instances {
		out.Instances[i].Pos = ""
	}
	out.Realms = append([]Realm(nil), c.Realms...)
	for i := range out.Realms {
		out.Realms[i].Pos = ""
	}
	out.Tokens = append([]Token(nil), c.Tokens...)
	for i := range out.Tokens {
		out.Tokens[i].Pos = ""
	}
	return out
}
