package coordinator

import (
	"time"

	"github.com/memhost/memhost/sdk"
)

// defangLogEvery is how often one identity's defang hits may be logged: a
// client replaying forged content on every request must not flood the log.
const defangLogEvery = time.Minute

// maxDefangLogIdentities bounds the limiter's memory; past it the oldest
// state is forgotten, which costs at most an extra line per identity.
const maxDefangLogIdentities = 4096

// logDefanged logs defang hit counts, at most one line per identity per
// defangLogEvery; the line carries the hits and requests since the last
// one. It never logs content.
func (c *Coordinator) logDefanged(id sdk.Identity, hits int) {
	if total, requests, held, due := c.defangLog.add(c.now(), id, hits); due {
		c.logger.Info("defanged forged memory markers in inbound content",
			append([]any{"realm", id.Realm, "identity", id.ID, "hits", total, "requests", requests}, heldArgs(held)...)...)
	}
}
