package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/memhost/memhost/internal/config"
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
		if _, err := f.loadForClient(nil); err != nil {
			t.Errorf("a client refuses\n%s: %v", src, err)
		}
	}
}

// TestFlagsWinOverTheFile: a flag replaces the file's value before it is
// checked, so the file's value, invalid or insecure where the flag is not,
// does not refuse the start; a bad flag is still refused, without a
// position in the file it is not in.
func TestFlagsWinOverTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "memhost.hcl")
	src := "listen = \"0.0.0.0:7077\"\nlog_level = \"verbose\"\ndata_dir = \"\"\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	f := configFlag{path: path}
	if _, err := f.load(nil); err == nil {
		t.Fatal("the file alone loaded")
	}
	o := serveOverrides{listen: "127.0.0.1:0", logLevel: "debug", dataDir: filepath.Join(dir, "data")}
	cfg, err := f.load(o.set)
	if err != nil {
		t.Fatalf("the flags' values are refused for the file's: %v", err)
	}
	if cfg.Listen != o.listen || cfg.LogLevel != o.logLevel || cfg.DataDir != o.dataDir {
		t.Errorf("loaded %s, %s, %s; want the flags' values", cfg.Listen, cfg.LogLevel, cfg.DataDir)
	}
	o.logLevel = "loud"
	_, err = f.load(o.set)
	if err == nil || !strings.Contains(err.Error(), `"loud"`) || strings.Contains(err.Error(), "memhost.hcl:2") {
		t.Errorf("a bad flag: %v; want it refused without the file's position", err)
	}
}

// TestDataDirErrorSaysItOnce: a data directory memhost cannot use is named
// once, with the problem once, and without the system call or the probe
// file that met it.
func TestDataDirErrorSaysItOnce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := "/srv/memhost-data"
	cases := map[string]error{
		"not a directory": ensureDataDir(&config.Config{DataDir: filepath.Join(file, "data")}),
		"read-only":       describeDataDirError(dir, &fs.PathError{Op: "open", Path: dir + "/.memhost-probe-1", Err: syscall.EROFS}),
		"permission":      describeDataDirError(dir, &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.EACCES}),
	}
	for name, err := range cases {
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		msg := err.Error()
		want := dir
		if name == "not a directory" {
			want = filepath.Join(file, "data")
		}
		if strings.Count(msg, want) != 1 || strings.Contains(msg, "mkdir") || strings.Contains(msg, "probe") || strings.Count(msg, "read-only") > 1 {
			t.Errorf("%s: %q; want the directory and the problem named once", name, msg)
		}
	}
}
