package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// Fixed environment for the corpus: real secrets never come from the test
// machine, and MEMHOST_TOKEN_UNSET is deliberately absent.
var testEnv = map[string]string{
	"MEMHOST_TOKEN_OPS":   "ops-0123456789abcdef",
	"MEMHOST_TOKEN_CI":    "ci-0123456789abcdef",
	"MEMHOST_TOKEN_EMPTY": "",
	"MEMHOST_TOKEN_SHORT": "tiny-secret",
	"MEMHOST_HOST_KEY":    "host-key-0123456789abcdef0123456789abcdef",
	"MEMHOST_STATE_DSN":   "host=/run/postgresql dbname=memhost",
}

const testExeDir = "/opt/memhost/bin"

func testOptions(t testing.TB) Options {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		ExecutableDir: testExeDir,
		WorkDir:       wd,
		LookupEnv: func(name string) (string, bool) {
			v, ok := testEnv[name]
			return v, ok
		},
	}
}

func corpus(t testing.TB, dir string) []string {
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.hcl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus in testdata/%s: %v", dir, err)
	}
	return files
}

// checkGolden compares got with the golden file, or rewrites it with -update.
func checkGolden(t *testing.T, golden, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run go test -update after checking the change)\n--- got ---\n%s\n--- want ---\n%s", golden, got, want)
	}
}

// TestValidCorpus loads every valid config and compares its effective form
// with the golden file; machine-specific directories are replaced.
func TestValidCorpus(t *testing.T) {
	opts := testOptions(t)
	for _, file := range corpus(t, "valid") {
		t.Run(filepath.Base(file), func(t *testing.T) {
			c, err := opts.Load(file)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			got := strings.ReplaceAll(string(c.HCL()), filepath.Join(opts.WorkDir, "testdata", "valid"), "$CONFIG_DIR")
			if w := c.Warnings(); len(w) > 0 {
				got += "\n# warnings:\n# " + strings.Join(w, "\n# ") + "\n"
			}
			checkGolden(t, strings.TrimSuffix(file, ".hcl")+".golden", got)
			assertRoundTrip(t, opts, c)
		})
	}
}

// TestInvalidCorpus checks every invalid config's complete error text.
func TestInvalidCorpus(t *testing.T) {
	opts := testOptions(t)
	for _, file := range corpus(t, "invalid") {
		t.Run(filepath.Base(file), func(t *testing.T) {
			c, err := opts.Load(file)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", c)
			}
			var cfgErr *Error
			if !errors.As(err, &cfgErr) || !errors.Is(err, sdk.ErrInvalid) {
				t.Fatalf("error %T %v is not a *config.Error wrapping sdk.ErrInvalid", err, err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, file+":") {
					t.Errorf("problem without file:line: %q", line)
				}
			}
			for _, secret := range testEnv {
				if secret != "" && strings.Contains(err.Error(), secret) {
					t.Errorf("error reveals a token secret: %v", err)
				}
			}
			checkGolden(t, strings.TrimSuffix(file, ".hcl")+".err", err.Error()+"\n")
		})
	}
}
