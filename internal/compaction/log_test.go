package compaction

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
)

// steppingClock answers a time one second later on every reading.
type steppingClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *steppingClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

// TestCompactionIsLoggedAtInfo: a compaction's outcome is logged at INFO
// with the messages it absorbed, its chunks and how long it took, so a
// long compaction of many chunks can be followed in a production log;
// before, success was logged at DEBUG only, with no duration.
func TestCompactionIsLoggedAtInfo(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want []string
	}{
		{name: "absorbed", want: []string{"[INFO]", "compacted:", "conversation=c1", "from=0", "to=3", "messages=3", "chunks=2", "duration_ms="}},
		{name: "failed", err: errors.New("model gone"), want: []string{"[WARN]", "compaction failed; watermark kept", "chunk=1", "chunks=2", "duration_ms="}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			clock := &steppingClock{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
			s := New(Options{
				Compactor:     &fakeCompactor{err: tc.err},
				ChunkMessages: 2,
				Logger:        hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info}),
				Now:           clock.now,
			})
			_, err := s.Compact(context.Background(), Request{Identity: alice, Conversation: "c1", Evicted: msgs("a", "b", "c")})
			if (err != nil) != (tc.err != nil) {
				t.Fatalf("compaction answered %v", err)
			}
			line := buf.String()
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("log %q lacks %q", line, w)
				}
			}
			if strings.Contains(line, "duration_ms=0 ") {
				t.Errorf("log %q: the duration is not measured", line)
			}
		})
	}
}
