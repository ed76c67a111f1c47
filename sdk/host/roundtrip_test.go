package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// echoProvider is a minimal in-memory provider for exercising the glue.
type echoProvider struct {
	records    map[string]sdk.Record
	configured json.RawMessage
}

func (p *echoProvider) Info() sdk.Info {
	return sdk.Info{Name: "echo", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindProvider}, Protocols: []int{1}, Capabilities: sdk.Capabilities{sdk.CapWrite, sdk.CapFetch}}
}

func (p *echoProvider) Configure(_ context.Context, raw json.RawMessage) error {
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("config: %v: %w", err, sdk.ErrInvalid)
	}
	if _, bad := cfg["bogus"]; bad {
		return &sdk.FieldError{Field: "bogus", Problem: "unknown key", Err: sdk.ErrInvalid}
	}
	p.configured = raw
	return nil
}

func (p *echoProvider) Recall(_ context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	if q.Query == "slow" {
		time.Sleep(200 * time.Millisecond)
	}
	var hits []sdk.Hit
	for _, r := range p.records {
		if r.Realm == q.Realm {
			hits = append(hits, sdk.Hit{Record: r, Score: 1})
		}
	}
	return hits, nil
}

func (p *echoProvider) Remember(_ context.Context, realm string, recs []sdk.Record) ([]string, error) {
	var ids []string
	for _, r := range recs {
		if err := r.Prepare(realm, time.Now()); err != nil {
			return nil, err
		}
		p.records[r.ID] = r
		ids = append(ids, r.ID)
	}
	return ids, nil
}

func (p *echoProvider) Get(_ context.Context, realm string, ids []string) ([]sdk.Record, error) {
	var out []sdk.Record
	for _, id := range ids {
		if r, ok := p.records[id]; ok && r.Realm == realm {
			out = append(out, r)
		}
	}
	return out, nil
}

// Forget is implemented but not declared: the host must not see it.
func (p *echoProvider) Forget(context.Context, string, []string) (int, error) { return 0, nil }

func TestGRPCRoundTrip(t *testing.T) {
	ctx := context.Background()
	impl := &echoProvider{records: map[string]sdk.Record{}}
	conn, err := host.ServeInProcess(ctx, impl, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.Info().Name; got != "echo" {
		t.Fatalf("sdk.Info name = %q", got)
	}
	err = conn.Configure(ctx, json.RawMessage(`{"bogus":1}`))
	if fe := (*sdk.FieldError)(nil); !errors.Is(err, sdk.ErrInvalid) || !errors.As(err, &fe) || fe.Field != "config.bogus" {
		t.Fatalf("bad config: err = %v, want a FieldError for config.bogus", err)
	}
	// The key is named once (it read "config.bogus: bogus: ...").
	if strings.Contains(err.Error(), "config.bogus: bogus") {
		t.Fatalf("bad config: %v names the key twice", err)
	}
	if err := conn.Configure(ctx, nil); err != nil {
		t.Fatal(err)
	}
	p, err := conn.Provider()
	if err != nil {
		t.Fatal(err)
	}
	caps := p.Capabilities()
	if !caps.Has(sdk.CapWrite) || caps.Has(sdk.CapForget) {
		t.Fatalf("capabilities = %v, want write and fetch only", caps)
	}
	if _, ok := p.Forgetter(); ok {
		t.Fatal("Forgetter answers true, but the plugin did not declare forget")
	}
	w, ok := p.Writer()
	if !ok {
		t.Fatal("Writer answers false, but the plugin declared write")
	}
	g, ok := p.Getter()
	if !ok {
		t.Fatal("Getter answers false, but the plugin declared fetch")
	}
	when := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	ids, err := w.Remember(ctx, "default", []sdk.Record{{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "t", Body: "b", Tags: []string{"x"}, ExpiresAt: when, Thread: &sdk.Thread{ID: "conv-1", Seq: 7}}})
	if err != nil || len(ids) != 1 {
		t.Fatalf("Remember = %v, %v", ids, err)
	}
	got, err := g.Get(ctx, "default", ids)
	if err != nil || len(got) != 1 {
		t.Fatalf("Get = %v, %v", got, err)
	}
	if r := got[0]; r.Title != "t" || r.Body != "b" || !r.ExpiresAt.Equal(when) || r.Tags[0] != "x" || r.ContentHash != sdk.ContentHash("t", "b") ||
		r.Thread == nil || *r.Thread != (sdk.Thread{ID: "conv-1", Seq: 7}) {
		t.Fatalf("record did not survive the round trip: %+v", r)
	}
	_, err = w.Remember(ctx, "default", []sdk.Record{{Scope: sdk.IdentityScope("a"), Kind: sdk.KindFact, Title: "t"}, {Scope: "nope", Kind: sdk.KindFact, Title: "t"}})
	var fe *sdk.FieldError
	if !errors.Is(err, sdk.ErrInvalid) || !errors.As(err, &fe) || fe.Field != "records[1].scope" {
		// The field path crosses the wire as a google.rpc.BadRequest detail.
		t.Fatalf("bad scope: err = %v (%T), want a FieldError for records[1].scope", err, err)
	}
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := p.Recall(dctx, sdk.RecallQuery{Realm: "default", Query: "slow"}); !errors.Is(err, sdk.ErrDeadline) {
		t.Fatalf("deadline: err = %v, want sdk.ErrDeadline", err)
	}
}

func TestCheckPluginRefusesFalseDeclarations(t *testing.T) {
	p := &lyingProvider{}
	if err := sdk.CheckPlugin(p); err == nil {
		t.Fatal("sdk.CheckPlugin accepted a plugin declaring a capability it does not implement")
	}
}

type lyingProvider struct{}

func (lyingProvider) Info() sdk.Info {
	return sdk.Info{Name: "liar", Version: "1.0.0", Kinds: []sdk.PluginKind{sdk.KindProvider}, Protocols: []int{1}, Capabilities: sdk.Capabilities{sdk.CapManifest}}
}
func (lyingProvider) Configure(context.Context, json.RawMessage) error           { return nil }
func (lyingProvider) Recall(context.Context, sdk.RecallQuery) ([]sdk.Hit, error) { return nil, nil }
