package main

import (
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestHotRecordUsesCountedInOneCall: through `memhost serve` with the real
// sqlite plugin, a record injected by every one of many concurrent turns
// is counted once per turn, and the telemetry writer sends the sqlite
// plugin (which declares usage_counts) its uses as counts, not one
// MarkUsed round per repeat: a record that every turn injects no longer
// costs a provider call per turn.
func TestHotRecordUsesCountedInOneCall(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`))
	ids := remember(t, m, map[string]any{"scope": "identity:alice", "kind": "fact", "title": "House rules", "body": "Quiet hours start at ten."})
	const turns, workers = 40, 8
	var wg sync.WaitGroup
	errs := make(chan string, turns)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < turns; i += workers {
				var out turnAnswer
				body := map[string]any{"identity": map[string]string{"id": "alice"}, "session": fmt.Sprintf("s%d", i), "content": "what are the house rules?"}
				if code := m.do("POST", "/v1/turns/inject", body, &out); code != 200 || len(out.RecordIDs) != 1 {
					errs <- fmt.Sprintf("turn %d = %d, injected %v", i, code, out.RecordIDs)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	var rec struct {
		UseCount int64 `json:"use_count"`
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if code := m.do("GET", "/v1/records/"+ids[0], nil, &rec); code != 200 {
			t.Fatalf("GET record = %d", code)
		}
		if rec.UseCount == turns || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if rec.UseCount != turns {
		t.Fatalf("use_count %d after %d turns injected the record, want %d", rec.UseCount, turns, turns)
	}
	text := scrape(t, m)
	calls := func(method string) int {
		re := regexp.MustCompile(`memhost_plugin_call_duration_seconds_count\{code="ok",instance="main",method="` + method + `"\} (\d+)`)
		mm := re.FindStringSubmatch(text)
		if mm == nil {
			return 0
		}
		n, _ := strconv.Atoi(mm[1])
		return n
	}
	counted, marked := calls("count_uses"), calls("mark_used")
	if marked != 0 || counted == 0 || counted > turns/2 {
		t.Fatalf("%d count_uses and %d mark_used calls for %d turns sharing one record, want a few count_uses and no mark_used:\n%s",
			counted, marked, turns, grepLines(text, "memhost_plugin_call_duration_seconds_count"))
	}
}
