package compaction

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/plugins/template"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }

// BenchmarkCompact measures one compaction of a 20-message slice through
// the Service with the SQLite store: with a trivial compactor (the host's
// own cost: validation, hashing, the store), with the template compactor
// in-process, and with the template plugin as a real process over gRPC
// (the difference is the plugin boundary). It reports the median and p99.
// (A benchmark may import a plugin; the package itself never does.)
//
//	go test -run '^$' -bench Compact -benchtime 500x ./internal/compaction/
func BenchmarkCompact(b *testing.B) {
	ctx := context.Background()
	slice := make([]sdk.Message, 20)
	for i := range slice {
		slice[i] = sdk.Message{Role: "user", Content: fmt.Sprintf("message %d: please always keep the release notes tidy and short", i)}
	}
	conn := launchTemplate(b)
	plugin, err := conn.Compactor()
	if err != nil {
		b.Fatal(err)
	}
	inProcess := template.New()
	if err := inProcess.Configure(ctx, []byte(`{}`)); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		c    sdk.Compactor
	}{
		{"host-only", &fakeCompactor{}},
		{"template-in-process", inProcess},
		{"template-plugin", plugin},
	} {
		b.Run(tc.name, func(b *testing.B) {
			store, err := NewSQLStore(ctx, openDB(b, filepath.Join(b.TempDir(), "state.db")))
			if err != nil {
				b.Fatal(err)
			}
			s := New(Options{Compactor: tc.c, Store: store})
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				if _, err := s.Compact(ctx, Request{Identity: alice, Conversation: fmt.Sprint("bench-", i), Evicted: slice}); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(start))
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(times[len(times)*99/100].Microseconds()), "p99-µs")
		})
	}
}

func launchTemplate(b *testing.B) *host.Conn {
	b.Helper()
	bin := testbin.Build(b, "./plugins/template/cmd/memhost-plugin-template")
	data, err := os.ReadFile(bin)
	if err != nil {
		b.Fatal(err)
	}
	sum := sha256.Sum256(data)
	conn, err := host.Launch(context.Background(), host.LaunchOptions{Name: "template", Path: bin, SHA256: sum[:], Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(conn.Close)
	if err := conn.Configure(context.Background(), []byte(`{}`)); err != nil {
		b.Fatal(err)
	}
	return conn
}
