package compaction

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// replayingCompactor honours the idempotency key as the contract says a
// side-effecting compactor may: a key it has answered before is a retry,
// answered with the first artifact. It also notes every key that came
// back with another carry-over, which a retry never does.
type replayingCompactor struct {
	mu     sync.Mutex
	seen   map[string]string // key -> carry-over of its first call
	answer map[string]sdk.Message
	keys   []string
	clash  []string
}

func (r *replayingCompactor) Compact(ctx context.Context, req sdk.CompactRequest) (sdk.Message, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen, r.answer = map[string]string{}, map[string]sdk.Message{}
	}
	carry := ""
	if req.CarryOver != nil {
		carry = req.CarryOver.Content
	}
	r.keys = append(r.keys, req.IdempotencyKey)
	if first, ok := r.seen[req.IdempotencyKey]; ok {
		if first != carry {
			r.clash = append(r.clash, req.IdempotencyKey)
		}
		return r.answer[req.IdempotencyKey], nil
	}
	art, err := (&fakeCompactor{}).Compact(ctx, req)
	if err == nil {
		r.seen[req.IdempotencyKey], r.answer[req.IdempotencyKey] = carry, art
	}
	return art, err
}

// TestIdempotencyKeyNamesTheCallNotJustItsMessages: the same messages
// evicted again later in a conversation (a user answering "yes" twice),
// or twice within one chunked call, are a new compactor call, not a retry
// of the first: a key that names only the slice's messages makes a
// compactor that honours it answer the old artifact, and the summary
// silently drops everything absorbed in between. A real retry (the same
// history compacted again) keeps its key.
func TestIdempotencyKeyNamesTheCallNotJustItsMessages(t *testing.T) {
	cases := []struct {
		name  string
		opts  Options
		steps [][]string // the evicted list of each request, in order
		want  []string   // what the final summary must still hold
	}{
		{"same message at two positions", Options{},
			[][]string{{"yes"}, {"yes", "ship friday"}, {"yes", "ship friday", "yes"}}, []string{"ship friday"}},
		{"same slice of two messages", Options{},
			[][]string{{"ok", "go"}, {"ok", "go", "plan b"}, {"ok", "go", "plan b", "ok", "go"}}, []string{"plan b"}},
		{"identical chunks of one call", Options{ChunkMessages: 1},
			[][]string{{"yes", "deploy", "yes"}}, []string{"deploy"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			run := func() (*replayingCompactor, Result) {
				comp := &replayingCompactor{}
				opts := tc.opts
				opts.Compactor = comp
				s := New(opts)
				var res Result
				for _, ev := range tc.steps {
					var err error
					if res, err = s.Compact(ctx, req(ev...)); err != nil {
						t.Fatal(err)
					}
				}
				return comp, res
			}
			comp, res := run()
			if len(comp.clash) > 0 {
				t.Errorf("keys %q came back with another carry-over: calls that are no retry share a key", comp.clash)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Artifact.Content, w) {
					t.Errorf("the summary lost %q: %q", w, res.Artifact.Content)
				}
			}
			// The same history compacted afresh is a retry of each call.
			again, _ := run()
			if strings.Join(again.keys, " ") != strings.Join(comp.keys, " ") {
				t.Errorf("a retry changed the keys:\n%q\n%q", comp.keys, again.keys)
			}
			for _, k := range comp.keys {
				if !strings.HasPrefix(k, "default/alice/c1/sha256:") {
					t.Errorf("key %q does not name realm, identity and conversation", k)
				}
			}
		})
	}
}
