package coordinator

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// TestRateLimitedLogsAreBoundedAcrossKeys: each rate-limited log writes at
// most maxLogLines lines a minute however many identities or realms it
// sees, and the next line it writes says how many it held back. The skip
// log was once per identity in a cache of 4,096: two rounds of 5,000
// identities in a realm with no records logged 10,000 lines.
func TestRateLimitedLogsAreBoundedAcrossKeys(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		event      func(c *Coordinator, i int)
	}{
		{"skip", "injected nothing", func(c *Coordinator, i int) {
			c.skipped(context.Background(), SurfaceTurn, sdk.Identity{Realm: "default", ID: fmt.Sprint("user", i)}, SkipNoRecords)
		}},
		{"selector fallback", "the selector chose nothing", func(c *Coordinator, i int) {
			c.fellBack(context.Background(), sdk.Identity{Realm: "default", ID: fmt.Sprint("user", i)}, 3)
		}},
		{"defang", "defanged forged memory markers", func(c *Coordinator, i int) {
			c.logDefanged(sdk.Identity{Realm: "default", ID: fmt.Sprint("user", i)}, 1)
		}},
		{"scope fault", "outside the scopes it was asked for", func(c *Coordinator, i int) {
			c.outOfScope(context.Background(), sdk.Identity{Realm: fmt.Sprint("realm", i), ID: "alice"}, faultRecall, 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := testNow
			f := newFixture(t, func(_ *Config, o *Options) { o.Now = func() time.Time { return now } })
			lines := func() int { return strings.Count(f.logs.String(), tc.line) }
			const keys = 5000
			for round := range 2 {
				for i := range keys {
					tc.event(f.c, i)
				}
				if n := lines(); n != maxLogLines {
					t.Fatalf("round %d of %d keys in one minute logged %d lines, want %d", round+1, keys, n, maxLogLines)
				}
			}
			now = now.Add(tallyMinute)
			tc.event(f.c, keys)
			logs := f.logs.String()
			// Every key held back at least once (some twice: past the
			// limiter's memory a key is new again).
			m := regexp.MustCompile(`lines_held_back=(\d+)`).FindStringSubmatch(logs)
			if n := lines(); n != maxLogLines+1 || m == nil || atoi(t, m[1]) < keys-maxLogLines {
				t.Fatalf("a minute later: %d lines, want %d, the last holding back at least %d:\n%s", n, maxLogLines+1, keys-maxLogLines, logs[max(0, len(logs)-600):])
			}
		})
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
