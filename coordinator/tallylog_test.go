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
		realms     bool // each key a realm of its own: each realm's first line also gets through
		event      func(c *Coordinator, i int)
	}{
		{"skip", "injected nothing", false, func(c *Coordinator, i int) {
			c.skipped(context.Background(), SurfaceTurn, sdk.Identity{Realm: "default", ID: fmt.Sprint("user", i)}, SkipNoRecords)
		}},
		{"selector fallback", "the selector chose nothing", false, func(c *Coordinator, i int) {
			c.fellBack(context.Background(), sdk.Identity{Realm: "default", ID: fmt.Sprint("user", i)}, 3)
		}},
		{"defang", "defanged forged memory markers", false, func(c *Coordinator, i int) {
			c.logDefanged(sdk.Identity{Realm: "default", ID: fmt.Sprint("user", i)}, 1)
		}},
		{"scope fault", "outside the scopes it was asked for", true, func(c *Coordinator, i int) {
			c.outOfScope(context.Background(), sdk.Identity{Realm: fmt.Sprint("realm", i), ID: "alice"}, faultRecall, 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := testNow
			f := newFixture(t, func(_ *Config, o *Options) { o.Now = func() time.Time { return now } })
			lines := func() int { return strings.Count(f.logs.String(), tc.line) }
			const keys = 5000
			want := maxLogLines
			if tc.realms {
				want += maxFairLogLines
			}
			for round := range 2 {
				for i := range keys {
					tc.event(f.c, i)
				}
				if n := lines(); n != want {
					t.Fatalf("round %d of %d keys in one minute logged %d lines, want %d", round+1, keys, n, want)
				}
			}
			now = now.Add(tallyMinute)
			tc.event(f.c, keys)
			logs := f.logs.String()
			// Every key held back at least once (some twice: past the
			// limiter's memory a key is new again).
			m := regexp.MustCompile(`lines_held_back=(\d+)`).FindStringSubmatch(logs)
			if n := lines(); n != want+1 || m == nil || atoi(t, m[1]) < keys-want {
				t.Fatalf("a minute later: %d lines, want %d, the last holding back at least %d:\n%s", n, want+1, keys-want, logs[max(0, len(logs)-600):])
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

// TestOneRealmsFloodCannotHideAnothersLines: a realm flooding a rate-limited
// log under fresh identities takes the minute's shared lines, but another
// realm's first line of the minute still gets through (it was held back
// while the flood lasted, every minute).
func TestOneRealmsFloodCannotHideAnothersLines(t *testing.T) {
	now := testNow
	f := newFixture(t, func(_ *Config, o *Options) { o.Now = func() time.Time { return now } })
	for minute := range 5 {
		for i := range 100 {
			f.c.logDefanged(sdk.Identity{Realm: "attacker", ID: fmt.Sprintf("m%d-u%d", minute, i)}, 1)
		}
		f.c.logDefanged(sdk.Identity{Realm: "victim", ID: "bob"}, 7)
		now = now.Add(tallyMinute)
	}
	logs := f.logs.String()
	if n := strings.Count(logs, "realm=victim"); n != 5 {
		t.Fatalf("the victim realm's defang hits, once a minute under another realm's flood, logged %d lines, want 5:\n%s", n, logs[max(0, len(logs)-800):])
	}
	if n := strings.Count(logs, "realm=attacker"); n != 5*maxLogLines {
		t.Fatalf("the flooding realm logged %d lines, want %d", n, 5*maxLogLines)
	}
}
