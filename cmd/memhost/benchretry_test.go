package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/bench"
)

// TestBenchWritesRetry: a bench write or recall answered 503 or 504 (a
// provider call outlasting the host's timeout on a loaded machine) is
// tried again, up to writeAttempts times, since a duplicate record answers
// the existing id and a recall changes nothing; any other failure is not
// retried.
func TestBenchWritesRetry(t *testing.T) {
	defer func(w time.Duration) { writeRetryWait = w }(writeRetryWait)
	writeRetryWait = time.Millisecond
	ops := []struct {
		name   string
		answer string
		call   func(b *benchHost) ([]string, error)
	}{
		{"write", `{"ids":["r1"]}`, func(b *benchHost) ([]string, error) {
			return b.Remember(context.Background(), "default", []bench.Record{{Scope: "realm", Body: "x"}})
		}},
		{"recall", `{"hits":[{"record":{"id":"r1"}}]}`, func(b *benchHost) ([]string, error) {
			return b.Recall(context.Background(), "default", "ann", "x", 10, time.Time{})
		}},
	}
	for _, op := range ops {
		for _, tc := range []struct {
			name     string
			statuses []int // answered in turn, then 200
			tries    int
			ok       bool
		}{
			{"at once", nil, 1, true},
			{"after two timeouts", []int{504, 503}, 3, true},
			{"timeouts throughout", []int{504, 504, 504, 504}, writeAttempts, false},
			{"bad request", []int{400}, 1, false},
			{"server error", []int{500}, 1, false},
		} {
			t.Run(op.name+"/"+tc.name, func(t *testing.T) {
				var tries atomic.Int32
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					n := int(tries.Add(1))
					if n <= len(tc.statuses) {
						http.Error(w, `{"error":{"code":"deadline_exceeded"}}`, tc.statuses[n-1])
						return
					}
					fmt.Fprint(w, op.answer)
				}))
				defer srv.Close()
				ids, err := op.call(&benchHost{base: srv.URL, client: srv.Client()})
				if int(tries.Load()) != tc.tries || (err == nil) != tc.ok {
					t.Fatalf("%d tries, error %v; want %d tries, success %v", tries.Load(), err, tc.tries, tc.ok)
				}
				if tc.ok && (len(ids) != 1 || ids[0] != "r1") {
					t.Fatalf("ids %q, want [r1]", ids)
				}
			})
		}
	}
}

// TestBenchRetryEndsWithItsContext: a write waiting to be tried again
// gives up when its caller's context ends.
func TestBenchRetryEndsWithItsContext(t *testing.T) {
	defer func(w time.Duration) { writeRetryWait = w }(writeRetryWait)
	writeRetryWait = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	var tries atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- retried(ctx, func() error {
			tries.Add(1)
			return &benchHTTPError{path: "/v1/records", status: 504}
		})
	}()
	for tries.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err == nil || tries.Load() != 1 {
			t.Fatalf("after cancel: %v after %d tries, want the 504 after 1", err, tries.Load())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the retry kept waiting after its context ended")
	}
}

// TestBenchInjectRefusesAFailedRecall: an injection the host answered
// empty because its recall failed or timed out (skip_reason recall_failed,
// the default recall_failure_policy) is tried again as a recall is, and
// fails the question when it keeps failing, rather than scoring as a turn
// that delivered no evidence; the other empty answers are measurements.
func TestBenchInjectRefusesAFailedRecall(t *testing.T) {
	defer func(w time.Duration) { writeRetryWait = w }(writeRetryWait)
	writeRetryWait = time.Millisecond
	const failed = `{"injected_context":[],"skip_reason":"recall_failed","bytes":0,"record_ids":[]}`
	for _, tc := range []struct {
		name    string
		answers []string // answered in turn, the last one from then on
		tries   int
		ok      bool
	}{
		{"injected", []string{`{"injected_context":["x"],"skip_reason":null,"bytes":1,"record_ids":["r1"]}`}, 1, true},
		{"no records", []string{`{"injected_context":[],"skip_reason":"no_records","bytes":0,"record_ids":[]}`}, 1, true},
		{"budget exhausted", []string{`{"injected_context":[],"skip_reason":"budget_exhausted","bytes":0,"record_ids":[]}`}, 1, true},
		{"recall failed once", []string{failed, `{"injected_context":["x"],"bytes":1,"record_ids":["r1"]}`}, 2, true},
		{"recall failed throughout", []string{failed}, writeAttempts, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tries atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := int(tries.Add(1))
				fmt.Fprint(w, tc.answers[min(n, len(tc.answers))-1])
			}))
			defer srv.Close()
			b := &benchHost{base: srv.URL, client: srv.Client()}
			_, err := b.Inject(context.Background(), "default", "ann", "s1", "x", time.Time{})
			if int(tries.Load()) != tc.tries || (err == nil) != tc.ok {
				t.Fatalf("%d tries, error %v; want %d tries, success %v", tries.Load(), err, tc.tries, tc.ok)
			}
		})
	}
}
