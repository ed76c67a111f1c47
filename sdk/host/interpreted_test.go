package host

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

const (
	zeros = "0000000000000000000000000000000000000000000000000000000000000000"
	ones  = "1111111111111111111111111111111111111111111111111111111111111111"
)

// scriptManifest is a format 2 manifest with the given replacements of
// its parts, as JSON.
func scriptManifest(format, interp, tree, exe string) string {
	return fmt.Sprintf(`{"format":%s,"name":"py","version":"0.1.0","kinds":["provider"],"protocols":[1],
		"executable":%q,"sha256":%q,"interpreter":%s,"tree":%q,"tree_sha256":%q}`, format, exe, zeros, interp, tree, ones)
}

func TestManifestInterpreted(t *testing.T) {
	goodInterp := `{"path":"/usr/bin/python3","sha256":"` + zeros + `","args":["-B","-E","-s"]}`
	good := scriptManifest("2", goodInterp, "py", "py/main.py")
	m, err := ParseManifest([]byte(good))
	if err != nil {
		t.Fatalf("ParseManifest: %v", err)
	}
	if len(m.Warnings) != 0 || m.Interpreter.Path != "/usr/bin/python3" || len(m.Interpreter.Args) != 3 || m.Tree != "py" {
		t.Fatalf("parsed %+v, warnings %q", m, m.Warnings)
	}
	in := m.Interpreted("/plugins")
	if in.Tree != "/plugins/py" || hex.EncodeToString(in.TreeSHA256) != ones {
		t.Fatalf("Interpreted = %+v", in)
	}
	for _, tc := range []struct{ name, data, want string }{
		{"format 1 with an interpreter", scriptManifest("1", goodInterp, "py", "py/main.py"), "interpreter and tree need manifest format 2"},
		{"format 2 without one", goodManifest[:len(goodManifest)-1] + `,"format":2}`, "interpreter is missing"},
		{"a relative interpreter", scriptManifest("2", `{"path":"python3","sha256":"`+zeros+`"}`, "py", "py/main.py"), "must be an absolute, clean path"},
		{"an unclean interpreter", scriptManifest("2", `{"path":"/usr/bin/../bin/python3","sha256":"`+zeros+`"}`, "py", "py/main.py"), "must be an absolute, clean path"},
		{"an interpreter without sha256", scriptManifest("2", `{"path":"/usr/bin/python3"}`, "py", "py/main.py"), "interpreter.sha256 must be 64 hex digits"},
		{"an empty argument", scriptManifest("2", `{"path":"/usr/bin/python3","sha256":"`+zeros+`","args":[""]}`, "py", "py/main.py"), "interpreter.args[0]"},
		{"a tree path", scriptManifest("2", goodInterp, "a/py", "a/py/main.py"), "must be a plain directory name"},
		{"a hidden tree", scriptManifest("2", goodInterp, ".py", ".py/main.py"), "must be a plain directory name"},
		{"a script outside the tree", scriptManifest("2", goodInterp, "py", "main.py"), `"main.py" must be a file inside the tree`},
		{"a script escaping the tree", scriptManifest("2", goodInterp, "py", "py/../x.py"), "must be a file inside the tree"},
		{"a hidden script", scriptManifest("2", goodInterp, "py", "py/.main.py"), "must be a file inside the tree"},
		{"the tree itself", scriptManifest("2", goodInterp, "py", "py/"), "must be a file inside the tree"},
		{"a line break in the tree", scriptManifest("2", goodInterp, "py\n[ERROR] forged", "py\n[ERROR] forged/main.py"), "executable holds a control character"},
		{"a line separator in the script", scriptManifest("2", goodInterp, "py", "py/\u2028main.py"), "executable holds a control character"},
		{"an escape sequence in the interpreter", scriptManifest("2", `{"path":"/usr/bin/\u001b[2Jpython3","sha256":"`+zeros+`"}`, "py", "py/main.py"), "interpreter.path holds a control character"},
		{"an escape sequence in an argument", scriptManifest("2", `{"path":"/usr/bin/python3","sha256":"`+zeros+`","args":["\u001b[2J"]}`, "py", "py/main.py"), "interpreter.args[0] holds a control character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseManifest([]byte(tc.data))
			if !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalid saying %q", err, tc.want)
			}
		})
	}
	// A host that reads format 1 only refuses a script plugin's manifest
	// rather than running the script unchecked: the format is the guard.
	if _, err := ParseManifest([]byte(scriptManifest("3", goodInterp, "py", "py/main.py"))); !errors.Is(err, ErrManifestFormat) {
		t.Fatalf("format 3: err = %v, want ErrManifestFormat", err)
	}
}

// writeTree makes a script tree of files (path -> content) and answers it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestTreeDigest: every change to what an interpreter could read changes
// the digest; where the tree lies does not.
func TestTreeDigest(t *testing.T) {
	files := map[string]string{"main.py": "import lib\n", "lib/__init__.py": "x = 1\n", "lib/util.py": "y = 2\n"}
	base, err := TreeDigest(writeTree(t, files))
	if err != nil {
		t.Fatal(err)
	}
	again, err := TreeDigest(writeTree(t, files))
	if err != nil || !bytes.Equal(base, again) {
		t.Fatalf("the same files elsewhere: %x, %v; want %x", again, err, base)
	}
	for _, tc := range []struct {
		name   string
		change func(dir string) error
	}{
		{"a file edited", func(d string) error { return os.WriteFile(filepath.Join(d, "lib/util.py"), []byte("y = 3\n"), 0o644) }},
		{"a file added", func(d string) error { return os.WriteFile(filepath.Join(d, "lib/extra.py"), nil, 0o644) }},
		{"a bytecode cache added", func(d string) error { return os.Mkdir(filepath.Join(d, "__pycache__"), 0o755) }},
		{"a file renamed", func(d string) error {
			return os.Rename(filepath.Join(d, "lib/util.py"), filepath.Join(d, "lib/utils.py"))
		}},
		{"a file made executable", func(d string) error { return os.Chmod(filepath.Join(d, "main.py"), 0o755) }},
		{"content moved between files", func(d string) error {
			if err := os.WriteFile(filepath.Join(d, "lib/__init__.py"), []byte("x = 1\ny"), 0o644); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(d, "lib/util.py"), []byte(" = 2\n"), 0o644)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeTree(t, files)
			if err := tc.change(dir); err != nil {
				t.Fatal(err)
			}
			got, err := TreeDigest(dir)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(got, base) {
				t.Fatalf("digest unchanged")
			}
		})
	}
	t.Run("a symbolic link", func(t *testing.T) {
		dir := writeTree(t, files)
		if err := os.Symlink("/etc/passwd", filepath.Join(dir, "lib/evil.py")); err != nil {
			t.Fatal(err)
		}
		if _, err := TreeDigest(dir); err == nil || !strings.Contains(err.Error(), "lib/evil.py is a symbolic link") {
			t.Fatalf("err = %v, want the link refused by name", err)
		}
	})
	// The interpreter reads the files again after the check: one any user
	// may write could be swapped in between (from a review).
	for _, path := range []string{"lib/util.py", "lib", "lib sticky"} {
		t.Run(path+" every user may write", func(t *testing.T) {
			dir := writeTree(t, files)
			mode := os.FileMode(0o777)
			if p, ok := strings.CutSuffix(path, " sticky"); ok {
				// Anyone may still add a module beside the others.
				path, mode = p, mode|os.ModeSticky
			}
			if err := os.Chmod(filepath.Join(dir, path), mode); err != nil {
				t.Fatal(err)
			}
			if _, err := TreeDigest(dir); err == nil || !strings.Contains(err.Error(), path+" is writable by every user") {
				t.Fatalf("err = %v, want %s refused by name", err, path)
			}
		})
	}
}

// scriptPlugin makes a script tree whose interpreter is the stub
// executable (it serves whatever its arguments), and answers the launch
// options for it.
func scriptPlugin(t *testing.T) LaunchOptions {
	t.Helper()
	interp, _, isum := stubExecutable(t)
	tree := writeTree(t, map[string]string{"main.py": "# served by the stub\n", "lib/util.py": "x = 1\n"})
	script := filepath.Join(tree, "main.py")
	ssum, err := TreeDigest(tree)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	return LaunchOptions{Name: "py", Path: script, SHA256: sha(data), Dir: t.TempDir(), Verifier: NewVerifier(),
		Interpreted: &Interpreted{Path: interp, SHA256: isum, Args: []string{"-B", "-E"}, Tree: tree, TreeSHA256: ssum}}
}

func sha(data []byte) []byte {
	s := sha256.Sum256(data)
	return s[:]
}

// TestLaunchInterpreted: the host runs the pinned interpreter with its
// arguments and the script, and refuses a tree or an interpreter that
// differs from the manifest, before the start or after it.
func TestLaunchInterpreted(t *testing.T) {
	opts := scriptPlugin(t)
	// What would make an interpreter run code outside the hashed tree
	// stays with the host; the rest of its environment reaches the plugin
	// (from an outside review: NODE_OPTIONS=--require ran a file no
	// manifest names).
	t.Setenv("NODE_OPTIONS", "--require /elsewhere/preload.cjs")
	t.Setenv("PYTHONPATH", "/elsewhere")
	t.Setenv("MEMHOST_TEST_KEEP", "kept")
	conn, err := Launch(t.Context(), opts)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if runtime.GOOS == "linux" {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", conn.Pid()))
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Join([]string{opts.Interpreted.Path, "-B", "-E", opts.Path}, "\x00") + "\x00"
		if string(cmdline) != want {
			t.Errorf("command line %q, want %q", cmdline, want)
		}
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", conn.Pid()))
		if err != nil {
			t.Fatal(err)
		}
		env := strings.Split(string(environ), "\x00")
		if !slices.Contains(env, "MEMHOST_TEST_KEEP=kept") {
			t.Errorf("the host's environment did not reach the plugin: %q", env)
		}
		for _, kv := range env {
			if strings.HasPrefix(kv, "NODE_OPTIONS=") || strings.HasPrefix(kv, "PYTHONPATH=") {
				t.Errorf("the plugin got %s", kv)
			}
		}
	}
	conn.Close()

	refused := func(t *testing.T, opts LaunchOptions, want string) {
		t.Helper()
		conn, err := Launch(t.Context(), opts)
		if err == nil {
			conn.Close()
			t.Fatalf("Launch succeeded, want a refusal saying %q", want)
		}
		if !errors.Is(err, sdk.ErrPermission) || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "plugin py (") {
			t.Fatalf("err = %v, want ErrPermission naming the plugin and saying %q", err, want)
		}
		if strings.Contains(err.Error(), "permission denied") {
			t.Errorf("the refusal says its class twice: %v", err)
		}
	}
	t.Run("a tree file changed", func(t *testing.T) {
		opts := scriptPlugin(t)
		if err := os.WriteFile(filepath.Join(opts.Interpreted.Tree, "lib/util.py"), []byte("x = 2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		refused(t, opts, "script tree "+opts.Interpreted.Tree+" sha256 does not match manifest tree_sha256")
	})
	t.Run("another interpreter", func(t *testing.T) {
		opts := scriptPlugin(t)
		opts.Interpreted.SHA256 = sha([]byte("another interpreter"))
		refused(t, opts, "interpreter "+opts.Interpreted.Path+": refused: sha256 does not match manifest interpreter.sha256")
	})
	t.Run("a script outside its tree", func(t *testing.T) {
		opts := scriptPlugin(t)
		outside := filepath.Join(t.TempDir(), "main.py")
		if err := os.WriteFile(outside, []byte("# served by the stub\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		opts.Path = outside
		refused(t, opts, "is outside its tree")
	})
	t.Run("the tree changed during the start", func(t *testing.T) {
		opts := scriptPlugin(t)
		opts.Verifier.beforeExec = func() {
			_ = os.WriteFile(filepath.Join(opts.Interpreted.Tree, "__pycache__"), nil, 0o644)
		}
		refused(t, opts, "script tree changed while the plugin started")
	})
}

// TestStartTimeoutDefaults: a script gets longer to hand-shake than a
// binary (its interpreter loads grpc first), and a set timeout wins over
// either default.
func TestStartTimeoutDefaults(t *testing.T) {
	script := &Interpreted{Path: "/usr/bin/node"}
	for _, tc := range []struct {
		name string
		opts LaunchOptions
		want time.Duration
	}{
		{"binary", LaunchOptions{}, DefaultStartTimeout},
		{"script", LaunchOptions{Interpreted: script}, DefaultInterpretedStartTimeout},
		{"binary, set", LaunchOptions{StartTimeout: 3 * time.Second}, 3 * time.Second},
		{"script, set", LaunchOptions{Interpreted: script, StartTimeout: 3 * time.Second}, 3 * time.Second},
	} {
		if got := newStarting(tc.opts).timeout; got != tc.want {
			t.Errorf("%s: start timeout %v, want %v", tc.name, got, tc.want)
		}
	}
}
