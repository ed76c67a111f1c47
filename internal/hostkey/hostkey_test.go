package hostkey

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeyFileIsCreatedOnceAndKept(t *testing.T) {
	dir := t.TempDir()
	first, err := Load(dir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v, want 0600", err, fi.Mode().Perm())
	}
	again, err := Load(dir, "", nil)
	if err != nil || !bytes.Equal(first, again) {
		t.Fatalf("second start read another key (%v)", err)
	}
	other, _ := Load(t.TempDir(), "", nil)
	if bytes.Equal(first, other) {
		t.Fatal("two data directories got the same key")
	}
}

func TestKeyFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	fileKey, _ := Load(dir, "", nil)
	env := map[string]string{
		"SHARED": "  " + string(fileKey) + "\n", // the file's content, pasted
		"SHORT":  "too-short",
	}
	lookup := func(n string) (string, bool) { v, ok := env[n]; return v, ok }
	got, err := Load(t.TempDir(), "SHARED", lookup)
	if err != nil || !bytes.Equal(got, fileKey) {
		t.Fatalf("the pasted key file content = %q, %v; want the file's key", got, err)
	}
	tests := []struct {
		name string
		env  string
		want error
	}{
		{"short", "SHORT", ErrWeak},
		{"unset", "UNSET", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(dir, tt.env, lookup)
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("Load = %v, want an error wrapping %v", err, tt.want)
			}
			if strings.Contains(err.Error(), "too-short") {
				t.Fatalf("the error shows the key: %v", err)
			}
		})
	}
}
