package httpapi

import (
	"time"

	"github.com/memhost/memhost/internal/proposal"
	"github.com/memhost/memhost/sdk"
)

// A record's use_count and last_used_at (and a manifest row's rank, which
// is derived from them) count every turn that injected or recalled it,
// whoever's. A record in a shared scope (mob, operator, realm) is used by
// every identity that reads the scope, so its counters tell when another
// identity's private turn touched it, to the millisecond. Only an
// application, which runs the host and reviews memory, is shown them; any
// other caller sees such a record as never used: use_count 0, no
// last_used_at, rank 0. A record in an identity scope keeps them: only
// that identity's own turns read it.
//
// Every answer that carries a record, hit or manifest row to a caller
// goes through one of the functions below.

// seesUsage reports whether c may see the usage of a record in scope sc.
// An unparsable scope counts as shared.
func (c caller) seesUsage(sc sdk.Scope) bool {
	return c.application() || !proposal.Shared(sc)
}

// ownUsage clears r's usage when c may not see it.
func (c caller) ownUsage(r *sdk.Record) {
	if !c.seesUsage(r.Scope) {
		r.UseCount, r.LastUsedAt = 0, time.Time{}
	}
}

// ownUsageHits is ownUsage over hits, in place: the recall path allocates
// nothing for it.
func (c caller) ownUsageHits(hits []sdk.Hit) {
	if c.application() {
		return
	}
	for i := range hits {
		c.ownUsage(&hits[i].Record)
	}
}

// ownUsageRows clears the rank of the manifest rows whose usage c may not
// see. The working set's order still follows every identity's use: a
// ranked row comes before the unranked ones (see docs/api.md).
func (c caller) ownUsageRows(rows []sdk.ManifestRow) {
	if c.application() {
		return
	}
	for i := range rows {
		if !c.seesUsage(rows[i].Scope) {
			rows[i].Rank = 0
		}
	}
}
