package pgstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/proposal"
	"github.com/memhost/memhost/internal/turntrace"
	"github.com/memhost/memhost/sdk"
)

// consoleMigration adds the proposal ledger and the turn trace, shared by
// every host like the sessions.
const consoleMigration = `CREATE TABLE proposals (
		realm      text        NOT NULL,
		id         text        NOT NULL,
		proposer   text        NOT NULL,
		identity   text        NOT NULL,
		created_ms bigint      NOT NULL,
		PRIMARY KEY (realm, id)
	);
	CREATE INDEX proposals_by_proposer ON proposals (realm, proposer);
	CREATE INDEX proposals_by_age ON proposals (realm, created_ms, id);
	CREATE TABLE turn_trace (
		seq      bigserial PRIMARY KEY,
		realm    text   NOT NULL,
		identity text   NOT NULL,
		session  text   NOT NULL,
		at_ms    bigint NOT NULL,
		bytes    bigint NOT NULL,
		trace    jsonb  NOT NULL
	);
	CREATE INDEX turn_trace_by_session ON turn_trace (realm, session, seq);
	CREATE INDEX turn_trace_by_realm ON turn_trace (realm, seq);
	CREATE INDEX turn_trace_by_age ON turn_trace (at_ms);`

// Proposals is the proposal ledger shared by every host on the database.
type Proposals struct{ db *DB }

// NewProposals answers the ledger on db.
func NewProposals(db *DB) *Proposals { return &Proposals{db: db} }

// proposerLockKey is the first key of the per-(realm, proposer) advisory
// lock that makes Add's count and insert atomic across hosts ("mhpr").
const proposerLockKey = 0x6d687072

func (p *Proposals) Add(ctx context.Context, entries []proposal.Entry, max int) error {
	if len(entries) == 0 {
		return nil
	}
	realm, proposer := entries[0].Realm, entries[0].Proposer
	err := pgx.BeginFunc(ctx, p.db.pool, func(tx pgx.Tx) error {
		// Realm and token names hold no line feed: the key names one pair.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, proposerLockKey, realm+"\n"+proposer); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, p.db.q(`SELECT count(*) FROM proposals WHERE realm = $1 AND proposer = $2`), realm, proposer).Scan(&n); err != nil {
			return err
		}
		if n+len(entries) > max {
			return proposal.TooMany(realm, proposer, n, len(entries), max)
		}
		for _, e := range entries {
			tag, err := tx.Exec(ctx, p.db.q(`INSERT INTO proposals (realm, id, proposer, identity, created_ms) VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (realm, id) DO NOTHING`), e.Realm, e.ID, e.Proposer, e.Identity, e.CreatedAt.UnixMilli())
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return proposal.AlreadyNoted(e.Realm, e.ID)
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, proposal.ErrTooMany) && !errors.Is(err, sdk.ErrConflict) {
		return fmt.Errorf("proposal ledger: note: %w", classify(err))
	}
	return err
}

func (p *Proposals) Remove(ctx context.Context, realm string, ids []string) error {
	if _, err := p.db.pool.Exec(ctx, p.db.q(`DELETE FROM proposals WHERE realm = $1 AND id = ANY($2)`), realm, ids); err != nil {
		return fmt.Errorf("proposal ledger: drop: %w", classify(err))
	}
	return nil
}

func (p *Proposals) Reap(ctx context.Context, realm string, ids []string, now time.Time) ([]proposal.Entry, error) {
	const where = `realm = $1 AND id = ANY($2) AND claimed_ms <= $3 AND created_ms <= $3`
	cutoff := now.Add(-proposal.ClaimTTL).UnixMilli()
	var held []proposal.Entry
	err := pgx.BeginFunc(ctx, p.db.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, p.db.q(`SELECT realm, id, proposer, identity, created_ms, held FROM proposals WHERE `+where+` AND held IS NOT NULL`), realm, ids, cutoff)
		if err != nil {
			return err
		}
		for rows.Next() {
			e, err := proposal.ScanHeldEntry(rows.Scan)
			if err != nil {
				rows.Close()
				return err
			}
			held = append(held, e)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, p.db.q(`DELETE FROM proposals WHERE `+where+` AND held IS NULL`), realm, ids, cutoff)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("proposal ledger: reap: %w", classify(err))
	}
	return held, nil
}

func (p *Proposals) Hold(ctx context.Context, realm, id string, held []byte) error {
	if _, err := p.db.pool.Exec(ctx, p.db.q(`UPDATE proposals SET held = $1 WHERE realm = $2 AND id = $3`), held, realm, id); err != nil {
		return fmt.Errorf("proposal ledger: hold: %w", classify(err))
	}
	return nil
}

func (p *Proposals) List(ctx context.Context, realm string, after proposal.Cursor, limit int) ([]proposal.Entry, int, error) {
	done, err := p.db.listing(ctx, realm)
	if err != nil {
		return nil, 0, fmt.Errorf("proposal ledger: list: %w", classify(err))
	}
	defer done()
	var total int
	if err := p.db.pool.QueryRow(ctx, p.db.q(`SELECT count(*) FROM proposals WHERE realm = $1`), realm).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("proposal ledger: list: %w", classify(err))
	}
	rows, err := p.db.pool.Query(ctx, p.db.q(`SELECT realm, id, proposer, identity, created_ms FROM proposals
		WHERE realm = $1 AND ($2 = '' OR (created_ms, id) > ($4, $2))
		ORDER BY created_ms, id LIMIT $3`), realm, after.ID, limit, after.CreatedMS)
	if err != nil {
		return nil, 0, fmt.Errorf("proposal ledger: list: %w", classify(err))
	}
	defer rows.Close()
	var out []proposal.Entry
	for rows.Next() {
		e, err := proposal.ScanEntry(rows.Scan)
		if err != nil {
			return nil, 0, fmt.Errorf("proposal ledger: list: %w", classify(err))
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("proposal ledger: list: %w", classify(err))
	}
	return out, total, nil
}

func (p *Proposals) Lookup(ctx context.Context, realm, id string) (proposal.Entry, bool, error) {
	e, err := proposal.ScanHeldEntry(p.db.pool.QueryRow(ctx, p.db.q(`SELECT realm, id, proposer, identity, created_ms, held FROM proposals WHERE realm = $1 AND id = $2`), realm, id).Scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return proposal.Entry{}, false, nil
	}
	if err != nil {
		return proposal.Entry{}, false, fmt.Errorf("proposal ledger: look up: %w", classify(err))
	}
	return e, true, nil
}

func (p *Proposals) Proposed(ctx context.Context, realm, proposer string, limit int) ([]proposal.Entry, error) {
	done, err := p.db.listing(ctx, realm)
	if err != nil {
		return nil, fmt.Errorf("proposal ledger: list a proposer's: %w", classify(err))
	}
	defer done()
	rows, err := p.db.pool.Query(ctx, p.db.q(`SELECT realm, id, proposer, identity, created_ms FROM proposals
		WHERE realm = $1 AND proposer = $2 ORDER BY created_ms, id LIMIT $3`), realm, proposer, limit)
	if err != nil {
		return nil, fmt.Errorf("proposal ledger: list a proposer's: %w", classify(err))
	}
	defer rows.Close()
	var out []proposal.Entry
	for rows.Next() {
		e, err := proposal.ScanEntry(rows.Scan)
		if err != nil {
			return nil, fmt.Errorf("proposal ledger: list a proposer's: %w", classify(err))
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("proposal ledger: list a proposer's: %w", classify(err))
	}
	return out, nil
}

func (p *Proposals) Counts(ctx context.Context) (map[string]int, error) {
	rows, err := p.db.pool.Query(ctx, p.db.q(`SELECT realm, count(*) FROM proposals GROUP BY realm`))
	if err != nil {
		return nil, fmt.Errorf("proposal ledger: count: %w", classify(err))
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var realm string
		var n int
		if err := rows.Scan(&realm, &n); err != nil {
			return nil, fmt.Errorf("proposal ledger: count: %w", classify(err))
		}
		out[realm] = n
	}
	return out, rows.Err()
}

func (p *Proposals) Claim(ctx context.Context, realm, id string, now time.Time) (claimed, noted bool, err error) {
	// A concurrent claim's UPDATE waits on the row and then finds it
	// claimed; its INSERT finds it noted.
	err = pgx.BeginFunc(ctx, p.db.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, p.db.q(`UPDATE proposals SET claimed_ms = $1 WHERE realm = $2 AND id = $3 AND claimed_ms <= $4`),
			now.UnixMilli(), realm, id, now.Add(-proposal.ClaimTTL).UnixMilli())
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			claimed = true
			return nil
		}
		tag, err = tx.Exec(ctx, p.db.q(`INSERT INTO proposals (realm, id, proposer, identity, created_ms, claimed_ms) VALUES ($1, $2, $3, '', $4, $4)
			ON CONFLICT (realm, id) DO NOTHING`), realm, id, proposal.ImportedProposer, now.UnixMilli())
		claimed = err == nil && tag.RowsAffected() == 1
		noted = claimed
		return err
	})
	if err != nil {
		return false, false, fmt.Errorf("proposal ledger: claim: %w", classify(err))
	}
	return claimed, noted, nil
}

func (p *Proposals) Release(ctx context.Context, e proposal.Entry) error {
	if _, err := p.db.pool.Exec(ctx, p.db.q(`INSERT INTO proposals (realm, id, proposer, identity, created_ms) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (realm, id) DO UPDATE SET claimed_ms = 0, held = NULL`), e.Realm, e.ID, e.Proposer, e.Identity, e.CreatedAt.UnixMilli()); err != nil {
		return fmt.Errorf("proposal ledger: release: %w", classify(err))
	}
	return nil
}

// Traces is the turn trace store shared by every host on the database.
type Traces struct{ db *DB }

// NewTraces answers the trace store on db.
func NewTraces(db *DB) *Traces { return &Traces{db: db} }

func (t *Traces) Append(ctx context.Context, traces []coordinator.TurnTrace) error {
	batch := &pgx.Batch{}
	for _, tr := range traces {
		batch.Queue(t.db.q(`INSERT INTO turn_trace (realm, identity, session, at_ms, bytes, trace, records) VALUES ($1, $2, $3, $4, $5, $6, $7)`),
			tr.Realm, tr.Identity, tr.Session, tr.At.UnixMilli(), tr.Bytes, tr, turntrace.Named(tr))
	}
	if err := t.db.pool.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("turn trace: write: %w", classify(err))
	}
	return nil
}

func (t *Traces) SessionPage(ctx context.Context, realm string, identities []string, session string, page turntrace.Page) ([]coordinator.TurnTrace, int64, error) {
	done, err := t.db.listing(ctx, realm)
	if err != nil {
		return nil, 0, fmt.Errorf("turn trace: read: %w", classify(err))
	}
	defer done()
	rows, err := t.db.pool.Query(ctx, t.db.q(`SELECT seq, trace::text FROM (SELECT seq, trace FROM turn_trace
		WHERE realm = $1 AND session = $2 AND `+ofIdentities(3)+` AND ($5 = 0 OR seq < $5) ORDER BY seq DESC LIMIT $4) AS t ORDER BY seq`),
		realm, session, identities, page.Limit, page.After)
	if err != nil {
		return nil, 0, fmt.Errorf("turn trace: read: %w", classify(err))
	}
	out, seqs, err := turntrace.ScanTraces(rows)
	if err != nil {
		return nil, 0, fmt.Errorf("turn trace: read: %w", classify(err))
	}
	if len(seqs) == 0 || len(out) < page.Limit {
		return out, 0, nil
	}
	return out, seqs[0], nil
}

func (t *Traces) RecordPage(ctx context.Context, realm string, identities []string, id string, page turntrace.Page) ([]coordinator.TurnTrace, int64, error) {
	done, err := t.db.listing(ctx, realm)
	if err != nil {
		return nil, 0, fmt.Errorf("turn trace: read: %w", classify(err))
	}
	defer done()
	probe, err := json.Marshal([]map[string]string{{"id": id}})
	if err != nil {
		return nil, 0, err
	}
	rows, err := t.db.pool.Query(ctx, t.db.q(`SELECT seq, trace::text FROM turn_trace
		WHERE realm = $1 AND records @> ARRAY[$5::text] AND trace->'included' @> $2::jsonb AND `+ofIdentities(3)+`
		AND ($6 = 0 OR seq < $6) ORDER BY seq DESC LIMIT $4`), realm, string(probe), identities, page.Limit, id, page.After)
	if err != nil {
		return nil, 0, fmt.Errorf("turn trace: read: %w", classify(err))
	}
	out, seqs, err := turntrace.ScanTraces(rows)
	if err != nil {
		return nil, 0, fmt.Errorf("turn trace: read: %w", classify(err))
	}
	if len(seqs) == 0 || len(out) < page.Limit {
		return out, 0, nil
	}
	return out, seqs[len(seqs)-1], nil
}

func (t *Traces) RecentPage(ctx context.Context, realm string, identities []string, page turntrace.Page) ([]turntrace.SessionSummary, int64, error) {
	done, err := t.db.listing(ctx, realm)
	if err != nil {
		return nil, 0, fmt.Errorf("turn trace: list sessions: %w", classify(err))
	}
	defer done()
	rows, err := t.db.pool.Query(ctx, t.db.q(`SELECT realm, identity, session, count(*)::int, sum(bytes)::int, max(at_ms), max(seq) FROM turn_trace
		WHERE realm = $1 AND `+ofIdentities(2)+` GROUP BY realm, identity, session HAVING ($4 = 0 OR max(seq) < $4) ORDER BY max(seq) DESC LIMIT $3`),
		realm, identities, page.Limit, page.After)
	if err != nil {
		return nil, 0, fmt.Errorf("turn trace: list sessions: %w", classify(err))
	}
	out, seqs, err := turntrace.ScanSummaries(rows)
	if err != nil {
		return nil, 0, fmt.Errorf("turn trace: list sessions: %w", classify(err))
	}
	if len(seqs) == 0 || len(out) < page.Limit {
		return out, 0, nil
	}
	return out, seqs[len(seqs)-1], nil
}

// Session, Record and Recent are the first pages of SessionPage,
// RecordPage and RecentPage.
func (t *Traces) Session(ctx context.Context, realm string, identities []string, session string, limit int) ([]coordinator.TurnTrace, error) {
	out, _, err := t.SessionPage(ctx, realm, identities, session, turntrace.Page{Limit: limit})
	return out, err
}

func (t *Traces) Record(ctx context.Context, realm string, identities []string, id string, limit int) ([]coordinator.TurnTrace, error) {
	out, _, err := t.RecordPage(ctx, realm, identities, id, turntrace.Page{Limit: limit})
	return out, err
}

func (t *Traces) Recent(ctx context.Context, realm string, identities []string, limit int) ([]turntrace.SessionSummary, error) {
	out, _, err := t.RecentPage(ctx, realm, identities, turntrace.Page{Limit: limit})
	return out, err
}

func (t *Traces) Forget(ctx context.Context, realm string, ids []string) error {
	err := pgx.BeginFunc(ctx, t.db.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, t.db.q(`SELECT seq, trace::text FROM turn_trace WHERE realm = $1 AND records && $2::text[]
			FOR UPDATE`), realm, ids)
		if err != nil {
			return err
		}
		type row struct {
			seq  int64
			body string
		}
		named, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
			var x row
			return x, r.Scan(&x.seq, &x.body)
		})
		if err != nil {
			return err
		}
		for _, r := range named {
			var tr coordinator.TurnTrace
			if err := json.Unmarshal([]byte(r.body), &tr); err != nil {
				return fmt.Errorf("a stored trace does not decode: %w", err)
			}
			if !turntrace.ForgetTitles(&tr, ids) {
				continue
			}
			if _, err := tx.Exec(ctx, t.db.q(`UPDATE turn_trace SET trace = $1 WHERE seq = $2`), tr, r.seq); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("turn trace: forget: %w", classify(err))
	}
	return nil
}

// ofIdentities keeps the rows of the identities in parameter n (NULL:
// every identity), before any LIMIT applies.
func ofIdentities(n int) string {
	return fmt.Sprintf(`($%[1]d::text[] IS NULL OR identity = ANY($%[1]d::text[]))`, n)
}

func (t *Traces) Prune(ctx context.Context, before time.Time, keep int) (int, error) {
	tag, err := t.db.pool.Exec(ctx, t.db.q(`DELETE FROM turn_trace WHERE at_ms < $1`), before.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("turn trace: prune: %w", classify(err))
	}
	n := int(tag.RowsAffected())
	tag, err = t.db.pool.Exec(ctx, t.db.q(`DELETE FROM turn_trace WHERE seq IN (`+fmt.Sprintf(turntrace.OverRealmBound, "$1")+`)`), keep)
	if err != nil {
		return n, fmt.Errorf("turn trace: prune: %w", classify(err))
	}
	return n + int(tag.RowsAffected()), nil
}

var (
	_ proposal.Ledger = (*Proposals)(nil)
	_ turntrace.Store = (*Traces)(nil)
)
