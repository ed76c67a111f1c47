package host

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// serveCapsEnv makes the stub process serve capsPlugin declaring the
// comma-separated capabilities it holds.
const serveCapsEnv = "MEMHOST_HOST_TEST_CAPS"

func splitCaps(s string) sdk.Capabilities {
	var out sdk.Capabilities
	for c := range strings.SplitSeq(s, ",") {
		if c != "" {
			out = append(out, sdk.Capability(c))
		}
	}
	return out
}

// capsPlugin implements every capability and declares those it is given.
// Each call answers a value only a plugin call produces, so a test sees
// that the call crossed to the process.
type capsPlugin struct{ declared sdk.Capabilities }

const marker = "from-the-plugin"

func (p capsPlugin) Info() sdk.Info {
	return sdk.Info{Name: "caps", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindProvider}, Protocols: []int{1}, Capabilities: p.declared}
}
func (capsPlugin) Configure(context.Context, json.RawMessage) error { return nil }

// Recall answers nothing to a lexical query but "neighbours", to which it
// answers a hit at seq 1 of thread "t", and to one with a query vector a
// hit scored by its dimensions and titled by its model, so a test sees
// the semantic half crossed the wire.
func (capsPlugin) Recall(_ context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	if q.QueryVector == nil && q.Query == "neighbours" {
		rec := sdk.Record{ID: "hit", Realm: q.Realm, Scope: sdk.RealmScope, Kind: sdk.KindEpisode, Title: "hit",
			Status: sdk.StatusActive, Thread: &sdk.Thread{ID: "t", Seq: 1}}
		return []sdk.Hit{{Record: rec, Score: 1}}, nil
	}
	if q.QueryVector == nil {
		return nil, nil
	}
	rec := sdk.Record{ID: marker, Realm: q.Realm, Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: q.VectorModel, Status: sdk.StatusActive}
	return []sdk.Hit{{Record: rec, Score: float64(len(q.QueryVector)) + q.Fusion.Semantic}}, nil
}
func (capsPlugin) Remember(_ context.Context, _ string, rs []sdk.Record) ([]string, error) {
	return []string{marker}, nil
}
func (capsPlugin) Get(_ context.Context, realm string, _ []string) ([]sdk.Record, error) {
	return []sdk.Record{{ID: marker, Realm: realm, Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: marker}}, nil
}

// Forget answers that it forgot all but one of the ids.
func (capsPlugin) Forget(_ context.Context, _ string, ids []string) (int, error) {
	return len(ids) - 1, nil
}
func (capsPlugin) Manifest(context.Context, sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	return []sdk.ManifestRow{{ID: marker, Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: marker}}, nil
}
func (capsPlugin) Supersede(context.Context, string, string, sdk.Record) (string, error) {
	return marker, nil
}
func (capsPlugin) MarkUsed(context.Context, string, []string, time.Time) error {
	return errors.New(marker)
}
func (capsPlugin) CountUses(context.Context, string, []sdk.Use, time.Time) error {
	return errors.New(marker)
}
func (capsPlugin) WriteLedger(context.Context, []sdk.LedgerEntry) error { return errors.New(marker) }
func (capsPlugin) Export(context.Context, string, string, int) (sdk.ExportPage, error) {
	return sdk.ExportPage{Next: marker}, nil
}

// Import answers that it skipped every record.
func (capsPlugin) Import(_ context.Context, _ string, rs []sdk.Record) (sdk.ImportResult, error) {
	return sdk.ImportResult{Skipped: len(rs)}, nil
}
func (capsPlugin) Reindex(context.Context, string, func(done, total int)) (int, error) {
	return 42, nil
}
func (capsPlugin) PutVectors(context.Context, string, []sdk.RecordVector) error {
	return errors.New(marker)
}
func (capsPlugin) MissingVectors(context.Context, string, string, string, int) ([]string, error) {
	return []string{marker}, nil
}

// ReadThread answers the record at seq 0 of thread "t", whatever it is
// asked: the SDK's server keeps it as the neighbour of Recall's hit.
func (capsPlugin) ReadThread(_ context.Context, realm string, _ []sdk.ThreadPlace) ([]sdk.Record, error) {
	return []sdk.Record{{ID: marker, Realm: realm, Scope: sdk.RealmScope, Kind: sdk.KindEpisode, Title: marker,
		Status: sdk.StatusActive, Thread: &sdk.Thread{ID: "t", Seq: 0}}}, nil
}

// accessors is, per capability, its accessor on Provider and a call
// through what the accessor answered that reports whether the plugin
// process answered it.
var accessors = map[sdk.Capability]func(p *Provider) (call func(context.Context) bool, ok bool){
	sdk.CapWrite: func(p *Provider) (func(context.Context) bool, bool) {
		w, ok := p.Writer()
		return func(ctx context.Context) bool {
			ids, err := w.Remember(ctx, "default", []sdk.Record{{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "t"}})
			return err == nil && slices.Equal(ids, []string{marker})
		}, ok
	},
	sdk.CapFetch: func(p *Provider) (func(context.Context) bool, bool) {
		g, ok := p.Getter()
		return func(ctx context.Context) bool {
			recs, err := g.Get(ctx, "default", []string{"x", marker})
			return err == nil && len(recs) == 1 && recs[0].ID == marker
		}, ok
	},
	sdk.CapForget: func(p *Provider) (func(context.Context) bool, bool) {
		f, ok := p.Forgetter()
		return func(ctx context.Context) bool {
			n, err := f.Forget(ctx, "default", []string{"x", "y", "z"})
			return err == nil && n == 2
		}, ok
	},
	sdk.CapManifest: func(p *Provider) (func(context.Context) bool, bool) {
		l, ok := p.Lister()
		return func(ctx context.Context) bool {
			rows, err := l.Manifest(ctx, sdk.ManifestQuery{Realm: "default", Tier: sdk.TierFull})
			return err == nil && len(rows) == 1 && rows[0].ID == marker
		}, ok
	},
	sdk.CapSupersede: func(p *Provider) (func(context.Context) bool, bool) {
		s, ok := p.Superseder()
		return func(ctx context.Context) bool {
			id, err := s.Supersede(ctx, "default", "x", sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "t"})
			return err == nil && id == marker
		}, ok
	},
	sdk.CapUsage: func(p *Provider) (func(context.Context) bool, bool) {
		u, ok := p.UsageMarker()
		return func(ctx context.Context) bool {
			err := u.MarkUsed(ctx, "default", []string{"x"}, time.Now())
			return err != nil && strings.Contains(err.Error(), marker)
		}, ok
	},
	sdk.CapUsageCounts: func(p *Provider) (func(context.Context) bool, bool) {
		u, ok := p.UsageCounter()
		return func(ctx context.Context) bool {
			err := u.CountUses(ctx, "default", []sdk.Use{{ID: "x", Count: 2}}, time.Now())
			return err != nil && strings.Contains(err.Error(), marker)
		}, ok
	},
	sdk.CapLedger: func(p *Provider) (func(context.Context) bool, bool) {
		l, ok := p.Ledger()
		return func(ctx context.Context) bool {
			err := l.WriteLedger(ctx, []sdk.LedgerEntry{{Realm: "default", Identity: "alice", RecordID: "x", Surface: "turn", At: time.Now()}})
			return err != nil && strings.Contains(err.Error(), marker)
		}, ok
	},
	sdk.CapArchive: func(p *Provider) (func(context.Context) bool, bool) {
		a, ok := p.Archiver()
		return func(ctx context.Context) bool {
			page, err := a.Export(ctx, "default", "", 1)
			if err != nil || page.Next != marker {
				return false
			}
			now := time.Now().UTC()
			rec := sdk.Record{ID: "x", Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "t", Status: sdk.StatusActive,
				Trust: sdk.TrustAgentObserved, CreatedAt: now, UpdatedAt: now}
			res, err := a.Import(ctx, "default", []sdk.Record{rec})
			return err == nil && res.Skipped == 1
		}, ok
	},
	sdk.CapReindex: func(p *Provider) (func(context.Context) bool, bool) {
		r, ok := p.Reindexer()
		return func(ctx context.Context) bool { n, err := r.Reindex(ctx, "default", nil); return err == nil && n == 42 }, ok
	},
	sdk.CapVectors: func(p *Provider) (func(context.Context) bool, bool) {
		v, ok := p.VectorStore()
		return func(ctx context.Context) bool {
			err := v.PutVectors(ctx, "default", []sdk.RecordVector{{ID: "x", Model: "m", Vector: []float32{1}}})
			if err == nil || !strings.Contains(err.Error(), marker) {
				return false
			}
			ids, err := v.MissingVectors(ctx, "default", "m", "", 1)
			if err != nil || !slices.Equal(ids, []string{marker}) {
				return false
			}
			hits, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", QueryVector: []float32{1, 2, 3}, VectorModel: "m/1", Fusion: sdk.Fusion{Semantic: 0.5}})
			return err == nil && len(hits) == 1 && hits[0].Score == 3.5 && hits[0].Record.Title == "m/1"
		}, ok
	},
	// Neighbours have no accessor of their own: they ride on Recall, sent
	// only to a provider that declared them.
	sdk.CapNeighbours: func(p *Provider) (func(context.Context) bool, bool) {
		return func(ctx context.Context) bool {
			hits, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "neighbours", Neighbours: 1})
			return err == nil && len(hits) == 1 && len(hits[0].Neighbours) == 1 && hits[0].Neighbours[0].ID == marker
		}, p.Capabilities().Has(sdk.CapNeighbours)
	},
}

// TestAccessorsAnswerTheDeclaration launches a real plugin process per
// declared set (none, then each capability alone) and checks that every
// accessor answers true exactly for the declared capability, and that
// what it answers reaches the plugin.
func TestAccessorsAnswerTheDeclaration(t *testing.T) {
	all := sdk.AllCapabilities()
	for _, c := range all {
		if accessors[c] == nil {
			t.Fatalf("capability %s has no accessor case here", c)
		}
	}
	path, _, sum := stubExecutable(t)
	v := NewVerifier()
	for _, declared := range append([]sdk.Capability{""}, all...) {
		t.Run("declares "+string(declared), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			conn, err := Launch(ctx, LaunchOptions{Name: "caps", Path: path, SHA256: sum, Verifier: v, Dir: t.TempDir(),
				Env: []string{serveCapsEnv + "=" + string(declared)}})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Kill(0)
			if err := conn.Configure(ctx, nil); err != nil {
				t.Fatal(err)
			}
			p, err := conn.Provider()
			if err != nil {
				t.Fatal(err)
			}
			if want := splitCaps(string(declared)); !slices.Equal(p.Capabilities(), want) {
				t.Fatalf("Capabilities() = %v, want %v", p.Capabilities(), want)
			}
			for _, c := range all {
				call, ok := accessors[c](p)
				if ok != (c == declared) {
					t.Errorf("accessor of %s answers %v, want %v", c, ok, c == declared)
					continue
				}
				if ok && !call(ctx) {
					t.Errorf("the %s call through its accessor did not reach the plugin", c)
				}
			}
			if declared != sdk.CapVectors {
				// The semantic half never reaches a provider without vectors.
				hits, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", QueryVector: []float32{1}, VectorModel: "m"})
				if err != nil || len(hits) != 0 {
					t.Errorf("recall with a query vector reached a provider without vectors: %v, %v", hits, err)
				}
			}
			if declared != sdk.CapNeighbours {
				// Nor does a request for neighbours reach one without them.
				hits, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "neighbours", Neighbours: 1})
				if err != nil || len(hits) != 1 || len(hits[0].Neighbours) != 0 {
					t.Errorf("recall with neighbours answered %+v, %v by a provider without them; want its hit alone", hits, err)
				}
			}
		})
	}
}

// TestProviderOfDeclaredNeverGuessed: an in-process value declares what
// its Info says (those it implements), a value without Info declares
// nothing, whatever methods it has.
func TestProviderOfDeclaredNeverGuessed(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    sdk.Provider
		want sdk.Capabilities
	}{
		{"plugin declaring two", capsPlugin{declared: sdk.Capabilities{sdk.CapFetch, sdk.CapLedger}}, sdk.Capabilities{sdk.CapFetch, sdk.CapLedger}},
		{"plugin declaring none", capsPlugin{}, nil},
		{"plugin declaring what it lacks", stubDeclaring{}, nil},
		{"no Info", struct{ capsPlugin }{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ProviderOf(tc.v)
			if !slices.Equal(p.Capabilities(), tc.want) {
				t.Fatalf("Capabilities() = %v, want %v", p.Capabilities(), tc.want)
			}
			for _, c := range sdk.AllCapabilities() {
				if _, ok := accessors[c](p); ok != tc.want.Has(c) {
					t.Errorf("accessor of %s answers %v", c, ok)
				}
			}
			if ProviderOf(p) != p {
				t.Error("ProviderOf of a *Provider is not the same handle")
			}
		})
	}
}

// stubDeclaring declares a capability it does not implement.
type stubDeclaring struct{ stubProvider }

func (stubDeclaring) Info() sdk.Info {
	return sdk.Info{Name: "liar", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindProvider}, Protocols: []int{1}, Capabilities: sdk.Capabilities{sdk.CapWrite}}
}

// TestProviderHasNoCapabilityMethods: the handle itself satisfies none of
// the interfaces its accessors answer, so no type assertion can skip them.
func TestProviderHasNoCapabilityMethods(t *testing.T) {
	handle := reflect.TypeFor[*Provider]()
	boolType := reflect.TypeFor[bool]()
	found := 0
	for m := range handle.Methods() {
		ft := m.Type // the receiver is its first argument
		if ft.NumIn() != 1 || ft.NumOut() != 2 || ft.Out(0).Kind() != reflect.Interface || ft.Out(1) != boolType {
			continue
		}
		found++
		if handle.Implements(ft.Out(0)) {
			t.Errorf("*Provider implements %s, which its accessor %s guards", ft.Out(0), m.Name)
		}
	}
	if want := len(sdk.AllCapabilities()) - len(onRecall); found != want {
		t.Fatalf("found %d accessors, want one per capability but those that ride on Recall %v (%d)", found, onRecall, want)
	}
	for _, c := range onRecall {
		impl := reflect.TypeFor[sdk.ThreadReader]()
		if c != sdk.CapNeighbours {
			t.Fatalf("capability %s rides on Recall; name its interface here", c)
		}
		if handle.Implements(impl) || reflect.TypeFor[*providerClient]().Implements(impl) {
			t.Errorf("the host's handle or client implements %s, which only the plugin's own server calls", impl)
		}
	}
}

// onRecall lists the capabilities with no accessor: the host asks for
// them in a RecallQuery field, and the SDK's server calls their interface
// inside the plugin.
var onRecall = []sdk.Capability{sdk.CapNeighbours}

// TestProviderOfInProcessNeighbours: an in-process plugin's recall answers
// the neighbours its server would, when it declared them, and none when
// it did not, as a launched plugin's does.
func TestProviderOfInProcessNeighbours(t *testing.T) {
	for _, tc := range []struct {
		declared sdk.Capabilities
		want     []string
	}{
		{sdk.Capabilities{sdk.CapNeighbours}, []string{marker}},
		{nil, nil},
	} {
		p := ProviderOf(capsPlugin{declared: tc.declared})
		hits, err := p.Recall(t.Context(), sdk.RecallQuery{Realm: "default", Query: "neighbours", Neighbours: 1})
		if err != nil || len(hits) != 1 {
			t.Fatalf("declaring %v: Recall = %+v, %v; want the one hit", tc.declared, hits, err)
		}
		var got []string
		for _, n := range hits[0].Neighbours {
			got = append(got, n.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("declaring %v: neighbours %v, want %v", tc.declared, got, tc.want)
		}
	}
}
