package compaction

import (
	"context"
	"errors"
	"testing"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/sdk"
)

// TestArtifactWithoutTextIsEmpty: an artifact a model would read as
// nothing (zero-width characters, a byte-order mark, controls, invalid
// bytes, Unicode spaces) is refused as empty and the watermark stays.
// Accepted, it would advance the watermark past messages the summary does
// not hold: the conversation's history would be silently gone from every
// later turn.
func TestArtifactWithoutTextIsEmpty(t *testing.T) {
	coord, err := coordinator.New(coordinator.DefaultConfig(), coordinator.Options{Providers: coordinator.RealmProviders{}})
	if err != nil {
		t.Fatal(err)
	}
	defer coord.Close(context.Background())
	cases := []struct {
		name    string
		content string
		empty   bool
	}{
		{"whitespace", " \t\r\n", true},
		{"unicode spaces", "\u00a0\u3000\u2028\u2029", true},
		{"zero-width space", "\u200b\u200b", true},
		{"byte-order mark and word joiner", "\ufeff\u2060\u200d \n", true},
		{"controls", "\x00\x07\x1b", true},
		{"invalid bytes", "\xff\xfe", true},
		{"replacement characters", "\ufffd\ufffd", true},
		{"text behind a zero-width space", "\u200bdecided: ship friday", false},
		{"one symbol", "✓", false},
		{"cjk", "决定", false},
		{"punctuation", "-", false},
	}
	for _, renderer := range []Renderer{nil, coord} {
		for _, tc := range cases {
			name := tc.name
			if renderer != nil {
				name += " rendered"
			}
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				store := NewMemoryStore()
				s := New(Options{Compactor: &echoCompactor{art: sdk.Message{Role: "assistant", Content: tc.content}}, Store: store, Renderer: renderer})
				_, err := s.Compact(ctx, req("a", "b"))
				st, found, _ := store.Load(ctx, Key{"default", "alice", "c1"})
				if !tc.empty {
					if err != nil || st.Watermark != 2 {
						t.Fatalf("a summary with text was refused: %v (watermark %d)", err, st.Watermark)
					}
					return
				}
				if !errors.Is(err, ErrEmpty) {
					t.Fatalf("error %v, want the empty-artifact error", err)
				}
				if code, _ := CodeOf(err); code != CodeEmpty {
					t.Errorf("code %q, want %q", code, CodeEmpty)
				}
				if found {
					t.Errorf("state saved from an empty artifact: %+v", st)
				}
			})
		}
	}
}
