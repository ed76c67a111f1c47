package bleve

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	blevesearch "github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/memhost/memhost/sdk"
)

// seededDir answers a data dir holding one realm index with a few records.
func seededDir(t *testing.T) (dir, indexPath string) {
	t.Helper()
	dir = t.TempDir()
	p := NewWithLogger(nil)
	if err := p.Configure(ctx, configJSON(dir)); err != nil {
		t.Fatal(err)
	}
	remember(t, p, realm, rec("realm", "seed", "some body"), rec("realm", "seed two", "more body"))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, filepath.Join(dir, realm+indexSuffix)
}

func TestSecondHostRefused(t *testing.T) {
	dir := t.TempDir()
	first := newProvider(t, dir)
	remember(t, first, realm, rec("realm", "mine", "first host's record"))
	start := time.Now()
	second := NewWithLogger(nil)
	err := second.Configure(ctx, configJSON(dir))
	if !errors.Is(err, sdk.ErrConflict) || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("second Configure on the same dir: %v, want a lock conflict", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("refusal took %v; it must not wait on the lock", waited)
	}
	// The refused host did no harm: the first keeps working.
	if got := recallIDs(t, first, sdk.RecallQuery{Query: "first host"}); len(got) != 1 {
		t.Fatalf("first host recall after refusal = %v", got)
	}
	// Once the first host is gone, the directory is free.
	first.Close()
	newProvider(t, dir)
}

func TestIndexLockedOutsideThePlugin(t *testing.T) {
	_, path := seededDir(t)
	// Something other than a memhost plugin holds the index open: bolt's
	// own lock must fail the open within boltTimeout, not block forever.
	holder, err := blevesearch.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	start := time.Now()
	_, err = openRealm(path, realm, slog.New(slog.DiscardHandler))
	if !errors.Is(err, sdk.ErrConflict) || !strings.Contains(err.Error(), path) {
		t.Fatalf("openRealm on a held index: %v, want a lock conflict naming %s", err, path)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("open blocked %v", waited)
	}
}

func TestCorruptIndex(t *testing.T) {
	cases := []struct {
		name    string
		corrupt func(t *testing.T, path string)
	}{
		{"garbage index_meta.json", func(t *testing.T, path string) {
			write(t, filepath.Join(path, "index_meta.json"), []byte("{not json"))
		}},
		{"missing index_meta.json", func(t *testing.T, path string) {
			os.Remove(filepath.Join(path, "index_meta.json"))
		}},
		{"garbage root.bolt", func(t *testing.T, path string) {
			write(t, filepath.Join(path, "store", "root.bolt"), []byte(strings.Repeat("garbage!", 4096)))
		}},
		{"truncated root.bolt", func(t *testing.T, path string) {
			truncate(t, filepath.Join(path, "store", "root.bolt"), 100)
		}},
		{"garbage segment", func(t *testing.T, path string) {
			for _, seg := range segments(t, path) {
				write(t, seg, []byte(strings.Repeat("\xde\xad\xbe\xef", 1024)))
			}
		}},
		{"truncated segment", func(t *testing.T, path string) {
			for _, seg := range segments(t, path) {
				truncate(t, seg, 64)
			}
		}},
		{"missing segment", func(t *testing.T, path string) {
			for _, seg := range segments(t, path) {
				os.Remove(seg)
			}
		}},
		{"empty directory", func(t *testing.T, path string) {
			os.RemoveAll(path)
			os.Mkdir(path, 0o700)
		}},
		{"foreign bleve index", func(t *testing.T, path string) {
			os.RemoveAll(path)
			idx, err := blevesearch.New(path, mapping.NewIndexMapping())
			if err != nil {
				t.Fatal(err)
			}
			idx.Close()
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, path := seededDir(t)
			c.corrupt(t, path)
			p := NewWithLogger(nil)
			defer p.Close()
			err := p.Configure(ctx, configJSON(dir))
			if err == nil {
				t.Fatal("Configure accepted a corrupt index")
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the index %s", err, path)
			}
			t.Logf("%v", err)
			// A refused Configure holds nothing: the dir is not left locked.
			if err := os.RemoveAll(path); err != nil {
				t.Fatal(err)
			}
			newProvider(t, dir)
		})
	}
}

func TestPartialIndexRemovedAtStart(t *testing.T) {
	dir := t.TempDir()
	partial := filepath.Join(dir, realm+partialSuffix)
	write(t, filepath.Join(partial, "index_meta.json"), []byte("{"))
	p := newProvider(t, dir)
	if _, err := os.Stat(partial); !os.IsNotExist(err) {
		t.Fatalf("partial index still there: %v", err)
	}
	remember(t, p, realm, rec("realm", "fresh", "index created cleanly"))
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func segments(t *testing.T, path string) []string {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(path, "store", "*.zap"))
	if len(segs) == 0 {
		t.Fatal("no segment files to corrupt")
	}
	return segs
}
