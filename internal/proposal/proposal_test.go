package proposal

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
)

// store is an in-memory provider declaring the capabilities it is given.
type store struct {
	caps sdk.Capabilities

	mu      sync.Mutex
	records map[string]sdk.Record
	n       int
}

func newStore(caps ...sdk.Capability) *store {
	return &store{caps: caps, records: map[string]sdk.Record{}}
}

func (s *store) Info() sdk.Info {
	return sdk.Info{Name: "memtest", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindProvider}, Protocols: []int{sdk.ProtocolVersion}, Capabilities: s.caps}
}
func (s *store) Configure(context.Context, json.RawMessage) error           { return nil }
func (s *store) Recall(context.Context, sdk.RecallQuery) ([]sdk.Hit, error) { return nil, nil }
func (s *store) Export(context.Context, string, string, int) (sdk.ExportPage, error) {
	return sdk.ExportPage{}, nil
}

func (s *store) Import(_ context.Context, realm string, recs []sdk.Record) (sdk.ImportResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		r.Realm = realm // as a store keeps it: its fetches are held to it
		s.records[r.ID] = r
	}
	return sdk.ImportResult{Imported: len(recs)}, nil
}

func (s *store) Get(_ context.Context, _ string, ids []string) ([]sdk.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sdk.Record
	for _, id := range ids {
		if r, ok := s.records[id]; ok {
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *store) Supersede(_ context.Context, realm, oldID string, rep sdk.Record) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.records[oldID]
	if !ok {
		return "", sdk.ErrNotFound
	}
	if err := rep.Prepare(realm, time.Now()); err != nil {
		return "", err
	}
	s.n++
	rep.ID = fmt.Sprintf("new%d", s.n)
	old.Status = sdk.StatusSuperseded
	s.records[oldID], s.records[rep.ID] = old, rep
	return rep.ID, nil
}

func (s *store) get(t *testing.T, id string) sdk.Record {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok {
		t.Fatalf("record %s not stored", id)
	}
	return r
}

var (
	ctx     = context.Background()
	allCaps = []sdk.Capability{sdk.CapArchive, sdk.CapFetch, sdk.CapSupersede}
)

// fact's tags have spare capacity, so an append to them in place would
// write into the caller's array.
func fact(scope sdk.Scope, title string, tags ...string) sdk.Record {
	return sdk.Record{Scope: scope, Kind: sdk.KindFact, Title: title, Body: "body of " + title, Tags: append(make([]string, 0, 8), tags...)}
}

func TestShared(t *testing.T) {
	cases := []struct {
		scope sdk.Scope
		want  bool
	}{
		{sdk.IdentityScope("alice"), false},
		{sdk.MobScope("ops"), true},
		{sdk.OperatorScope("acme"), true},
		{sdk.RealmScope, true},
	}
	for _, tc := range cases {
		if got := Shared(tc.scope); got != tc.want {
			t.Errorf("Shared(%q) = %v, want %v", tc.scope, got, tc.want)
		}
	}
}

func TestStore(t *testing.T) {
	cases := []struct {
		name    string
		caps    []sdk.Capability
		records []sdk.Record
		wantErr error
	}{
		{"quarantined and tagged", allCaps, []sdk.Record{fact(sdk.MobScope("ops"), "Deploys", "infra"), fact(sdk.RealmScope, "Holidays")}, nil},
		{"the tag is not repeated", allCaps, []sdk.Record{fact(sdk.MobScope("ops"), "Again", Tag)}, nil},
		{"without the archive capability", []sdk.Capability{sdk.CapFetch, sdk.CapSupersede}, []sdk.Record{fact(sdk.RealmScope, "x")}, sdk.ErrUnsupported},
		{"a bad record", allCaps, []sdk.Record{fact(sdk.RealmScope, "ok"), {Scope: sdk.RealmScope, Kind: "nonsense", Title: "bad"}}, sdk.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newStore(tc.caps...)
			before := slices.Clone(tc.records)
			for i := range before {
				before[i].Tags = slices.Clone(before[i].Tags)
			}
			ids, err := Store(ctx, "default", p, tc.records)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || ids != nil || len(p.records) != 0 {
					t.Fatalf("Store = %v, %v with %d stored; want %v and nothing stored", ids, err, len(p.records), tc.wantErr)
				}
				return
			}
			if err != nil || len(ids) != len(tc.records) {
				t.Fatalf("Store = %v, %v", ids, err)
			}
			for i, id := range ids {
				r := p.get(t, id)
				if r.Status != sdk.StatusQuarantined || r.Realm != "default" || r.Title != tc.records[i].Title || r.Scope != tc.records[i].Scope {
					t.Errorf("stored %+v, want a quarantined copy of %+v in realm default", r, tc.records[i])
				}
				if n := countTag(r.Tags); n != 1 {
					t.Errorf("stored tags %v hold the proposal tag %d times, want once", r.Tags, n)
				}
				for _, tag := range tc.records[i].Tags {
					if !slices.Contains(r.Tags, tag) {
						t.Errorf("stored tags %v lost %q", r.Tags, tag)
					}
				}
			}
			// The caller's records are not changed, not even past their
			// tags' length.
			for i := range before {
				if spare := tc.records[i].Tags[:cap(tc.records[i].Tags)]; slices.Contains(spare, Tag) && !slices.Contains(before[i].Tags, Tag) {
					t.Errorf("Store wrote the proposal tag into the caller's tag array: %v", spare)
				}
				if !slices.Equal(before[i].Tags, tc.records[i].Tags) || before[i].ID != tc.records[i].ID || before[i].Status != tc.records[i].Status {
					t.Errorf("Store changed the caller's record %d: %+v, was %+v", i, tc.records[i], before[i])
				}
			}
		})
	}
}

func countTag(tags []string) int {
	n := 0
	for _, t := range tags {
		if t == Tag {
			n++
		}
	}
	return n
}

func TestApprove(t *testing.T) {
	expires := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	cases := []struct {
		name string
		caps []sdk.Capability
		// seed answers the id to approve, given a store holding one
		// pending proposal (whose id is pending).
		seed      func(t *testing.T, p *store, pending string) string
		wantErr   []error
		wantTitle string
	}{
		{name: "a pending proposal", caps: allCaps,
			seed: func(_ *testing.T, _ *store, pending string) string { return pending }, wantTitle: "Deploys"},
		{name: "an active record", caps: allCaps, wantErr: []error{ErrNotPending, sdk.ErrConflict},
			seed: func(t *testing.T, p *store, _ string) string {
				r := fact(sdk.MobScope("ops"), "Active", Tag)
				if err := r.Prepare("default", time.Now()); err != nil {
					t.Fatal(err)
				}
				p.Import(ctx, "default", []sdk.Record{r})
				return r.ID
			}},
		{name: "quarantined but not a proposal", caps: allCaps, wantErr: []error{ErrNotPending, sdk.ErrConflict},
			seed: func(t *testing.T, p *store, _ string) string {
				r := fact(sdk.MobScope("ops"), "Held")
				if err := r.Prepare("default", time.Now()); err != nil {
					t.Fatal(err)
				}
				r.Status = sdk.StatusQuarantined
				p.Import(ctx, "default", []sdk.Record{r})
				return r.ID
			}},
		{name: "approved already", caps: allCaps, wantErr: []error{ErrNotPending, sdk.ErrConflict},
			seed: func(t *testing.T, p *store, pending string) string {
				if _, err := Approve(ctx, "default", pending, p); err != nil {
					t.Fatal(err)
				}
				return pending
			}},
		{name: "unknown id", caps: allCaps, wantErr: []error{sdk.ErrNotFound},
			seed: func(*testing.T, *store, string) string { return "r-nothing" }},
		{name: "without supersede", caps: []sdk.Capability{sdk.CapArchive, sdk.CapFetch}, wantErr: []error{sdk.ErrUnsupported},
			seed: func(_ *testing.T, _ *store, pending string) string { return pending }},
		{name: "without fetch", caps: []sdk.Capability{sdk.CapArchive, sdk.CapSupersede}, wantErr: []error{sdk.ErrUnsupported},
			seed: func(_ *testing.T, _ *store, pending string) string { return pending }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newStore(tc.caps...)
			rec := fact(sdk.MobScope("ops"), "Deploys", "infra")
			rec.Trust, rec.Description, rec.ExpiresAt = sdk.TrustAgentObserved, "how we deploy", expires
			rec.Thread, rec.OccurredAt = &sdk.Thread{ID: "ops chat", Seq: 7}, time.Date(2023, 5, 27, 9, 0, 0, 0, time.UTC)
			ids, err := Store(ctx, "default", p, []sdk.Record{rec})
			if err != nil {
				t.Fatal(err)
			}
			id := tc.seed(t, p, ids[0])
			newID, err := Approve(ctx, "default", id, p)
			if tc.wantErr != nil {
				for _, want := range tc.wantErr {
					if !errors.Is(err, want) {
						t.Fatalf("Approve = %q, %v; want %v", newID, err, want)
					}
				}
				if newID != "" {
					t.Fatalf("a refused approval answered id %q", newID)
				}
				return
			}
			if err != nil || newID == "" || newID == id {
				t.Fatalf("Approve = %q, %v", newID, err)
			}
			got := p.get(t, newID)
			if got.Status != sdk.StatusActive || got.HasTag(Tag) || !got.HasTag("infra") {
				t.Errorf("approved record %+v: want active, its own tags kept and the proposal tag gone", got)
			}
			if got.Title != tc.wantTitle || got.Scope != rec.Scope || got.Body != rec.Body || got.Description != rec.Description ||
				got.Trust != rec.Trust || !got.ExpiresAt.Equal(expires) || got.Kind != rec.Kind ||
				got.Thread == nil || *got.Thread != *rec.Thread || !got.OccurredAt.Equal(rec.OccurredAt) {
				t.Errorf("approved record %+v does not carry the proposal's content %+v", got, rec)
			}
			if old := p.get(t, id); old.Status != sdk.StatusSuperseded {
				t.Errorf("the proposal is %s after approval, want superseded (kept as history)", old.Status)
			}
		})
	}
}

func TestCheckAgentForget(t *testing.T) {
	for _, c := range []struct {
		scope sdk.Scope
		own   string
		ok    bool
	}{
		{sdk.IdentityScope("alice"), "", true},
		{sdk.IdentityScope("alice"), "alice", true},
		{sdk.IdentityScope("bob"), "alice", false},
		{sdk.RealmScope, "", false},
		{sdk.RealmScope, "alice", false},
		{sdk.Scope("mob:ops"), "", false},
		{sdk.Scope("operator"), "alice", false},
	} {
		err := CheckAgentForget(c.scope, c.own)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, sdk.ErrPermission)) {
			t.Errorf("CheckAgentForget(%s, %q) = %v, want ok=%v", c.scope, c.own, err, c.ok)
		}
	}
}

func TestCapTrust(t *testing.T) {
	recs := []sdk.Record{{Trust: sdk.TrustOperator}, {Trust: sdk.TrustApplication}, {Trust: sdk.TrustAgentVerified}, {Trust: ""}, {Trust: sdk.TrustUntrusted}}
	if !CapTrust(recs) {
		t.Fatal("nothing capped")
	}
	want := []sdk.Trust{sdk.TrustAgentVerified, sdk.TrustAgentVerified, sdk.TrustAgentVerified, "", sdk.TrustUntrusted}
	for i := range recs {
		if recs[i].Trust != want[i] {
			t.Errorf("record %d trust %q, want %q", i, recs[i].Trust, want[i])
		}
	}
	if CapTrust(recs) {
		t.Error("capped twice")
	}
}

// TestTargetChangedSaysWhatWasShown: an approval of a proposal shown
// replacing no record, which would now replace one, was refused with
// "would now replace record "r2", not no record as shown". Each message
// says what the reviewer was shown and what the approval would do now,
// in words, once.
func TestTargetChangedSaysWhatWasShown(t *testing.T) {
	none, r1 := "", "r1"
	for _, c := range []struct {
		shown   *string
		current string
		want    string
	}{
		{&none, "r2", `proposal "p" would now replace record "r2", where it was shown replacing none; nothing was approved`},
		{&r1, "", `proposal "p" would now add a record, replacing none, where it was shown replacing record "r1"; nothing was approved`},
		{&r1, "r2", `proposal "p" would now replace record "r2", where it was shown replacing record "r1"; nothing was approved`},
	} {
		err := CheckTarget("p", c.shown, c.current)
		if !errors.Is(err, ErrTargetChanged) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("CheckTarget(%q, %q) = %v, want it to start %q", *c.shown, c.current, err, c.want)
		}
	}
	for _, shown := range []*string{nil, &r1} {
		if err := CheckTarget("p", shown, "r1"); err != nil {
			t.Errorf("CheckTarget with the target shown = %v", err)
		}
	}
}
