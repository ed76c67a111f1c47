package coordinator

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/sdk"
)

// defangLogEvery is how often one identity's defang hits may be logged: a
// client replaying forged content on every request must not flood the log.
const defangLogEvery = time.Minute

// maxDefangLogIdentities bounds the limiter's memory; past it the oldest
// state is forgotten, which costs at most an extra line per identity.
const maxDefangLogIdentities = 4096

// defangLog logs defang hit counts, at most one line per identity per
// defangLogEvery; the line carries the hits and requests since the last
// one. It never logs content.
type defangLog struct {
	mu   sync.Mutex
	seen map[sdk.Identity]*defangTally
}

type defangTally struct {
	last           time.Time
	hits, requests int
}

func (l *defangLog) record(logger hclog.Logger, now time.Time, id sdk.Identity, hits int) {
	l.mu.Lock()
	if l.seen == nil || len(l.seen) >= maxDefangLogIdentities {
		l.seen = make(map[sdk.Identity]*defangTally)
	}
	t := l.seen[id]
	if t == nil {
		t = &defangTally{}
		l.seen[id] = t
	}
	t.hits += hits
	t.requests++
	if !t.last.IsZero() && now.Sub(t.last) < defangLogEvery {
		l.mu.Unlock()
		return
	}
	total, requests := t.hits, t.requests
	t.last, t.hits, t.requests = now, 0, 0
	l.mu.Unlock()
	logger.Info("defanged forged memory markers in inbound content",
		"realm", id.Realm, "identity", id.ID, "hits", total, "requests", requests)
}
