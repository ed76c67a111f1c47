package coordinator

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

var (
	alice = sdk.Identity{Realm: "default", ID: "alice"}
	bob   = sdk.Identity{Realm: "default", ID: "bob"}
	// testNow is the fixed clock of every fixture.
	testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
)

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// recMetrics records every metrics call as a line of text.
type recMetrics struct {
	mu    sync.Mutex
	lines []string
}

func (m *recMetrics) add(format string, args ...any) {
	m.mu.Lock()
	m.lines = append(m.lines, fmt.Sprintf(format, args...))
	m.mu.Unlock()
}

func (m *recMetrics) Injected(s Surface, realm string, bytes, records int) {
	m.add("injected %s %s %d %d", s, realm, bytes, records)
}
func (m *recMetrics) Skipped(s Surface, realm string, r SkipReason) {
	m.add("skipped %s %s %s", s, realm, r)
}
func (m *recMetrics) Recalled(s Surface, realm string, _ time.Duration, code sdk.Code) {
	m.add("recalled %s %s %s", s, realm, code)
}
func (m *recMetrics) Defanged(realm string, hits int)     { m.add("defanged %s %d", realm, hits) }
func (m *recMetrics) TelemetryDropped(kind string, n int) { m.add("dropped %s %d", kind, n) }
func (m *recMetrics) TelemetryFailed(kind string, n int)  { m.add("failed %s %d", kind, n) }

func (m *recMetrics) all() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.lines, "\n")
}

// count answers how many recorded lines start with prefix.
func (m *recMetrics) count(prefix string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, l := range m.lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

type fixture struct {
	t       *testing.T
	p       *coordinatortest.Provider
	c       *Coordinator
	logs    *syncBuffer
	metrics *recMetrics
}

// newFixture builds a coordinator over an in-memory provider holding every
// capability, for realm "default". mutate adjusts config and options.
func newFixture(t *testing.T, mutate func(*Config, *Options)) *fixture {
	t.Helper()
	f := &fixture{t: t, p: coordinatortest.NewProvider(coordinatortest.AllCapabilities...), logs: &syncBuffer{}, metrics: &recMetrics{}}
	f.p.SetNow(func() time.Time { return testNow })
	cfg := DefaultConfig()
	// The most allowed, not the default 500 ms: a turn must not skip as recall_failed
	// because a loaded machine starved the test for half a second. A
	// test of the recall timeout sets its own.
	cfg.RecallTimeout = MaxRecallTimeout
	opts := Options{
		Providers: RealmProviders{"default": f.p},
		Logger:    hclog.New(&hclog.LoggerOptions{Output: f.logs, Level: hclog.Trace}),
		Metrics:   f.metrics,
		Now:       func() time.Time { return testNow },
	}
	if mutate != nil {
		mutate(&cfg, &opts)
	}
	c, err := New(cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.c = c
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return f
}

// add stores records in the default realm.
func (f *fixture) add(recs ...sdk.Record) []string {
	f.t.Helper()
	return f.p.MustAdd("default", recs...)
}

func (f *fixture) turn(id sdk.Identity, session, text string) TurnInjection {
	f.t.Helper()
	res, err := f.c.InjectForTurn(context.Background(), id, session, TextContent(text))
	if err != nil {
		f.t.Fatalf("InjectForTurn(%q): %v", text, err)
	}
	checkTurnShape(f.t, res)
	return res
}

// checkTurnShape asserts the invariants every answer keeps.
func checkTurnShape(t *testing.T, res TurnInjection) {
	t.Helper()
	if res.InjectedContext == nil || res.RecordIDs == nil {
		t.Fatalf("nil slices in %+v: JSON would say null", res)
	}
	if (len(res.InjectedContext) == 0) != (res.SkipReason != SkipNone) {
		t.Fatalf("skip reason %q with %d injected bodies", res.SkipReason, len(res.InjectedContext))
	}
	if res.SkipReason == SkipNone {
		if len(res.InjectedContext) != 1 || len(res.InjectedContext[0]) != res.Bytes || len(res.RecordIDs) == 0 {
			t.Fatalf("inconsistent injection: %d bodies, bytes %d, ids %v", len(res.InjectedContext), res.Bytes, res.RecordIDs)
		}
	} else if res.Bytes != 0 || len(res.RecordIDs) != 0 {
		t.Fatalf("skip %q but bytes %d ids %v", res.SkipReason, res.Bytes, res.RecordIDs)
	}
}

// rec is a fact in alice's scope.
func rec(title, body string, tags ...string) sdk.Record {
	return sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: title, Body: body, Tags: tags}
}

func scoped(scope sdk.Scope, title, body string) sdk.Record {
	return sdk.Record{Scope: scope, Kind: sdk.KindFact, Title: title, Body: body}
}

var nonceRE = regexp.MustCompile(`\[mem-token: ([0-9a-f]{32})\]`)

// nonceOf extracts the nonce of an envelope.
func nonceOf(t *testing.T, text string) string {
	t.Helper()
	m := nonceRE.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no mem-token in %q", text)
	}
	return m[1]
}

func closeCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
