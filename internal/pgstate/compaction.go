package pgstate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/memhost/memhost/internal/compaction"
)

// Compaction is a compaction.Store shared by every host on the database.
// Save is a compare-and-set on the watermark, as the local store's, so two
// hosts can never both advance a conversation from the same point.
type Compaction struct{ db *DB }

// NewCompaction answers the compaction store on db.
func NewCompaction(db *DB) *Compaction { return &Compaction{db: db} }

func (c *Compaction) Load(ctx context.Context, key compaction.Key) (compaction.State, bool, error) {
	var st compaction.State
	var ms int64
	err := c.db.pool.QueryRow(ctx,
		c.db.q(`SELECT watermark, prefix_hash, artifact_role, artifact_content, updated_at_ms, reset_identity, reset_session
		 FROM compaction_state WHERE realm = $1 AND identity = $2 AND conversation = $3`), key.Realm, key.Identity, key.Conversation,
	).Scan(&st.Watermark, &st.PrefixHash, &st.Artifact.Role, &st.Artifact.Content, &ms, &st.Pending.Identity, &st.Pending.Session)
	if errors.Is(err, pgx.ErrNoRows) {
		return compaction.State{}, false, nil
	}
	if err != nil {
		return compaction.State{}, false, fmt.Errorf("compaction store: load %s: %w", key, classify(err))
	}
	st.UpdatedAt = time.UnixMilli(ms).UTC()
	return st, true, nil
}

func (c *Compaction) Save(ctx context.Context, key compaction.Key, prev int, st compaction.State) error {
	if err := c.save(ctx, c.db.pool, key, prev, st); err != nil {
		return fmt.Errorf("compaction store: save %s: %w", key, err)
	}
	return nil
}

// SaveWith saves st and runs fn in one transaction: fn's context carries
// it, and the session store of the same database joins it (Sessions.Update),
// so a compaction's summary and its session reset commit together.
func (c *Compaction) SaveWith(ctx context.Context, key compaction.Key, prev int, st compaction.State, fn func(context.Context) error) error {
	var err error
	for range maxAttempts {
		err = pgx.BeginFunc(ctx, c.db.pool, func(tx pgx.Tx) error {
			if err := c.save(ctx, tx, key, prev, st); err != nil {
				return err
			}
			return fn(context.WithValue(ctx, txKey{}, &joined{db: c.db, tx: tx}))
		})
		switch sqlState(err) {
		case codeDeadlock, codeSerialization:
			continue
		}
		break
	}
	if err != nil {
		return fmt.Errorf("compaction store: save %s: %w", key, classify(err))
	}
	return nil
}

// execer is what the pool and a transaction share.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// save is the compare-and-set of Save, on the pool or in a transaction.
func (c *Compaction) save(ctx context.Context, ex execer, key compaction.Key, prev int, st compaction.State) error {
	args := []any{st.Watermark, st.PrefixHash, st.Artifact.Role, st.Artifact.Content, st.UpdatedAt.UnixMilli(), st.Pending.Identity, st.Pending.Session, key.Identity, key.Realm, key.Conversation}
	var sql string
	if prev == 0 {
		sql = c.db.q(`INSERT INTO compaction_state AS cs (watermark, prefix_hash, artifact_role, artifact_content, updated_at_ms, reset_identity, reset_session, identity, realm, conversation)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
			ON CONFLICT (realm, identity, conversation) DO UPDATE SET
			  watermark = excluded.watermark, prefix_hash = excluded.prefix_hash,
			  artifact_role = excluded.artifact_role, artifact_content = excluded.artifact_content,
			  updated_at_ms = excluded.updated_at_ms,
			  reset_identity = excluded.reset_identity, reset_session = excluded.reset_session
			WHERE cs.watermark = 0`)
	} else {
		sql = c.db.q(`UPDATE compaction_state SET watermark = $1, prefix_hash = $2, artifact_role = $3, artifact_content = $4, updated_at_ms = $5,
			  reset_identity = $6, reset_session = $7
			WHERE identity = $8 AND realm = $9 AND conversation = $10 AND watermark = $11`)
		args = append(args, prev)
	}
	tag, err := ex.Exec(ctx, sql, args...)
	if err != nil {
		return classify(err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("at watermark %d: %w", prev, compaction.ErrStale)
	}
	return nil
}

// holdPoll is how often a compaction waiting for another host's hold on
// its conversation asks again; holdLease how long a hold outlives its
// holder's last renewal: a host killed holding it (kill -9, a lost
// machine) holds its conversation that long, not until its request's
// deadline.
var (
	holdPoll  = 50 * time.Millisecond
	holdLease = 5 * time.Second
)

// dbNowMillis is the database's clock: the hosts' own may disagree.
const dbNowMillis = `(extract(epoch from clock_timestamp()) * 1000)::bigint`

// Hold implements compaction.Holder with a row per held conversation that
// names its holder and lasts holdLease past its last renewal. The holder
// renews it until it releases it or ctx ends, so a compaction as long as
// its request keeps its hold, and a host that dies holding it, or a
// compaction hung past its deadline, lets it go within holdLease. A
// renewal that finds the row gone or another holder's (the hold lapsed:
// a stall, or every renewal of a lease failed, and another host took it)
// ends the context answered, with compaction.ErrHoldLost.
func (c *Compaction) Hold(ctx context.Context, key compaction.Key) (context.Context, func(), error) {
	var token [16]byte
	if _, err := rand.Read(token[:]); err != nil {
		return nil, nil, err
	}
	holder := hex.EncodeToString(token[:])
	ttl := holdLease
	waitedFor := func() error {
		return fmt.Errorf("compaction store: hold %s: waiting for a compaction under way on another host: %w", key, ctx.Err())
	}
	for waited := false; ; waited = true {
		tag, err := c.db.pool.Exec(ctx, c.db.q(`INSERT INTO compaction_holds AS h (realm, identity, conversation, holder, until_ms)
			VALUES ($1, $2, $3, $4, `+dbNowMillis+` + $5)
			ON CONFLICT (realm, identity, conversation) DO UPDATE SET holder = excluded.holder, until_ms = excluded.until_ms
			WHERE h.until_ms < `+dbNowMillis), key.Realm, key.Identity, key.Conversation, holder, ttl.Milliseconds())
		if err != nil {
			if waited && ctx.Err() != nil {
				// The deadline fell in a poll's statement, not between
				// polls: still the other host's compaction it waited for.
				return nil, nil, waitedFor()
			}
			return nil, nil, fmt.Errorf("compaction store: hold %s: %w", key, classify(err))
		}
		if tag.RowsAffected() == 1 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, nil, waitedFor()
		case <-time.After(holdPoll):
		}
	}
	renewing := make(chan struct{})
	renewCtx, stop := context.WithCancel(ctx)
	held, lose := context.WithCancelCause(ctx)
	go func() {
		defer close(renewing)
		every := ttl / 4
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-renewCtx.Done():
				return
			case <-tick.C:
			}
			// A renewal that fails (the database out of reach) is tried
			// again at the next tick; the hold lapses meanwhile only if
			// every renewal of a lease fails. Each has its tick to
			// answer: one sent on a connection that died without a word
			// (a failover, a dropped NAT entry) would otherwise wait on
			// it until ctx ends, renewing nothing, and hold up release.
			// Renewals go on a connection of their own, not the pool's,
			// whose places dead connections keep while pgx closes them
			// (renewer), so the next is sent on a fresh one.
			attempt, cancel := context.WithTimeout(renewCtx, every)
			tag, err := c.db.renewals.exec(attempt, c.db.q(`UPDATE compaction_holds SET until_ms = `+dbNowMillis+` + $5
				WHERE realm = $1 AND identity = $2 AND conversation = $3 AND holder = $4`),
				key.Realm, key.Identity, key.Conversation, holder, ttl.Milliseconds())
			cancel()
			if err == nil && tag.RowsAffected() == 0 {
				// The row is gone or another's: the hold lapsed and
				// another host may be compacting or forgetting key.
				lose(compaction.ErrHoldLost)
				return
			}
		}
	}()
	release := func() {
		stop()
		<-renewing
		lose(context.Canceled)
		// The request's context may be done; the hold still goes.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		// A hold not released (the database out of reach) lapses by
		// itself at its until_ms.
		_, _ = c.db.pool.Exec(ctx, c.db.q(`DELETE FROM compaction_holds WHERE realm = $1 AND identity = $2 AND conversation = $3 AND holder = $4`),
			key.Realm, key.Identity, key.Conversation, holder)
	}
	return held, release, nil
}

func (c *Compaction) Delete(ctx context.Context, key compaction.Key) error {
	if _, err := c.db.pool.Exec(ctx, c.db.q(`DELETE FROM compaction_state WHERE realm = $1 AND identity = $2 AND conversation = $3`), key.Realm, key.Identity, key.Conversation); err != nil {
		return fmt.Errorf("compaction store: delete %s: %w", key, classify(err))
	}
	return nil
}

func (c *Compaction) Identities(ctx context.Context, realm, conversation string) ([]string, error) {
	rows, err := c.db.pool.Query(ctx, c.db.q(`SELECT identity FROM compaction_state WHERE realm = $1 AND conversation = $2`), realm, conversation)
	if err != nil {
		return nil, fmt.Errorf("compaction store: list identities of %s/%s: %w", realm, conversation, classify(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("compaction store: list identities of %s/%s: %w", realm, conversation, classify(err))
	}
	return ids, nil
}

var _ compaction.TxStore = (*Compaction)(nil)
