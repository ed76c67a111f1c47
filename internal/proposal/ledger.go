package proposal

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/memhost/memhost/sdk"
)

// ErrTooMany refuses a proposal that would take its proposer's pending
// proposals in a realm beyond the configured bound. The API answers it
// 429 with a Retry-After: an application reviewing the queue makes room.
var ErrTooMany = errors.New("too many pending proposals")

// Entry is the host's note of one pending proposal: who proposed it. The
// record itself lives in the realm's provider.
type Entry struct {
	Realm string `json:"realm"`
	ID    string `json:"id"`
	// Proposer is the agent token's name ("" when the host runs without
	// tokens, ImportedProposer for a proposal no agent of this host left);
	// Identity the agent identity that acted, when known.
	Proposer  string    `json:"proposer"`
	Identity  string    `json:"identity,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Held is what a review took out of the store and had not written
	// back when it was last heard of (Ledger.Hold); Lookup and Reap
	// answer it, nil when there is none.
	Held []byte `json:"-"`
}

// Ledger keeps the pending proposals of every realm, so they can be
// listed, bounded per proposer and attributed without scanning a
// provider. The host's state database keeps one (NewSQLLedger); a shared
// PostgreSQL state keeps another (internal/pgstate).
type Ledger interface {
	// Add notes entries, all of one realm and proposer, unless that
	// proposer would then have more than max pending in the realm
	// (ErrTooMany, nothing noted). An id the realm already notes, or
	// one the batch holds twice, is AlreadyNoted and nothing is noted: a
	// second proposal must not take over the first one's entry, nor its
	// failure drop it. The check and the insert are atomic.
	Add(ctx context.Context, entries []Entry, max int) error
	// Remove drops the entries of ids; unknown ids are no error.
	Remove(ctx context.Context, realm string, ids []string) error
	// Reap drops the entries of ids, whose records were found gone,
	// except those noted or claimed less than ClaimTTL before now: a
	// proposal is noted before it is stored, and a review takes it out of
	// the store for a moment and may put it back. An entry holding what a
	// review took out (Hold) is not dropped but answered, for the caller
	// to restore: that review did not end.
	Reap(ctx context.Context, realm string, ids []string, now time.Time) ([]Entry, error)
	// List answers up to limit entries of realm, oldest first (by
	// created time, then id), placed after the cursor after (the zero
	// Cursor from the start), and how many are pending in all. The cursor
	// is a place, not an entry: it holds when its entry is gone.
	List(ctx context.Context, realm string, after Cursor, limit int) ([]Entry, int, error)
	// Lookup answers the entry of id, if any.
	Lookup(ctx context.Context, realm, id string) (Entry, bool, error)
	// Proposed answers up to limit entries of proposer in realm, oldest
	// first: those that count against its bound.
	Proposed(ctx context.Context, realm, proposer string, limit int) ([]Entry, error)
	// Counts answers the pending proposals per realm.
	Counts(ctx context.Context) (map[string]int, error)
	// Claim marks the proposal id of realm as under review as of now,
	// atomically across every host on the ledger, and reports whether it
	// did: false while another claim younger than ClaimTTL holds it. A
	// proposal the ledger does not note (an imported one) is noted by its
	// claim, and noted says so. A review ends in Remove, or when it failed
	// in Release (Remove for an id its claim noted).
	Claim(ctx context.Context, realm, id string, now time.Time) (claimed, noted bool, err error)
	// Release drops the claim on e's id, which stays noted as e: pending
	// again. An entry dropped meanwhile is noted again, so a proposal put
	// back in the store after a failed review is listed and counted. What
	// the entry held (Hold) is dropped.
	Release(ctx context.Context, e Entry) error
	// Hold keeps held with the claimed entry of id: what its review takes
	// out of the store before writing it elsewhere (an approval over a
	// record forgets the proposal, then supersedes the record). Should the
	// host die between the two, the entry keeps it, and Lookup and Reap
	// answer it to be restored.
	Hold(ctx context.Context, realm, id string, held []byte) error
}

// ImportedProposer is the proposer noted for a pending proposal no agent
// of this host left (an imported one, or one a claim noted): no token or
// tokenless caller has the name (names hold no ':'), so such proposals
// count against no agent's bound.
const ImportedProposer = ":imported"

// ClaimTTL is how long a claim holds a proposal: past any review's
// deadline, so a claim its host died holding does not hold it for ever.
const ClaimTTL = 10 * time.Minute

// AlreadyNoted is the refusal of Add for an id its realm's ledger holds
// already, the same from every ledger.
func AlreadyNoted(realm, id string) error {
	return fmt.Errorf("a proposal %q is already pending in realm %q; propose under another id: %w", id, realm, sdk.ErrConflict)
}

// Cursor is a place in a realm's queue: just after the entry created at
// CreatedMS (Unix milliseconds) with ID. The zero Cursor is the start.
// It names the place rather than the entry, so a page after a proposal
// reviewed meanwhile goes on from where that proposal stood.
type Cursor struct {
	CreatedMS int64
	ID        string
}

// After answers the cursor just after e.
func After(e Entry) Cursor { return Cursor{CreatedMS: e.CreatedAt.UnixMilli(), ID: e.ID} }

// String answers the cursor as a listing's next: "" for the start, else
// the created time in Unix milliseconds, a '.' and the id.
func (c Cursor) String() string {
	if c.ID == "" {
		return ""
	}
	return strconv.FormatInt(c.CreatedMS, 10) + "." + c.ID
}

// ErrCursor refuses an after that no listing answered as its next.
var ErrCursor = errors.New("is not a cursor of this queue (pass the next of an earlier answer unchanged)")

// ParseCursor reads a cursor String wrote ("" is the start).
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	ms, id, ok := strings.Cut(s, ".")
	// Negative before 1970: an imported proposal keeps its record's
	// created time.
	digits := strings.TrimPrefix(ms, "-")
	if !ok || digits == "" || len(digits) > 18 || strings.Trim(digits, "0123456789") != "" || sdk.ValidateID(id) != nil {
		return Cursor{}, ErrCursor
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return Cursor{}, ErrCursor
	}
	return Cursor{CreatedMS: n, ID: id}, nil
}
