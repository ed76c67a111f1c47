package markdown

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// settle lets a hand edit reach the provider the way its mode promises:
// with a watcher, the very next call sees it; when polling, a call made
// once the polling bound has passed sees it.
func (tp *testProvider) settle(m mode) {
	if !m.watch {
		tp.clock.Advance(tp.opts.poll)
	}
}

func TestHandEdits(t *testing.T) {
	tests := []struct {
		name string
		edit func(t *testing.T, tp *testProvider, id string)
		// after the edit: what "marigold" and "lighthouse" recall, and whether Get finds id
		marigold, lighthouse, getFinds bool
	}{
		{"edit in place, same size", func(t *testing.T, tp *testProvider, id string) {
			editInPlace(t, tp.path("default", alice, id), func(s string) string {
				return strings.Replace(s, "lighthouse keeper", "marigold  keeper ", 1)
			})
		}, true, false, true},
		{"edit saved by rename", func(t *testing.T, tp *testProvider, id string) {
			p := tp.path("default", alice, id)
			b, _ := os.ReadFile(p)
			tmp := filepath.Join(filepath.Dir(p), ".swap")
			writeFile(t, tmp, strings.Replace(string(b), "lighthouse", "marigold", 1))
			if err := os.Rename(tmp, p); err != nil {
				t.Fatal(err)
			}
		}, true, false, true},
		{"tags edited", func(t *testing.T, tp *testProvider, id string) {
			editInPlace(t, tp.path("default", alice, id), func(s string) string {
				return strings.Replace(s, "---\n", "---\ntags: [\"marigold\"]\n", 1)
			})
		}, true, true, true},
		{"status edited to tombstoned", func(t *testing.T, tp *testProvider, id string) {
			editInPlace(t, tp.path("default", alice, id), func(s string) string {
				return strings.Replace(s, `"active"`, `"tombstoned"`, 1)
			})
		}, false, false, true},
		{"file deleted", func(t *testing.T, tp *testProvider, id string) {
			if err := os.Remove(tp.path("default", alice, id)); err != nil {
				t.Fatal(err)
			}
		}, false, false, false},
		{"scope directory deleted", func(t *testing.T, tp *testProvider, id string) {
			if err := os.RemoveAll(filepath.Dir(tp.path("default", alice, id))); err != nil {
				t.Fatal(err)
			}
		}, false, false, false},
		{"realm directory renamed away", func(t *testing.T, tp *testProvider, id string) {
			if err := os.Rename(filepath.Join(tp.root, "default"), filepath.Join(tp.root, ".old")); err != nil {
				t.Fatal(err)
			}
		}, false, false, false},
		{"record file added in a new scope", func(t *testing.T, tp *testProvider, id string) {
			writeFile(t, tp.path("default", sdk.MobScope("gardeners"), "hand-1"), "---\nkind: \"fact\"\ntitle: \"Marigold beds\"\n---\nWater them.\n")
		}, true, true, true},
		{"symlinked realm directory ignored", func(t *testing.T, tp *testProvider, id string) {
			outside := t.TempDir()
			writeFile(t, filepath.Join(outside, "realm", "x.md"), "---\nkind: \"fact\"\ntitle: \"Marigold\"\n---\n")
			if err := os.Symlink(outside, filepath.Join(tp.root, "linked")); err != nil {
				t.Skip(err)
			}
			writeFile(t, filepath.Join(tp.root, "README.md"), "not a realm")
		}, false, true, true},
		{"record file added in a new realm", func(t *testing.T, tp *testProvider, id string) {
			writeFile(t, tp.path("acme", sdk.RealmScope, "hand-2"), "---\nkind: \"fact\"\ntitle: \"Marigold beds\"\n---\n")
		}, false, true, true},
	}
	for _, m := range modes {
		for _, tt := range tests {
			t.Run(m.name+"/"+tt.name, func(t *testing.T) {
				tp := newTestProvider(t, m)
				id := tp.remember(t, "default", rec(alice, "Notes", "lighthouse keeper"))[0]
				tp.recall(t, sdk.RecallQuery{Query: "lighthouse"}) // warm
				tp.clock.Advance(time.Millisecond)
				tt.edit(t, tp, id)
				tp.settle(m)
				found := func(q string) bool { return len(tp.recall(t, sdk.RecallQuery{Query: q})) > 0 }
				if got := found("marigold"); got != tt.marigold {
					t.Errorf("recall marigold found=%v, want %v", got, tt.marigold)
				}
				if got := found("lighthouse"); got != tt.lighthouse {
					t.Errorf("recall lighthouse found=%v, want %v", got, tt.lighthouse)
				}
				if strings.HasPrefix(tt.name, "symlinked") {
					if got := tp.get(t, "linked", "x"); len(got) != 0 {
						t.Fatal("a record was read through a symlinked realm")
					}
					if strings.Contains(tp.logs.String(), "cannot read directory") {
						t.Fatalf("a file at the root was taken for an unreadable realm:\n%s", tp.logs)
					}
				}
				if strings.HasPrefix(tt.name, "record file added") {
					realm, newID := "default", "hand-1"
					if strings.Contains(tt.name, "realm") {
						realm, newID = "acme", "hand-2"
					}
					got := tp.get(t, realm, newID)
					if len(got) != 1 || got[0].Realm != realm || got[0].Status != sdk.StatusActive || got[0].Trust != sdk.TrustAgentObserved || got[0].CreatedAt.IsZero() {
						t.Fatalf("hand-added record = %+v", got)
					}
					if found := len(tp.recall(t, sdk.RecallQuery{Realm: realm, Query: "marigold"})) > 0; !found {
						t.Fatalf("hand-added record not recalled in realm %s", realm)
					}
					return
				}
				got := tp.get(t, "default", id)
				if (len(got) == 1) != tt.getFinds {
					t.Fatalf("Get found %d records, want found=%v", len(got), tt.getFinds)
				}
				if len(got) == 1 && got[0].ContentHash != sdk.ContentHash(got[0].Title, got[0].Body) {
					t.Fatal("content hash not recomputed after a hand edit")
				}
			})
		}
	}
}

// TestEditWithUnchangedStamp edits a freshly read file keeping its size
// and restoring its mtime, as can happen within one coarse timestamp tick:
// the stamp alone cannot tell, the racy check must.
func TestEditWithUnchangedStamp(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			tp := newTestProvider(t, m)
			p := tp.path("default", alice, "racy")
			writeFile(t, p, "---\nkind: \"fact\"\ntitle: \"lighthouse\"\n---\n")
			tp.settle(m)
			if len(tp.recall(t, sdk.RecallQuery{Query: "lighthouse"})) != 1 {
				t.Fatal("hand-written record not picked up")
			}
			fi, _ := os.Stat(p)
			editInPlace(t, p, func(s string) string { return strings.Replace(s, "lighthouse", "marigolds!", 1) })
			if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
			tp.settle(m)
			if len(tp.recall(t, sdk.RecallQuery{Query: "marigolds"})) != 1 {
				t.Fatal("an edit keeping size and mtime was missed")
			}
		})
	}
}

func TestPollingWaitsForNothingWithinBound(t *testing.T) {
	// Without a watcher, calls within the bound answer from the index
	// (no sweep per call), and the first call past it sweeps.
	tp := newTestProvider(t, modes[1])
	tp.remember(t, "default", rec(alice, "lighthouse", "x"))
	before := tp.st.lastSweep.Load()
	tp.clock.Advance(tp.opts.poll / 2)
	tp.recall(t, sdk.RecallQuery{Query: "lighthouse"})
	if tp.st.lastSweep.Load() != before {
		t.Fatal("a call within the polling bound swept")
	}
	tp.clock.Advance(tp.opts.poll / 2)
	tp.recall(t, sdk.RecallQuery{Query: "lighthouse"})
	if tp.st.lastSweep.Load() == before {
		t.Fatal("a call past the polling bound did not sweep")
	}
}

func TestBackgroundSweepPicksUpEdits(t *testing.T) {
	// Real clock and background loop, polling every 20 ms: an in-place
	// edit shows up without any call forcing a sweep. The deadline only
	// guards against a hang; it is not a speed check.
	root := t.TempDir()
	p := New()
	p.opts.watch = false
	p.opts.poll = 20 * time.Millisecond
	p.logger = slog.New(slog.DiscardHandler)
	if err := p.Configure(ctx, []byte(fmt.Sprintf(`{"root": %q}`, root))); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ids, err := p.Remember(ctx, "default", []sdk.Record{rec(alice, "Notes", "lighthouse keeper")})
	if err != nil {
		t.Fatal(err)
	}
	editInPlace(t, filepath.Join(root, filepath.FromSlash(fileKey{"default", alice, ids[0]}.rel())), func(s string) string {
		return strings.Replace(s, "lighthouse", "marigolds!", 1)
	})
	for deadline := time.Now().Add(30 * time.Second); ; {
		hits, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "marigolds"})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the background sweep never picked up the edit")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestInvalidFilesSkipped(t *testing.T) {
	valid := "---\nkind: \"fact\"\ntitle: \"lighthouse good\"\n---\nbody\n"
	bad := map[string]string{
		"garbage":        "lighthouse, but no front matter at all\n",
		"yaml":           "---\nkind: fact\ntitle: lighthouse\n---\n",
		"id mismatch":    "---\nid: \"other\"\nkind: \"fact\"\ntitle: \"lighthouse\"\n---\n",
		"scope mismatch": "---\nscope: \"identity:bob\"\nkind: \"fact\"\ntitle: \"lighthouse\"\n---\n",
		"unknown kind":   "---\nkind: \"rumour\"\ntitle: \"lighthouse\"\n---\n",
		"invalid utf8":   "---\nkind: \"fact\"\ntitle: \"lighthouse\"\n---\n\xff\xfe\n",
		"oversized":      "---\nkind: \"fact\"\ntitle: \"lighthouse\"\n---\n" + strings.Repeat("x", maxFileBytes),
		"empty":          "",
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			outside := filepath.Join(t.TempDir(), "outside.md")
			writeFile(t, outside, valid)
			tp := newTestProvider(t, m, func(root string) {
				dir := filepath.Join(root, "default", "identity", "alice")
				writeFile(t, filepath.Join(dir, "good.md"), valid)
				i := 0
				for _, content := range bad {
					writeFile(t, filepath.Join(dir, fmt.Sprintf("bad%d.md", i)), content)
					i++
				}
				twin := "---\nkind: \"fact\"\ntitle: \"twin\"\n---\n"
				writeFile(t, filepath.Join(dir, "twin.md"), twin)
				writeFile(t, filepath.Join(root, "default", "identity", "bob", "twin.md"), twin) // duplicate id
				writeFile(t, filepath.Join(dir, "not an id!.md"), valid)                         // not a record name: ignored
				writeFile(t, filepath.Join(dir, "notes.txt"), valid)                             // not a record: ignored
				writeFile(t, filepath.Join(root, "default", "teams", "x", "r.md"), valid)        // not a scope class: ignored
				os.Symlink(outside, filepath.Join(dir, "link.md"))                               // never followed
			})
			hits := tp.recall(t, sdk.RecallQuery{Query: "lighthouse"})
			if len(hits) != 1 || hits[0].Record.ID != "good" {
				t.Fatalf("recall = %v, want only the one good record", hitIDs(hits))
			}
			want := len(bad) + 1 // every bad file and the duplicate id, once each
			if n := countLines(tp.logs.String(), "skipping record file"); n != want {
				t.Fatalf("%d warnings, want %d:\n%s", n, want, tp.logs.String())
			}
			// More calls and sweeps do not warn again about unchanged files.
			for range 3 {
				tp.clock.Advance(tp.opts.poll)
				tp.st.sweepMu.Lock()
				tp.st.sweep()
				tp.st.sweepMu.Unlock()
				tp.recall(t, sdk.RecallQuery{Query: "lighthouse"})
			}
			if n := countLines(tp.logs.String(), "skipping record file"); n != want {
				t.Fatalf("warnings repeated: %d, want %d", n, want)
			}
			// Breaking a good record drops it; fixing it brings it back.
			p := filepath.Join(tp.root, "default", "identity", "alice", "good.md")
			writeFile(t, p, "---\nbroken\n---\n")
			tp.settle(m)
			if n := len(tp.recall(t, sdk.RecallQuery{Query: "lighthouse"})); n != 0 {
				t.Fatalf("a broken record is still recalled (%d hits)", n)
			}
			writeFile(t, p, valid)
			tp.settle(m)
			if n := len(tp.recall(t, sdk.RecallQuery{Query: "lighthouse"})); n != 1 {
				t.Fatalf("a fixed record is not recalled (%d hits)", n)
			}
		})
	}
}

// TestConcurrentUse runs writers, readers, forgetters, a hand editor and
// sweeps at once (run with -race), then checks the index against the
// files by reopening the root.
func TestConcurrentUse(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			root := t.TempDir()
			p := New()
			p.opts.watch = m.watch
			p.opts.poll = 5 * time.Millisecond
			p.logger = slog.New(slog.DiscardHandler)
			if err := p.Configure(ctx, []byte(fmt.Sprintf(`{"root": %q}`, root))); err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			var (
				wg        sync.WaitGroup
				mu        sync.Mutex
				kept      = map[string]bool{}
				forgotten = map[string]bool{}
				errs      = make(chan error, 100)
			)
			for w := range 4 {
				wg.Go(func() {
					for i := range 15 {
						batch := []sdk.Record{
							rec(sdk.IdentityScope(fmt.Sprint("w", w)), fmt.Sprintf("note %d %d", w, i), "concurrent lighthouse"),
							rec(sdk.RealmScope, fmt.Sprintf("shared %d", i), "concurrent lighthouse"), // dedups across writers
						}
						ids, err := p.Remember(ctx, "default", batch)
						if err != nil {
							errs <- err
							return
						}
						mu.Lock()
						kept[ids[0]] = true
						mu.Unlock()
						if i%3 == 0 {
							if _, err := p.Forget(ctx, "default", ids[:1]); err != nil {
								errs <- err
								return
							}
							mu.Lock()
							delete(kept, ids[0])
							forgotten[ids[0]] = true
							mu.Unlock()
						}
					}
				})
			}
			for range 3 {
				wg.Go(func() {
					for range 40 {
						hits, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "concurrent lighthouse", Limit: 50})
						if err != nil {
							errs <- err
							return
						}
						for _, h := range hits {
							if h.Record.Status != sdk.StatusActive || !(h.Score > 0) {
								errs <- fmt.Errorf("bad hit %+v", h)
							}
						}
						if _, err := p.Get(ctx, "default", hitIDs(hits)); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Go(func() { // full sweeps racing the writes, in either mode
				for range 10 {
					p.st.sweepMu.Lock()
					p.st.sweep()
					p.st.sweepMu.Unlock()
				}
			})
			wg.Go(func() { // a person editing by hand meanwhile
				dir := filepath.Join(root, "default", "mob", "editors")
				for i := range 20 {
					path := filepath.Join(dir, fmt.Sprintf("hand%d.md", i%4))
					if i%5 == 4 {
						os.Remove(path)
						continue
					}
					os.MkdirAll(dir, 0o700)
					os.WriteFile(path, []byte(fmt.Sprintf("---\nkind: \"fact\"\ntitle: \"hand %d\"\n---\nconcurrent lighthouse\n", i)), 0o600)
				}
			})
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			// Everything the writers kept is there; nothing forgotten is.
			keptIDs := slices.Collect(func(yield func(string) bool) {
				for id := range kept {
					if !yield(id) {
						return
					}
				}
			})
			if got, err := p.Get(ctx, "default", keptIDs); err != nil || len(got) != len(keptIDs) {
				t.Fatalf("Get of %d kept records answered %d (%v)", len(keptIDs), len(got), err)
			}
			for id := range forgotten {
				if got, _ := p.Get(ctx, "default", []string{id}); len(got) != 0 {
					t.Fatalf("forgotten %s still there", id)
				}
			}
			// The index agrees with a fresh load of the same files.
			q := sdk.RecallQuery{Realm: "default", Query: "concurrent lighthouse", Limit: 1000}
			p.st.sweepMu.Lock()
			p.st.sweep()
			p.st.sweepMu.Unlock()
			live, err := p.Recall(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			p.Close() // the root takes one instance at a time
			fresh := New()
			fresh.opts.background, fresh.logger = false, slog.New(slog.DiscardHandler)
			if err := fresh.Configure(ctx, []byte(fmt.Sprintf(`{"root": %q}`, root))); err != nil {
				t.Fatal(err)
			}
			defer fresh.Close()
			reloaded, err := fresh.Recall(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if !sameSet(hitIDs(live), hitIDs(reloaded)) {
				t.Fatalf("live index and files disagree:\nlive     %v\nreloaded %v", hitIDs(live), hitIDs(reloaded))
			}
		})
	}
}

// TestHandEditOfTheTimeMovesTheWindow: a hand edit that changes only when
// the remembered thing happened (occurred, or created when there is none)
// left the engine's document with the old time, so since/until windows
// answered by it until a reindex.
func TestHandEditOfTheTimeMovesTheWindow(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			tp := newTestProvider(t, m)
			r := rec(alice, "Notes", "lighthouse keeper")
			r.OccurredAt = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
			id := tp.remember(t, "default", r)[0]
			in2022 := sdk.RecallQuery{Query: "lighthouse", Since: time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)}
			if n := len(tp.recall(t, in2022)); n != 0 {
				t.Fatalf("a record of 2020 recalled in 2022's window (%d hits)", n)
			}
			tp.clock.Advance(time.Millisecond)
			editInPlace(t, tp.path("default", alice, id), func(s string) string {
				return strings.Replace(s, "2020-01-01T00:00:00", "2022-06-01T00:00:00", 1)
			})
			tp.settle(m)
			if got := tp.get(t, "default", id); len(got) != 1 || got[0].OccurredAt.Year() != 2022 {
				t.Fatalf("after the edit Get = %+v, want occurred in 2022", got)
			}
			if n := len(tp.recall(t, in2022)); n != 1 {
				t.Fatalf("after moving its time to 2022, the record is not in 2022's window (%d hits)", n)
			}
		})
	}
}

// TestRewritesKeepAFreshHandEdit: a supersede marks the old record's file
// and a write of an expired record's content revives its file, both
// rewritten from the index. Without a file watcher the index sees a hand
// edit only at its next sweep, so an edit saved just before such a write
// was overwritten with the indexed text and lost. A rewrite now checks
// the file is still the one the index read, and otherwise reads it again
// first: the edit stays.
func TestRewritesKeepAFreshHandEdit(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name+"/supersede", func(t *testing.T) {
			tp := newTestProvider(t, m)
			ids := tp.remember(t, "default", rec(alice, "lighthouse", "original body"))
			p := tp.path("default", alice, ids[0])
			editInPlace(t, p, func(s string) string {
				return strings.Replace(s, "original body", "original body\nHAND-EDIT: keep this line", 1)
			})
			if _, err := tp.Supersede(ctx, "default", ids[0], rec(alice, "lighthouse v2", "new body")); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(p)
			if err != nil || !strings.Contains(string(b), "HAND-EDIT") || !strings.Contains(string(b), "status: \"superseded\"") {
				t.Fatalf("the superseded record's file lost the hand edit made before the supersede (%v):\n%s", err, b)
			}
		})
		t.Run(m.name+"/revival", func(t *testing.T) {
			tp := newTestProvider(t, m)
			r := rec(alice, "tide table", "high water at noon")
			r.Description = "from the harbour office"
			r.ExpiresAt = tp.clock.Now().Add(time.Hour)
			ids := tp.remember(t, "default", r)
			tp.clock.Advance(2 * time.Hour)
			tp.recall(t, sdk.RecallQuery{Query: "tide"}) // the sweep the clock's move is due
			p := tp.path("default", alice, ids[0])
			editInPlace(t, p, func(s string) string {
				return strings.Replace(s, "from the harbour office", "HAND-EDIT: from the pilot", 1)
			})
			r.ExpiresAt = tp.clock.Now().Add(time.Hour)
			if again := tp.remember(t, "default", r); again[0] != ids[0] {
				t.Fatalf("the same content written again answered %s, want the expired holder %s", again[0], ids[0])
			}
			b, err := os.ReadFile(p)
			if err != nil || !strings.Contains(string(b), "HAND-EDIT") {
				t.Fatalf("the revived record's file lost the hand edit made before the write (%v):\n%s", err, b)
			}
		})
	}
}

// TestUnreadableFileComesBack: from an outside review. A record file that
// could not be read (permission denied) was cached as a bad file by its
// stamp; restoring access (chmod) keeps the stamp, so the record stayed
// out of recall and reads until its content changed or the plugin
// restarted.
func TestUnreadableFileComesBack(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			tp := newTestProvider(t, m)
			id := tp.remember(t, sdk.DefaultRealm, rec(alice, "lighthouse", "keeper"))[0]
			p := tp.path(sdk.DefaultRealm, alice, id)
			open := openRecordFile
			openRecordFile = func(path string) (*os.File, error) {
				if path == p {
					return nil, &os.PathError{Op: "open", Path: path, Err: os.ErrPermission}
				}
				return open(path)
			}
			// A new mtime, as an edit under the denied access would give.
			later := time.Now().Add(-time.Hour)
			if err := os.Chtimes(p, later, later); err != nil {
				openRecordFile = open
				t.Fatal(err)
			}
			tp.settle(m)
			hits := tp.recall(t, sdk.RecallQuery{Query: "lighthouse"})
			openRecordFile = open
			if len(hits) != 0 {
				t.Fatalf("an unreadable file is recalled: %v", hitIDs(hits))
			}
			// Access restored; nothing else about the file changes. A
			// sweep, as the watcher's safety sweep or a poll runs, finds it.
			tp.clock.Advance(tp.opts.safety)
			tp.st.sweepMu.Lock()
			tp.st.sweep()
			tp.st.sweepMu.Unlock()
			if got := hitIDs(tp.recall(t, sdk.RecallQuery{Query: "lighthouse"})); !slices.Equal(got, []string{id}) {
				t.Fatalf("recall once the file is readable again = %v, want %s", got, id)
			}
			if n := countLines(tp.logs.String(), "cannot be read"); n != 1 {
				t.Fatalf("%d warnings of an unreadable file, want 1:\n%s", n, tp.logs.String())
			}
		})
	}
}
