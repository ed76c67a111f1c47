package markdown

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

var ctx = context.Background()

// fakeClock is a settable clock: tests move time instead of sleeping.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// syncBuffer collects log output from concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type testProvider struct {
	*Provider
	root  string
	clock *fakeClock
	logs  *syncBuffer
}

// mode says how a test provider learns of hand edits.
type mode struct {
	name  string
	watch bool
}

var modes = []mode{{"watch", true}, {"poll", false}}

// newTestProvider opens a provider on a fresh root with a fake clock and
// no background sweeps, so every refresh happens inside a call.
func newTestProvider(t testing.TB, m mode, prepare ...func(root string)) *testProvider {
	t.Helper()
	root := t.TempDir()
	for _, f := range prepare {
		f(root)
	}
	return openTestProvider(t, root, m)
}

func openTestProvider(t testing.TB, root string, m mode) *testProvider {
	t.Helper()
	tp := &testProvider{Provider: New(), root: root, clock: newClock(), logs: &syncBuffer{}}
	tp.opts.now = tp.clock.Now
	tp.opts.watch = m.watch
	tp.opts.background = false
	tp.logger = slog.New(slog.NewTextHandler(tp.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg, _ := json.Marshal(Config{Root: root})
	if err := tp.Configure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Close() })
	if m.watch && tp.st.watch.Load() == nil {
		t.Skip("no file watcher on this platform")
	}
	return tp
}

func rec(scope sdk.Scope, title, body string, tags ...string) sdk.Record {
	return sdk.Record{Scope: scope, Kind: sdk.KindFact, Title: title, Body: body, Tags: tags}
}

var (
	alice = sdk.IdentityScope("alice")
	bob   = sdk.IdentityScope("bob")
)

func (tp *testProvider) remember(t testing.TB, realm string, rs ...sdk.Record) []string {
	t.Helper()
	ids, err := tp.Remember(ctx, realm, rs)
	if err != nil {
		t.Fatalf("Remember: %v", err)
	}
	if len(ids) != len(rs) {
		t.Fatalf("Remember answered %d ids for %d records", len(ids), len(rs))
	}
	return ids
}

func (tp *testProvider) recall(t testing.TB, q sdk.RecallQuery) []sdk.Hit {
	t.Helper()
	if q.Realm == "" {
		q.Realm = sdk.DefaultRealm
	}
	hits, err := tp.Recall(ctx, q)
	if err != nil {
		t.Fatalf("Recall(%+v): %v", q, err)
	}
	return hits
}

func (tp *testProvider) get(t testing.TB, realm string, ids ...string) []sdk.Record {
	t.Helper()
	rs, err := tp.Get(ctx, realm, ids)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return rs
}

// path is where record id of scope lives.
func (tp *testProvider) path(realm string, scope sdk.Scope, id string) string {
	return filepath.Join(tp.root, filepath.FromSlash(fileKey{realm, scope, id}.rel()))
}

func hitIDs(hits []sdk.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Record.ID
	}
	return out
}

func recordIDs(rs []sdk.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// snapshot maps every file under root to its content.
func snapshot(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.IsDir():
			out[rel+"/"] = ""
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "-> " + target
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// editInPlace rewrites path without replacing the file (as editors that
// save in place do): same inode, no directory change.
func editInPlace(t testing.TB, path string, edit func(string) string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(edit(string(b))); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func countLines(s, substr string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

func tpLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
