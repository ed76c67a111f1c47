package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"
)

// echoProvider is a minimal in-memory provider for exercising the glue.
type echoProvider struct {
	records    map[string]Record
	configured json.RawMessage
}

func (p *echoProvider) Info() Info {
	return Info{Name: "echo", Version: "0.1.0", Kinds: []PluginKind{KindProvider}, Protocols: []int{1}, Capabilities: Capabilities{CapWrite, CapFetch}}
}

func (p *echoProvider) Configure(_ context.Context, raw json.RawMessage) error {
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("config: %v: %w", err, ErrInvalid)
	}
	if _, bad := cfg["bogus"]; bad {
		return &FieldError{Field: "bogus", Problem: "unknown key", Err: ErrInvalid}
	}
	p.configured = raw
	return nil
}

func (p *echoProvider) Recall(_ context.Context, q RecallQuery) ([]Hit, error) {
	if q.Query == "slow" {
		time.Sleep(200 * time.Millisecond)
	}
	var hits []Hit
	for _, r := range p.records {
		if r.Realm == q.Realm {
			hits = append(hits, Hit{Record: r, Score: 1})
		}
	}
	return hits, nil
}

func (p *echoProvider) Remember(_ context.Context, realm string, recs []Record) ([]string, error) {
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

func (p *echoProvider) Get(_ context.Context, realm string, ids []string) ([]Record, error) {
	var out []Record
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
	impl := &echoProvider{records: map[string]Record{}}
	conn, err := ServeInProcess(ctx, impl, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.Info().Name; got != "echo" {
		t.Fatalf("Info name = %q", got)
	}
	if err := conn.Configure(ctx, json.RawMessage(`{"bogus":1}`)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad config: err = %v, want ErrInvalid", err)
	}
	if err := conn.Configure(ctx, nil); err != nil {
		t.Fatal(err)
	}
	p, err := conn.Provider()
	if err != nil {
		t.Fatal(err)
	}
	caps := CapabilitiesOf(p)
	if !caps.Has(CapWrite) || caps.Has(CapForget) {
		t.Fatalf("capabilities = %v, want write and fetch only", caps)
	}
	if _, err := p.Forget(ctx, "default", []string{"x"}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("undeclared Forget: err = %v, want ErrUnsupported", err)
	}
	when := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	ids, err := p.Remember(ctx, "default", []Record{{Scope: IdentityScope("alice"), Kind: KindFact, Title: "t", Body: "b", Tags: []string{"x"}, ExpiresAt: when}})
	if err != nil || len(ids) != 1 {
		t.Fatalf("Remember = %v, %v", ids, err)
	}
	got, err := p.Get(ctx, "default", ids)
	if err != nil || len(got) != 1 {
		t.Fatalf("Get = %v, %v", got, err)
	}
	if r := got[0]; r.Title != "t" || r.Body != "b" || !r.ExpiresAt.Equal(when) || r.Tags[0] != "x" || r.ContentHash != ContentHash("t", "b") {
		t.Fatalf("record did not survive the round trip: %+v", r)
	}
	_, err = p.Remember(ctx, "default", []Record{{Scope: "nope", Kind: KindFact, Title: "t"}})
	var fe *FieldError
	if !errors.Is(err, ErrInvalid) || errors.As(err, &fe) {
		// FieldError is a plugin-side type; across the wire only the class and message survive.
		t.Fatalf("bad scope: err = %v, want ErrInvalid", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := p.Recall(dctx, RecallQuery{Realm: "default", Query: "slow"}); !errors.Is(err, ErrDeadline) {
		t.Fatalf("deadline: err = %v, want ErrDeadline", err)
	}
}

func TestCheckPluginRefusesFalseDeclarations(t *testing.T) {
	p := &lyingProvider{}
	if err := CheckPlugin(p); err == nil {
		t.Fatal("CheckPlugin accepted a plugin declaring a capability it does not implement")
	}
}

type lyingProvider struct{}

func (lyingProvider) Info() Info {
	return Info{Name: "liar", Version: "1.0.0", Kinds: []PluginKind{KindProvider}, Protocols: []int{1}, Capabilities: Capabilities{CapManifest}}
}
func (lyingProvider) Configure(context.Context, json.RawMessage) error   { return nil }
func (lyingProvider) Recall(context.Context, RecallQuery) ([]Hit, error) { return nil, nil }
