package kvprovider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
	"github.com/memhost/memhost/sdk/index"
	"github.com/memhost/memhost/sdk/kvprovider"
)

// memStore keeps records in memory, in a registry keyed by directory so a
// restarted plugin (a fresh Provider on the same directory) finds them:
// durable for the life of the test process, which is what the kit's
// in-process restart checks see.
type memStore struct {
	mu      sync.Mutex
	recs    map[kvprovider.Key]sdk.Record
	ledger  []sdk.LedgerEntry
	failPut bool
}

var (
	storesMu sync.Mutex
	stores   = map[string]*memStore{}
)

func storeFor(dir string) *memStore {
	storesMu.Lock()
	defer storesMu.Unlock()
	s := stores[dir]
	if s == nil {
		s = &memStore{recs: map[kvprovider.Key]sdk.Record{}}
		stores[dir] = s
	}
	return s
}

func (s *memStore) Load(context.Context) ([]sdk.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sdk.Record
	for _, r := range s.recs {
		r.Tags = slices.Clone(r.Tags)
		out = append(out, r)
	}
	return out, nil
}

func (s *memStore) Put(_ context.Context, recs []sdk.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failPut {
		return errors.New("disk full")
	}
	for _, r := range recs {
		r.Tags = slices.Clone(r.Tags)
		s.recs[kvprovider.Key{Realm: r.Realm, ID: r.ID}] = r
	}
	return nil
}

func (s *memStore) Delete(_ context.Context, keys []kvprovider.Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.recs, k)
	}
	return nil
}

func (s *memStore) AppendLedger(_ context.Context, entries []sdk.LedgerEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger = append(s.ledger, entries...)
	return nil
}

type config struct {
	Dir string `json:"dir"`
}

func newProvider() *kvprovider.Provider {
	return kvprovider.New(kvprovider.Options{
		Info:   sdk.Info{Name: "memkv", Version: "0.0.1"},
		Ledger: true,
		Open: func(_ context.Context, raw json.RawMessage) (kvprovider.Store, error) {
			var cfg config
			if err := sdk.DecodeConfig(raw, &cfg); err != nil {
				return nil, err
			}
			if cfg.Dir == "" {
				return nil, fmt.Errorf("dir is required: %w", sdk.ErrInvalid)
			}
			return storeFor(cfg.Dir), nil
		},
	})
}

func TestConformance(t *testing.T) {
	conformance.RunProvider(t, conformance.Target{
		New: func() sdk.Plugin { return newProvider() },
		Config: func(dir string) json.RawMessage {
			b, _ := json.Marshal(config{Dir: dir})
			return b
		},
	})
}

func open(t *testing.T) (*kvprovider.Provider, *memStore) {
	t.Helper()
	dir := t.TempDir()
	p := newProvider()
	if err := p.Configure(context.Background(), json.RawMessage(`{"dir":"`+dir+`"}`)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, storeFor(dir)
}

// A write the Store refuses changes nothing in memory: not recalled, not
// fetched, and the same content can be written once the Store recovers.
func TestStoreFailureChangesNothing(t *testing.T) {
	ctx := context.Background()
	p, s := open(t)
	rec := sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "espresso", Body: "the grinder is set to 12"}
	s.failPut = true
	if _, err := p.Remember(ctx, "r", []sdk.Record{rec}); err == nil {
		t.Fatal("Remember succeeded although the store failed")
	}
	hits, err := p.Recall(ctx, sdk.RecallQuery{Realm: "r", Query: "espresso grinder"})
	if err != nil || len(hits) != 0 {
		t.Fatalf("Recall after a failed write = %v, %v; want nothing", hits, err)
	}
	s.failPut = false
	ids, err := p.Remember(ctx, "r", []sdk.Record{rec})
	if err != nil {
		t.Fatal(err)
	}
	hits, err = p.Recall(ctx, sdk.RecallQuery{Realm: "r", Query: "espresso grinder"})
	if err != nil || len(hits) != 1 || hits[0].Record.ID != ids[0] {
		t.Fatalf("Recall = %v, %v; want %s", hits, err, ids[0])
	}
}

// A stored record whose hash does not match its content is refused at
// load, naming it, rather than half loaded.
func TestLoadRefusesCorruptRecords(t *testing.T) {
	dir := t.TempDir()
	s := storeFor(dir)
	now := time.Now().UTC()
	good := sdk.Record{ID: "good", Realm: "r", Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "t", Body: "b",
		Status: sdk.StatusActive, Trust: sdk.TrustAgentObserved, CreatedAt: now, UpdatedAt: now, ContentHash: sdk.ContentHash("t", "b")}
	bad := good
	bad.ID, bad.Body = "bad", "edited by hand"
	s.recs[kvprovider.Key{Realm: "r", ID: "good"}] = good
	s.recs[kvprovider.Key{Realm: "r", ID: "bad"}] = bad
	err := newProvider().Configure(context.Background(), json.RawMessage(`{"dir":"`+dir+`"}`))
	if err == nil || !strings.Contains(err.Error(), "r/bad") {
		t.Fatalf("Configure = %v, want an error naming r/bad", err)
	}
}

// Working set: used records first by rank, then the newest unused ones.
func TestWorkingSetRanksUsedFirst(t *testing.T) {
	ctx := context.Background()
	p, _ := open(t)
	var recs []sdk.Record
	for _, title := range []string{"alpha", "beta", "gamma", "delta"} {
		recs = append(recs, sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: title, Body: title + " body"})
	}
	ids, err := p.Remember(ctx, "r", recs)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := p.CountUses(ctx, "r", []sdk.Use{{ID: ids[2], Count: 2}, {ID: ids[1], Count: 1}}, now); err != nil {
		t.Fatal(err)
	}
	rows, err := p.Manifest(ctx, sdk.ManifestQuery{Realm: "r", Tier: sdk.TierWorkingSet, K: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 || rows[0].ID != ids[2] || rows[1].ID != ids[1] || rows[0].Rank <= rows[1].Rank || rows[2].Rank != 0 {
		t.Fatalf("working set = %+v; want %s then %s ranked, then the unused", rows, ids[2], ids[1])
	}
}

// ReadThread answers exactly the records at the places asked, of their
// own scope and realm, and none once forgotten.
func TestReadThread(t *testing.T) {
	ctx := context.Background()
	p, _ := open(t)
	alice, bob := sdk.IdentityScope("alice"), sdk.IdentityScope("bob")
	at := func(scope sdk.Scope, thread string, seq int64) sdk.ThreadPlace {
		return sdk.ThreadPlace{Scope: scope, Thread: thread, Seq: seq}
	}
	turn := func(scope sdk.Scope, text string, seq int64) sdk.Record {
		return sdk.Record{Scope: scope, Kind: sdk.KindFact, Title: "turn", Body: text, Thread: &sdk.Thread{ID: "chat", Seq: seq}}
	}
	a, err := p.Remember(ctx, "r", []sdk.Record{turn(alice, "one", 1), turn(alice, "two", 2), turn(alice, "two again", 2), turn(alice, "three", 3)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Remember(ctx, "r", []sdk.Record{turn(bob, "one", 1)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Remember(ctx, "other", []sdk.Record{turn(alice, "elsewhere", 1)}); err != nil {
		t.Fatal(err)
	}
	read := func(t *testing.T, realm string, places ...sdk.ThreadPlace) []string {
		t.Helper()
		recs, err := p.ReadThread(ctx, realm, places)
		if err != nil {
			t.Fatalf("ReadThread(%v): %v", places, err)
		}
		ids := make([]string, len(recs))
		for i, r := range recs {
			ids[i] = r.ID
		}
		slices.Sort(ids)
		return ids
	}
	tests := []struct {
		name   string
		realm  string
		places []sdk.ThreadPlace
		want   []string
	}{
		{"one place", "r", []sdk.ThreadPlace{at(alice, "chat", 1)}, []string{a[0]}},
		{"a place holding two", "r", []sdk.ThreadPlace{at(alice, "chat", 2)}, []string{a[1], a[2]}},
		{"the same thread id in two scopes", "r", []sdk.ThreadPlace{at(alice, "chat", 3), at(bob, "chat", 1)}, []string{a[3], b[0]}},
		{"a place with nothing", "r", []sdk.ThreadPlace{at(alice, "chat", 4), at(bob, "chat", 2), at(alice, "other", 1)}, nil},
		{"a realm without the thread", "none", []sdk.ThreadPlace{at(alice, "chat", 1)}, nil},
		{"no places", "r", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := read(t, tt.realm, tt.places...), slices.Sorted(slices.Values(tt.want)); !slices.Equal(got, want) {
				t.Fatalf("ReadThread = %v, want %v", got, want)
			}
		})
	}
	if n, err := p.Forget(ctx, "r", []string{a[1]}); err != nil || n != 1 {
		t.Fatalf("Forget = %d, %v", n, err)
	}
	if got := read(t, "r", at(alice, "chat", 2)); !slices.Equal(got, []string{a[2]}) {
		t.Fatalf("after Forget, ReadThread = %v, want %s alone", got, a[2])
	}
	// A rebuilt index knows the places too.
	if _, err := p.Reindex(ctx, "", nil); err != nil {
		t.Fatal(err)
	}
	if got := read(t, "r", at(alice, "chat", 3)); !slices.Equal(got, []string{a[3]}) {
		t.Fatalf("after Reindex, ReadThread = %v, want %s", got, a[3])
	}
	// A crowded place answers its first sdk.MaxPlaceReads by id.
	if sdk.MaxPlaceReads != index.MaxPlaceReads {
		t.Fatalf("sdk.MaxPlaceReads %d and index.MaxPlaceReads %d differ", sdk.MaxPlaceReads, index.MaxPlaceReads)
	}
	var crowd []sdk.Record
	for i := range sdk.MaxPlaceReads + 5 {
		crowd = append(crowd, turn(alice, fmt.Sprint("crowd ", i), 9))
	}
	c, err := p.Remember(ctx, "r", crowd)
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Sorted(slices.Values(c))[:sdk.MaxPlaceReads], a[3])
	slices.Sort(want)
	if got := read(t, "r", at(alice, "chat", 9), at(alice, "chat", 3)); !slices.Equal(got, want) {
		t.Fatalf("a place of %d records and another: ReadThread = %v, want %v", len(crowd), got, want)
	}
}
