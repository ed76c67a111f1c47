package host_test

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
	"github.com/memhost/memhost/sdk/host"
)

// reindexPlugin answers Reindex by realm: "slow" waits for its ctx, "busy"
// refuses, anything else reports five steps from a goroutine of its own
// and answers 5 (7 for every realm).
type reindexPlugin struct {
	declare bool
	mu      sync.Mutex
	asked   []string
}

func (p *reindexPlugin) Info() sdk.Info {
	info := sdk.Info{Name: "rx", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindProvider}, Protocols: []int{1}}
	if p.declare {
		info.Capabilities = sdk.Capabilities{sdk.CapReindex}
	}
	return info
}
func (p *reindexPlugin) Configure(context.Context, json.RawMessage) error           { return nil }
func (p *reindexPlugin) Recall(context.Context, sdk.RecallQuery) ([]sdk.Hit, error) { return nil, nil }

func (p *reindexPlugin) Reindex(ctx context.Context, realm string, progress func(done, total int)) (int, error) {
	p.mu.Lock()
	p.asked = append(p.asked, realm)
	p.mu.Unlock()
	switch realm {
	case "slow":
		<-ctx.Done()
		return 0, ctx.Err()
	case "busy":
		return 0, fmt.Errorf("rx: the index is being rebuilt by another caller: %w", sdk.ErrConflict)
	case "":
		return 7, nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 6 {
			progress(i, 5)
		}
	}()
	<-done
	return 5, nil
}

func serveReindex(t *testing.T, declare bool) (*reindexPlugin, *host.Provider) {
	t.Helper()
	impl := &reindexPlugin{declare: declare}
	conn, err := host.ServeInProcess(t.Context(), impl, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.Configure(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	p, err := conn.Provider()
	if err != nil {
		t.Fatal(err)
	}
	return impl, p
}

func TestReindexClient(t *testing.T) {
	impl, p := serveReindex(t, true)
	rx, ok := p.Reindexer()
	if !ok {
		t.Fatal("the client of a plugin declaring reindex answers no Reindexer")
	}
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		limit time.Duration // a deadline this far ahead, set when the case starts
		realm string
		n     int
		err   error  // the sentinel wanted, nil for success
		msg   string // in the error's text
		asked bool   // the plugin was called
	}{
		{name: "progress then count", realm: "acme", n: 5, asked: true},
		{name: "every realm", realm: "", n: 7, asked: true},
		{name: "bad realm refused before the plugin", realm: "Not A Realm", err: sdk.ErrInvalid},
		{name: "plugin's refusal keeps its sentinel and text", realm: "busy", err: sdk.ErrConflict, msg: "another caller", asked: true},
		{name: "caller's deadline", limit: time.Second, realm: "slow", err: sdk.ErrDeadline, asked: true},
		{name: "caller's cancellation", ctx: canceled, realm: "slow", err: context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = t.Context()
			}
			if tc.limit > 0 {
				// Started here, not before the table: the cases before it
				// may take longer than any short deadline on a busy machine.
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.limit)
				defer cancel()
			}
			impl.mu.Lock()
			impl.asked = nil
			impl.mu.Unlock()
			var mu sync.Mutex
			var reports [][2]int
			n, err := rx.Reindex(ctx, tc.realm, func(done, total int) {
				mu.Lock()
				reports = append(reports, [2]int{done, total})
				mu.Unlock()
			})
			if tc.err == nil {
				if err != nil || n != tc.n {
					t.Fatalf("Reindex(%q) = %d, %v; want %d", tc.realm, n, err, tc.n)
				}
			} else if !errors.Is(err, tc.err) || !strings.Contains(fmt.Sprint(err), tc.msg) {
				t.Fatalf("Reindex(%q) = %d, %v; want an error wrapping %v saying %q", tc.realm, n, err, tc.err, tc.msg)
			}
			impl.mu.Lock()
			asked := slices.Contains(impl.asked, tc.realm)
			impl.mu.Unlock()
			if asked != tc.asked {
				t.Errorf("plugin asked = %v, want %v", asked, tc.asked)
			}
			if tc.realm == "acme" {
				// Coalesced on the way, so not every step arrives; but in
				// order, and the last is the final count.
				mu.Lock()
				defer mu.Unlock()
				if len(reports) == 0 || reports[len(reports)-1] != [2]int{5, 5} ||
					!slices.IsSortedFunc(reports, func(a, b [2]int) int { return a[0] - b[0] }) {
					t.Errorf("progress %v, want ascending reports ending at 5 of 5", reports)
				}
			}
		})
	}
}

// TestReindexUndeclared: a plugin that implements Reindex without
// declaring it is not offered as a Reindexer, and a client made to call it
// anyway refuses without a round trip.
func TestReindexUndeclared(t *testing.T) {
	impl, p := serveReindex(t, false)
	if _, ok := p.Reindexer(); ok {
		t.Fatal("Reindexer answers true for a plugin that did not declare it")
	}
	if _, err := conformance.Served(t, impl).Reindex(t.Context(), "acme", nil); !errors.Is(err, sdk.ErrUnsupported) {
		t.Fatalf("undeclared Reindex = %v, want sdk.ErrUnsupported", err)
	}
	if len(impl.asked) != 0 {
		t.Fatalf("the plugin was called for an undeclared capability: %v", impl.asked)
	}
}
