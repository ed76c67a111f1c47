package compaction

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

var archiveNow = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// archived builds a Service archiving on p with policy pol.
func archived(p *coordinatortest.Provider, pol ArchivePolicy, opts Options) *Service {
	p.SetNow(func() time.Time { return archiveNow })
	opts.Archive = &EpisodeArchive{
		Provider: func(string) (sdk.Provider, error) { return p, nil },
		Policy:   func(string) ArchivePolicy { return pol },
		Now:      func() time.Time { return archiveNow },
	}
	if opts.Compactor == nil {
		opts.Compactor = &fakeCompactor{}
	}
	return New(opts)
}

// episodes answers the realm's episode records by position.
func episodes(t *testing.T, p *coordinatortest.Provider) map[int64]sdk.Record {
	t.Helper()
	page, err := p.Export(context.Background(), "default", "", sdk.MaxExportPage)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]sdk.Record{}
	for _, r := range page.Records {
		if r.Kind != sdk.KindEpisode {
			continue
		}
		if _, dup := out[r.Thread.Seq]; dup {
			t.Errorf("position %d archived twice", r.Thread.Seq)
		}
		out[r.Thread.Seq] = r
	}
	return out
}

func TestArchiveKeepsEveryAbsorbedMessage(t *testing.T) {
	p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	s := archived(p, ArchivePolicy{Enabled: true}, Options{})
	ctx := context.Background()
	evicted := []sdk.Message{{Role: "user", Content: "my locker code is 4711"}, {Role: "assistant", Content: "noted"}, {Role: "tool", Content: "ok"}}
	if _, err := s.Compact(ctx, Request{Identity: alice, Conversation: "c1", Evicted: evicted[:2]}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact(ctx, Request{Identity: alice, Conversation: "c1", Evicted: evicted}); err != nil {
		t.Fatal(err)
	}
	eps := episodes(t, p)
	if len(eps) != 3 {
		t.Fatalf("%d episodes, want 3: %v", len(eps), eps)
	}
	for i, m := range evicted {
		r := eps[int64(i)]
		switch {
		case r.Body != m.Content, r.Scope != "identity:alice", r.Thread.ID != "c1", r.ID != EpisodeID("default", "alice", "c1", i):
			t.Errorf("position %d: %+v", i, r)
		case !strings.HasPrefix(r.Title, m.Role+", message "+fmt.Sprint(i+1)+" of conversation c1"):
			t.Errorf("position %d: title %q", i, r.Title)
		case !strings.Contains(r.Description, archiveNow.Format(time.RFC3339)) || !r.ExpiresAt.IsZero():
			t.Errorf("position %d: description %q, expiry %v", i, r.Description, r.ExpiresAt)
		}
		// The speaker's tag, which recall ranks by; a tool has none.
		if want := map[string][]string{"user": {"memhost:user"}, "assistant": {"memhost:assistant"}}[m.Role]; !slices.Equal(r.Tags, want) {
			t.Errorf("position %d (%s): tags %q, want %q", i, m.Role, r.Tags, want)
		}
	}
	hits, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "locker code"})
	if err != nil || len(hits) == 0 || hits[0].Record.Body != evicted[0].Content {
		t.Errorf("the archived message is not recalled: %v %v", hits, err)
	}
}

// TestArchiveFailureCommitsNothing: a provider that refuses the archive
// write fails the compaction and keeps the watermark; the retry archives
// and commits, and a slice archived twice is stored once.
func TestArchiveFailureCommitsNothing(t *testing.T) {
	p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	f := &fakeCompactor{}
	s := archived(p, ArchivePolicy{Enabled: true}, Options{Compactor: f})
	ctx := context.Background()
	refused := 0
	p.SetHook(coordinatortest.MethodRemember, func(context.Context, any) error {
		refused++
		if refused == 1 {
			return fmt.Errorf("disk gone: %w", sdk.ErrUnavailable)
		}
		return nil
	})
	r := Request{Identity: alice, Conversation: "c1", Evicted: msgs("a", "b")}
	if _, err := s.Compact(ctx, r); !errors.Is(err, ErrArchive) || !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("refused archive: %v, want the archive error keeping the provider's", err)
	}
	res, err := s.Compact(ctx, r)
	if err != nil || res.Compacted != 2 || f.callCount() != 2 {
		t.Fatalf("retry: %+v %v, %d compactor calls; want the slice compacted again", res, err, f.callCount())
	}
	if eps := episodes(t, p); len(eps) != 2 {
		t.Errorf("%d episodes, want 2", len(eps))
	}
	// The archive written by a compaction that never committed (a host
	// killed between the two): the retry stores it once.
	st, _, _ := s.opts.Store.Load(ctx, Key{Realm: "default", Identity: "alice", Conversation: "c1"})
	if err := s.opts.Archive.Archive(ctx, alice, "c1", 2, 3, []Episode{{Seq: 2, Message: sdk.Message{Role: "user", Content: "c"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact(ctx, Request{Identity: alice, Conversation: "c1", Evicted: msgs("a", "b", "c")}); err != nil {
		t.Fatal(err)
	}
	if eps := episodes(t, p); len(eps) != 3 || st.Watermark != 2 {
		t.Errorf("%d episodes after the uncommitted archive's retry (watermark was %d), want 3", len(eps), st.Watermark)
	}
}

func TestArchiveRetention(t *testing.T) {
	p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	s := archived(p, ArchivePolicy{Enabled: true, MaxRecords: 3, MaxAge: 48 * time.Hour}, Options{})
	ctx := context.Background()
	var all []string
	for i := range 5 {
		all = append(all, fmt.Sprintf("m%d", i), fmt.Sprintf("n%d", i))
		if _, err := s.Compact(ctx, Request{Identity: alice, Conversation: "c1", Evicted: msgs(all...)}); err != nil {
			t.Fatal(err)
		}
	}
	eps := episodes(t, p)
	var seqs []int64
	for seq, r := range eps {
		seqs = append(seqs, seq)
		if !r.ExpiresAt.Equal(archiveNow.Add(48 * time.Hour)) {
			t.Errorf("position %d expires at %v", seq, r.ExpiresAt)
		}
	}
	slices.Sort(seqs)
	if !slices.Equal(seqs, []int64{7, 8, 9}) {
		t.Errorf("kept positions %v, want the newest 3", seqs)
	}
}

// TestArchiveRetentionPastInjectedSlices: a slice of injected memory
// alone archives nothing but still pushes older episodes out.
func TestArchiveRetentionPastInjectedSlices(t *testing.T) {
	p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	s := archived(p, ArchivePolicy{Enabled: true, MaxRecords: 2}, Options{Echoes: stripMarker{}})
	ctx := context.Background()
	all := []string{"a", "b"}
	for _, more := range [][]string{nil, {"<<injected x>>", "<<injected y>>"}, {"c"}} {
		all = append(all, more...)
		if _, err := s.Compact(ctx, req(all...)); err != nil {
			t.Fatal(err)
		}
	}
	eps := episodes(t, p)
	if _, ok := eps[4]; len(eps) != 1 || !ok {
		t.Errorf("kept %v, want position 4 alone (2 and 3 were injected memory)", eps)
	}
}

func TestArchiveOffAndUnableProviders(t *testing.T) {
	ctx := context.Background()
	p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	if _, err := archived(p, ArchivePolicy{}, Options{}).Compact(ctx, req("a")); err != nil {
		t.Fatal(err)
	}
	if eps := episodes(t, p); len(eps) != 0 {
		t.Errorf("archive off wrote %d episodes", len(eps))
	}
	// A provider that cannot forget is not archived to: a DELETE could
	// not remove what it holds.
	p = coordinatortest.NewProvider(sdk.CapWrite, sdk.CapArchive)
	if _, err := archived(p, ArchivePolicy{Enabled: true}, Options{}).Compact(ctx, req("a")); err != nil {
		t.Fatal(err)
	}
	if eps := episodes(t, p); len(eps) != 0 {
		t.Errorf("a provider without forget got %d episodes", len(eps))
	}
}

// TestForgetRemovesTheArchive: DELETE removes the absorbed episodes and
// those an uncommitted compaction left past the watermark; a stale record
// under an episode id (left by an earlier life of the conversation id) is
// replaced rather than refusing the new one.
func TestForgetRemovesTheArchive(t *testing.T) {
	p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	s := archived(p, ArchivePolicy{Enabled: true}, Options{})
	ctx := context.Background()
	if _, err := s.Compact(ctx, req("a", "b")); err != nil {
		t.Fatal(err)
	}
	if err := s.opts.Archive.Archive(ctx, alice, "c1", 2, 3, []Episode{{Seq: 2, Message: sdk.Message{Role: "user", Content: "uncommitted"}}}); err != nil {
		t.Fatal(err)
	}
	p.MustAdd("default", sdk.Record{Scope: "identity:alice", Kind: sdk.KindFact, Title: "kept", Body: "not an episode"})
	if err := s.Forget(ctx, "default", "c1", Access{Application: true}); err != nil {
		t.Fatal(err)
	}
	if eps := episodes(t, p); len(eps) != 0 {
		t.Errorf("%d episodes left after DELETE", len(eps))
	}
	if page, _ := p.Export(ctx, "default", "", 10); len(page.Records) != 1 {
		t.Errorf("DELETE removed other records: %v", page.Records)
	}
	// A stale episode under position 0's id, with other content.
	p.MustAdd("default", sdk.Record{ID: EpisodeID("default", "alice", "c1", 0), Scope: "identity:alice", Kind: sdk.KindEpisode, Title: "old", Body: "old life"})
	if _, err := s.Compact(ctx, req("new life")); err != nil {
		t.Fatal(err)
	}
	if eps := episodes(t, p); len(eps) != 1 || eps[0].Body != "new life" {
		t.Errorf("episodes after a restart of the conversation id: %v", eps)
	}
}

// stripMarker is an EchoStripper that removes "<<injected ...>>" spans.
type stripMarker struct{}

func (stripMarker) StripInjected(_ sdk.Identity, _, s string) string {
	for {
		a := strings.Index(s, "<<injected")
		if a < 0 {
			return s
		}
		b := strings.Index(s[a:], ">>")
		s = s[:a] + s[a+b+2:]
	}
}

// TestInjectedMemoryIsNotAbsorbed: injected memory in an evicted message
// reaches neither the compactor nor the archive (DESIGN 5.1); a message
// that was nothing else is left out, the rest of a message is kept, and
// the watermark covers the whole slice.
func TestInjectedMemoryIsNotAbsorbed(t *testing.T) {
	p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	f := &fakeCompactor{}
	s := archived(p, ArchivePolicy{Enabled: true}, Options{Compactor: f, Echoes: stripMarker{}})
	ctx := context.Background()
	r := req("<<injected locker code 4711>>", "<<injected locker>>\nhello world")
	res, err := s.Compact(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if res.Absorbed != 2 || res.Artifact.Content != "user:hello world" {
		t.Errorf("answer %+v, want both absorbed and only the user's words summarised", res)
	}
	eps := episodes(t, p)
	if len(eps) != 1 || eps[1].Body != "hello world" {
		t.Errorf("archived %v, want position 1 without its injected memory", eps)
	}
	// A slice of injected memory alone moves the watermark, summarises and
	// archives nothing.
	res, err = s.Compact(ctx, req("<<injected locker code 4711>>", "<<injected locker>>\nhello world", "<<injected again>>"))
	if err != nil || res.Absorbed != 3 || f.callCount() != 1 {
		t.Errorf("injected-only slice: %+v %v, %d compactor calls", res, err, f.callCount())
	}
	if eps := episodes(t, p); len(eps) != 1 {
		t.Errorf("%d episodes after an injected-only slice, want 1", len(eps))
	}
	// Nothing but injected memory from the start: no summary yet, no call.
	res, err = s.Compact(ctx, Request{Identity: alice, Conversation: "c2", Evicted: msgs("<<injected x>>")})
	if err != nil || res.Absorbed != 1 || res.Artifact.Content != "" || f.callCount() != 1 {
		t.Errorf("injected-only first slice: %+v %v", res, err)
	}
	res, err = s.Compact(ctx, Request{Identity: alice, Conversation: "c2", Evicted: msgs("<<injected x>>", "then this")})
	if err != nil || res.Artifact.Content != "user:then this" {
		t.Errorf("after an empty summary: %+v %v, want no empty carry-over", res, err)
	}
}

func TestEpisodeThreadOfALongConversationID(t *testing.T) {
	long := strings.Repeat("c", 200)
	if got := EpisodeThread(long); len(got) > sdk.MaxThreadIDBytes || got == EpisodeThread(long+"x") {
		t.Errorf("thread %q", got)
	}
	if EpisodeThread("c1") != "c1" {
		t.Error("a short conversation id is not its own thread id")
	}
}

// saveFailing is a store whose saves fail while fail is set.
type saveFailing struct {
	Store
	fail bool
}

func (s *saveFailing) Save(ctx context.Context, key Key, prev int, st State) error {
	if s.fail {
		return errors.New("the state database is locked")
	}
	return s.Store.Save(ctx, key, prev, st)
}

// TestRetentionWaitsForTheCommit: a slice longer than the retention
// archives all its positions and forgets the ones retention drops only
// once its summary commits. Before, retention forgot them before the
// commit, so a compaction that then failed left its newest episodes past
// a gap after the watermark, where DELETE of the conversation (which
// sweeps from the watermark until a batch finds nothing) never reached
// them, and they kept being recalled (from an outside review).
func TestRetentionWaitsForTheCommit(t *testing.T) {
	ctx := context.Background()
	var ev []string
	for i := range sdk.MaxBatch + 5 {
		ev = append(ev, fmt.Sprintf("message %d", i))
	}
	pol := ArchivePolicy{Enabled: true, MaxRecords: 3}

	p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	st := &saveFailing{Store: NewMemoryStore(), fail: true}
	s := archived(p, pol, Options{Store: st, Compactor: countingCompactor{}})
	if _, err := s.Compact(ctx, Request{Identity: alice, Conversation: "c1", Evicted: msgs(ev...)}); err == nil {
		t.Fatal("the compaction succeeded; want its save to fail")
	}
	if err := s.Forget(ctx, "default", "c1", Access{Identity: "alice"}); err != nil {
		t.Fatal(err)
	}
	if n, _ := p.Forget(ctx, "default", episodeIDs(alice, "c1", 0, len(ev))); n != 0 {
		t.Fatalf("%d episodes of the uncommitted compaction survived DELETE of the conversation", n)
	}

	// Committed, the slice keeps only its newest MaxRecords positions.
	p = coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	s = archived(p, pol, Options{Compactor: countingCompactor{}})
	if _, err := s.Compact(ctx, Request{Identity: alice, Conversation: "c1", Evicted: msgs(ev...)}); err != nil {
		t.Fatal(err)
	}
	got, _ := p.Get(ctx, "default", episodeIDs(alice, "c1", 0, len(ev)))
	var seqs []int64
	for _, r := range got {
		seqs = append(seqs, r.Thread.Seq)
	}
	slices.Sort(seqs)
	if want := []int64{int64(len(ev) - 3), int64(len(ev) - 2), int64(len(ev) - 1)}; !slices.Equal(seqs, want) {
		t.Fatalf("episodes kept at positions %v, want %v", seqs, want)
	}
}

// countingCompactor summarises a chunk as its count of messages.
type countingCompactor struct{}

func (countingCompactor) Compact(_ context.Context, r sdk.CompactRequest) (sdk.Message, error) {
	return sdk.Message{Role: "user", Content: fmt.Sprintf("summary of %d messages", len(r.Evicted))}, nil
}

// refusingSave is a store whose saves answer err while it is set.
type refusingSave struct {
	Store
	err error
}

func (s *refusingSave) Save(ctx context.Context, key Key, prev int, st State) error {
	if s.err != nil {
		return s.err
	}
	return s.Store.Save(ctx, key, prev, st)
}

// abandoningArchive archives, then ends the request (its client gone).
type abandoningArchive struct {
	Archiver
	cancel context.CancelFunc
}

func (a abandoningArchive) Archive(ctx context.Context, id sdk.Identity, conversation string, start, end int, eps []Episode) error {
	err := a.Archiver.Archive(ctx, id, conversation, start, end, eps)
	a.cancel()
	return err
}

// TestFailedCompactionKeepsTheArchive: a compaction that fails after its
// archive write, its summary never committed, leaves the committed
// episodes its slice would push out of the retention where they were.
// Before, the archive write forgot them at once, so a full archive lost
// its episodes to a compaction that then failed (a host killed, a save
// refused, the request abandoned), and the next commit of a shorter
// slice left a hole below the watermark (from an outside review).
func TestFailedCompactionKeepsTheArchive(t *testing.T) {
	cases := []struct {
		name    string
		saveErr error
		abandon bool
	}{
		{name: "the save fails", saveErr: errors.New("the state database is locked")},
		{name: "another host committed first", saveErr: ErrStale},
		{name: "the request is abandoned", abandon: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
			store := &refusingSave{Store: NewMemoryStore()}
			s := archived(p, ArchivePolicy{Enabled: true, MaxRecords: 3}, Options{Store: store, Compactor: countingCompactor{}})
			ev := msgs("m0", "m1", "m2", "m3", "m4", "m5")
			if _, err := s.Compact(context.Background(), Request{Identity: alice, Conversation: "c1", Evicted: ev[:3]}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			archive := s.opts.Archive
			if tc.abandon {
				s.opts.Archive = abandoningArchive{Archiver: archive, cancel: cancel}
			}
			store.err = tc.saveErr
			if _, err := s.Compact(ctx, Request{Identity: alice, Conversation: "c1", Evicted: ev}); err == nil {
				t.Fatal("the compaction succeeded; want it to fail after its archive write")
			}
			if got, _ := p.Get(context.Background(), "default", episodeIDs(alice, "c1", 0, 3)); len(got) != 3 {
				t.Fatalf("%d of the 3 committed episodes left after a compaction that committed nothing", len(got))
			}

			// The retry commits, and retention keeps the newest 3.
			s.opts.Archive, store.err = archive, nil
			if _, err := s.Compact(context.Background(), Request{Identity: alice, Conversation: "c1", Evicted: ev}); err != nil {
				t.Fatal(err)
			}
			var seqs []int64
			for seq := range episodes(t, p) {
				seqs = append(seqs, seq)
			}
			slices.Sort(seqs)
			if !slices.Equal(seqs, []int64{3, 4, 5}) {
				t.Errorf("kept positions %v after the retry, want 3, 4, 5", seqs)
			}
		})
	}
}

// cancellingSave is a store whose save ends the request once it has
// committed, as a client that hangs up at that moment does.
type cancellingSave struct {
	Store
	cancel context.CancelFunc
}

func (s cancellingSave) Save(ctx context.Context, key Key, prev int, st State) error {
	err := s.Store.Save(ctx, key, prev, st)
	s.cancel()
	return err
}

// TestRetentionOutlivesTheClient: the archive's retention after a commit
// runs though the client hung up once the summary committed; run on the
// request's context it failed, and the episodes it should have forgotten
// stayed below the watermark, where no later compaction goes back.
func TestRetentionOutlivesTheClient(t *testing.T) {
	p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := archived(p, ArchivePolicy{Enabled: true, MaxRecords: 3}, Options{Store: cancellingSave{Store: NewMemoryStore(), cancel: cancel}, Compactor: countingCompactor{}})
	if _, err := s.Compact(ctx, Request{Identity: alice, Conversation: "c1", Evicted: msgs("m0", "m1", "m2", "m3", "m4", "m5")}); err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for seq := range episodes(t, p) {
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	if !slices.Equal(seqs, []int64{3, 4, 5}) {
		t.Errorf("kept positions %v once the client hung up after the commit, want 3, 4, 5", seqs)
	}
}
