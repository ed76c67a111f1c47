package proposal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/memhost/memhost/internal/statedb"
)

// ledgerComponent names the ledger's tables in the state database.
const ledgerComponent = "proposals"

// ledgerMigrations are the ledger's schema steps; append, never edit.
var ledgerMigrations = []string{
	`CREATE TABLE proposals (
		realm      TEXT    NOT NULL,
		id         TEXT    NOT NULL,
		proposer   TEXT    NOT NULL,
		identity   TEXT    NOT NULL,
		created_ms INTEGER NOT NULL,
		PRIMARY KEY (realm, id)
	) WITHOUT ROWID;
	CREATE INDEX proposals_by_proposer ON proposals (realm, proposer);
	CREATE INDEX proposals_by_age ON proposals (realm, created_ms, id);`,
	// When a review claimed the proposal (Claim); 0 when none did.
	`ALTER TABLE proposals ADD COLUMN claimed_ms INTEGER NOT NULL DEFAULT 0;`,
	// What a review took out of the store and has not written back (Hold).
	`ALTER TABLE proposals ADD COLUMN held BLOB;`,
}

// SQLLedger is the Ledger in the host's state database.
type SQLLedger struct{ db *statedb.DB }

// NewSQLLedger migrates the ledger's table in db and answers the ledger.
func NewSQLLedger(ctx context.Context, db *statedb.DB) (*SQLLedger, error) {
	if err := db.Migrate(ctx, ledgerComponent, ledgerMigrations); err != nil {
		return nil, fmt.Errorf("proposal ledger: %w", err)
	}
	return &SQLLedger{db: db}, nil
}

func (l *SQLLedger) Add(ctx context.Context, entries []Entry, max int) error {
	if len(entries) == 0 {
		return nil
	}
	realm, proposer := entries[0].Realm, entries[0].Proposer
	// A refusal reaches the caller as it is, not as a database failure.
	var refusal error
	err := l.db.Tx(ctx, "note proposals", func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM proposals WHERE realm = ? AND proposer = ?`, realm, proposer).Scan(&n); err != nil {
			return err
		}
		if n+len(entries) > max {
			refusal = TooMany(realm, proposer, n, len(entries), max)
			return refusal
		}
		for _, e := range entries {
			res, err := tx.ExecContext(ctx, `INSERT INTO proposals (realm, id, proposer, identity, created_ms) VALUES (?, ?, ?, ?, ?)
				ON CONFLICT (realm, id) DO NOTHING`, e.Realm, e.ID, e.Proposer, e.Identity, e.CreatedAt.UnixMilli())
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 0 {
				refusal = AlreadyNoted(e.Realm, e.ID)
				return refusal
			}
		}
		return nil
	})
	if refusal != nil {
		return refusal
	}
	return err
}

// TooMany is the refusal of Add, the same from every ledger: proposer
// has n pending in realm and asks for more.
func TooMany(realm, proposer string, n, more, max int) error {
	return fmt.Errorf("token %q has %d pending proposals in realm %q and proposes %d more, beyond the limit of %d; an application must approve or reject some first: %w", proposer, n, realm, more, max, ErrTooMany)
}

func (l *SQLLedger) Remove(ctx context.Context, realm string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	args := []any{realm}
	for _, id := range ids {
		args = append(args, id)
	}
	_, err := l.db.Exec(ctx, "drop proposals", `DELETE FROM proposals WHERE realm = ? AND id IN (?`+strings.Repeat(",?", len(ids)-1)+`)`, args...)
	return err
}

func (l *SQLLedger) Reap(ctx context.Context, realm string, ids []string, now time.Time) ([]Entry, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	cutoff := now.Add(-ClaimTTL).UnixMilli()
	args := []any{realm, cutoff, cutoff}
	for _, id := range ids {
		args = append(args, id)
	}
	where := `realm = ? AND claimed_ms <= ? AND created_ms <= ? AND id IN (?` + strings.Repeat(",?", len(ids)-1) + `)`
	var held []Entry
	err := l.db.Tx(ctx, "reap proposals", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT realm, id, proposer, identity, created_ms, held FROM proposals WHERE `+where+` AND held IS NOT NULL`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			e, err := ScanHeldEntry(rows.Scan)
			if err != nil {
				return err
			}
			held = append(held, e)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM proposals WHERE `+where+` AND held IS NULL`, args...)
		return err
	})
	return held, err
}

func (l *SQLLedger) Hold(ctx context.Context, realm, id string, held []byte) error {
	_, err := l.db.Exec(ctx, "hold proposal", `UPDATE proposals SET held = ? WHERE realm = ? AND id = ?`, held, realm, id)
	return err
}

func (l *SQLLedger) List(ctx context.Context, realm string, after Cursor, limit int) ([]Entry, int, error) {
	var total int
	var out []Entry
	err := l.db.Read(ctx, realm, "list proposals", func(db *sql.DB) error {
		// One transaction: the count and the page are of one snapshot.
		tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM proposals WHERE realm = ?`, realm).Scan(&total); err != nil {
			return err
		}
		// Ordered by (created, id); a cursor is the place of the last
		// entry seen, which may be gone since.
		rows, err := tx.QueryContext(ctx, `SELECT realm, id, proposer, identity, created_ms FROM proposals
			WHERE realm = ?1 AND (?2 = '' OR (created_ms, id) > (?4, ?2))
			ORDER BY created_ms, id LIMIT ?3`, realm, after.ID, limit, after.CreatedMS)
		if err != nil {
			return err
		}
		out, err = scanEntries(rows)
		return err
	})
	return out, total, err
}

func scanEntries(rows *sql.Rows) ([]Entry, error) {
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		e, err := ScanEntry(rows.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func (l *SQLLedger) Lookup(ctx context.Context, realm, id string) (Entry, bool, error) {
	e, err := ScanHeldEntry(func(dest ...any) error {
		return l.db.QueryRow(ctx, dest, `SELECT realm, id, proposer, identity, created_ms, held FROM proposals WHERE realm = ? AND id = ?`, realm, id)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, l.db.Wrap("look up proposal", err)
	}
	return e, true, nil
}

func (l *SQLLedger) Proposed(ctx context.Context, realm, proposer string, limit int) ([]Entry, error) {
	var out []Entry
	err := l.db.Read(ctx, realm, "list a proposer's proposals", func(db *sql.DB) error {
		rows, err := db.QueryContext(ctx, `SELECT realm, id, proposer, identity, created_ms FROM proposals
			WHERE realm = ? AND proposer = ? ORDER BY created_ms, id LIMIT ?`, realm, proposer, limit)
		if err != nil {
			return err
		}
		out, err = scanEntries(rows)
		return err
	})
	return out, err
}

func (l *SQLLedger) Counts(ctx context.Context) (map[string]int, error) {
	rows, err := l.db.SQL().QueryContext(ctx, `SELECT realm, count(*) FROM proposals GROUP BY realm`)
	if err != nil {
		return nil, l.db.Wrap("count proposals", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var realm string
		var n int
		if err := rows.Scan(&realm, &n); err != nil {
			return nil, l.db.Wrap("count proposals", err)
		}
		out[realm] = n
	}
	return out, l.db.Wrap("count proposals", rows.Err())
}

func (l *SQLLedger) Claim(ctx context.Context, realm, id string, now time.Time) (claimed, noted bool, err error) {
	err = l.db.Tx(ctx, "claim proposal", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE proposals SET claimed_ms = ? WHERE realm = ? AND id = ? AND claimed_ms <= ?`,
			now.UnixMilli(), realm, id, now.Add(-ClaimTTL).UnixMilli())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			claimed = n == 1
			return err
		}
		res, err = tx.ExecContext(ctx, `INSERT INTO proposals (realm, id, proposer, identity, created_ms, claimed_ms) VALUES (?, ?, ?, '', ?, ?)
			ON CONFLICT (realm, id) DO NOTHING`, realm, id, ImportedProposer, now.UnixMilli(), now.UnixMilli())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		claimed, noted = n == 1, n == 1
		return err
	})
	return claimed, noted, err
}

func (l *SQLLedger) Release(ctx context.Context, e Entry) error {
	_, err := l.db.Exec(ctx, "release proposal", `INSERT INTO proposals (realm, id, proposer, identity, created_ms) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (realm, id) DO UPDATE SET claimed_ms = 0, held = NULL`, e.Realm, e.ID, e.Proposer, e.Identity, e.CreatedAt.UnixMilli())
	return err
}

// ScanEntry reads one row of the ledger's columns, in the order every
// ledger (this one, and pgstate's on PostgreSQL) selects them: realm, id,
// proposer, identity, created_ms.
func ScanEntry(scan func(...any) error) (Entry, error) {
	var e Entry
	var ms int64
	if err := scan(&e.Realm, &e.ID, &e.Proposer, &e.Identity, &ms); err != nil {
		return Entry{}, err
	}
	e.CreatedAt = time.UnixMilli(ms).UTC()
	return e, nil
}

// ScanHeldEntry is ScanEntry of a row with the held column after the
// others.
func ScanHeldEntry(scan func(...any) error) (Entry, error) {
	var held []byte
	e, err := ScanEntry(func(dest ...any) error { return scan(append(dest, &held)...) })
	if len(held) > 0 {
		e.Held = held
	}
	return e, err
}

var _ Ledger = (*SQLLedger)(nil)
