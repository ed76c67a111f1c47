package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/memhost/memhost/sdk"
)

var _ sdk.Reindexer = (*Store)(nil)

// Reindex rebuilds the recall index of realm ("" for every realm) from the
// records table and swaps it in (sdk.Reindexer). Recall and writes go on
// meanwhile: recall answers from the old index until the swap, and writes
// committed during the rebuild are replayed onto the new one before it, so
// nothing is lost between the two. The snapshot file is then rewritten
// (beside the old one, renamed over it).
func (s *Store) Reindex(ctx context.Context, realm string, progress func(done, total int)) (int, error) {
	var n int
	err := s.use(func(db *database) (err error) {
		n, err = db.reindex(ctx, realm, progress)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: reindex: %w", err)
	}
	return n, nil
}

// reindexTap holds the index changes committed after a reindex's read
// began, in commit order.
type reindexTap struct{ ops []indexOp }

// reindexReader keys a reindex's read at the read slots (acquireRead):
// no realm is named so (a realm name has no spaces).
const reindexReader = "reindex "

// progressGap spaces the progress reports of a rebuild.
const progressGap = 100 * time.Millisecond

func (d *database) reindex(ctx context.Context, realm string, progress func(done, total int)) (int, error) {
	// One at a time; a second waits, as the host already refuses a second
	// of one realm and a canceled one ends within a batch.
	select {
	case d.reindexing <- struct{}{}:
		defer func() { <-d.reindexing }()
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	// The rebuild reads on one of the read connections, admitted as recall
	// is, so recall keeps the other. It holds it for the whole rebuild, so
	// it waits and holds as no realm's: counted as the realm's, the realm
	// would hold a connection all along, and its recalls would wait for
	// every read of a realm holding fewer.
	release, err := d.acquireRead(ctx, reindexReader)
	if err != nil {
		return 0, err
	}
	defer release()
	tx, err := d.r.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	total, err := d.beginReindexRead(ctx, tx, realm)
	if err != nil {
		return 0, err
	}
	defer func() {
		d.imu.Lock()
		d.tap = nil
		d.imu.Unlock()
	}()
	report := func(done, total int) {}
	if progress != nil {
		var last time.Time
		report = func(done, total int) {
			if now := time.Now(); now.Sub(last) >= progressGap || done == total {
				last = now
				progress(done, total)
			}
		}
	}
	report(0, total)
	ix, n, err := rebuildIndex(ctx, tx, realm, func(done int) { report(done, total) })
	if err != nil {
		return 0, err
	}
	// The read snapshot is no longer needed; WAL may checkpoint past it.
	_ = tx.Rollback()
	if err := ctx.Err(); err != nil {
		return 0, err
	}

	d.smu.Lock()
	defer d.smu.Unlock()
	d.wmu.Lock()
	defer d.wmu.Unlock()
	d.imu.Lock()
	defer d.imu.Unlock()
	// Every commit before wmu is in the tap once applied.
	d.applyPendingLocked()
	var replay []indexOp
	for _, op := range d.tap.ops {
		if r := op.realm; realm == "" || r == realm || (!op.del && op.doc.Realm == realm) {
			replay = append(replay, op)
		}
	}
	d.tap = nil
	if err := applyOps(ix, replay); err != nil {
		return 0, err
	}
	if err := d.ix.Replace(ix, realm); err != nil {
		return 0, err
	}
	// Holding both locks with the queue applied, the index is the
	// database's at the applied generation. The swap stands even if the
	// snapshot cannot be written: the next quiet period or open tries
	// again.
	if err := d.writeSnapshot(d.appliedGen.Load()); err != nil {
		d.snapGen = noSnapshot
		d.log.WarnContext(ctx, "reindexed, but the index snapshot was not written; the next open may rebuild it", "error", err.Error())
	}
	return n, nil
}

// beginReindexRead counts the records to index in tx, which fixes tx's
// read snapshot, and starts the tap, at one instant: it holds the write
// lock, so no commit falls between the snapshot and the tap, and it
// applies the changes still queued before the tap starts, as theirs are
// in the snapshot already.
func (d *database) beginReindexRead(ctx context.Context, tx *sql.Tx, realm string) (int, error) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	var total int
	from, args := activeRecords(realm)
	if err := tx.QueryRowContext(ctx, `SELECT count(*)`+from, args...).Scan(&total); err != nil {
		return 0, fmt.Errorf("count records: %w", err)
	}
	d.imu.Lock()
	// Changes committed before the count are in tx's read snapshot:
	// applied now, they stay out of the tap.
	d.applyPendingLocked()
	d.tap = &reindexTap{}
	d.imu.Unlock()
	return total, nil
}
