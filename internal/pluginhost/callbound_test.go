package pluginhost

import (
	"testing"
	"time"
)

// TestCallBound: from an outside review. A caller with a few milliseconds
// left was told its deadline "had passed before the call began", since
// what was left was rounded to 10ms, to 0, before it was asked whether any
// was; the bound a call had is said as it was, never as none.
func TestCallBound(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, c := range []struct {
		name      string
		left      time.Duration // 0 with none: no deadline of the caller's
		none      bool
		timeout   time.Duration
		wantBound time.Duration
		wantSpent bool
	}{
		{"no deadline of the caller's", 0, true, 3 * time.Second, 3 * time.Second, false},
		{"a later deadline", time.Minute, false, 3 * time.Second, 3 * time.Second, false},
		{"a sooner deadline, rounded", 2999871 * time.Microsecond, false, time.Minute, 3 * time.Second, false},
		{"400ms left", 399 * time.Millisecond, false, time.Minute, 400 * time.Millisecond, false},
		{"4ms left", 4 * time.Millisecond, false, time.Minute, 4 * time.Millisecond, false},
		{"300µs left", 300 * time.Microsecond, false, time.Minute, 300 * time.Microsecond, false},
		{"none left", 0, false, time.Minute, 0, true},
		{"passed a second ago", -time.Second, false, time.Minute, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			bound, spent := callBound(now, now.Add(c.left), !c.none, c.timeout)
			if bound != c.wantBound || spent != c.wantSpent {
				t.Errorf("callBound with %v left = %v, spent %v; want %v, spent %v", c.left, bound, spent, c.wantBound, c.wantSpent)
			}
		})
	}
}
