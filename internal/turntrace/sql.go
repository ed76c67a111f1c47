package turntrace

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/statedb"
	"github.com/memhost/memhost/sdk"
)

const component = "turn_trace"

// migrations are the trace table's schema steps; append, never edit.
var migrations = []string{
	`CREATE TABLE turn_trace (
		seq      INTEGER PRIMARY KEY AUTOINCREMENT,
		realm    TEXT    NOT NULL,
		identity TEXT    NOT NULL,
		session  TEXT    NOT NULL,
		at_ms    INTEGER NOT NULL,
		bytes    INTEGER NOT NULL,
		trace    TEXT    NOT NULL
	);
	CREATE INDEX turn_trace_by_session ON turn_trace (realm, session, seq);
	CREATE INDEX turn_trace_by_realm ON turn_trace (realm, seq);
	CREATE INDEX turn_trace_by_age ON turn_trace (at_ms);`,
	// Which traces name a record, so a forget or a record's history reads
	// those traces alone, not every trace of the realm: the ids each trace
	// included and left out, and a full-text index of them. FTS5 rather
	// than a table keyed by record id: such a table took each batch of
	// traces to every leaf of its b-tree, and every commit then wrote the
	// whole index to the WAL (7 times the cost of a trace's write); FTS5
	// writes a batch's ids as one new segment. The index reads its text
	// from the trace rows, and triggers keep it in step with them.
	`ALTER TABLE turn_trace ADD COLUMN records TEXT NOT NULL DEFAULT '';
	UPDATE turn_trace SET records = coalesce((SELECT group_concat(json_extract(value, '$.id'), ' ') FROM (
		SELECT value FROM json_each(trace, '$.included') UNION ALL SELECT value FROM json_each(trace, '$.excluded'))), '');
	CREATE VIRTUAL TABLE turn_trace_records USING fts5 (records,
		content = 'turn_trace', content_rowid = 'seq', detail = none, tokenize = "ascii tokenchars '-_.'");
	INSERT INTO turn_trace_records (turn_trace_records) VALUES ('rebuild');
	CREATE TRIGGER turn_trace_records_insert AFTER INSERT ON turn_trace BEGIN
		INSERT INTO turn_trace_records (rowid, records) VALUES (new.seq, new.records);
	END;
	CREATE TRIGGER turn_trace_records_delete AFTER DELETE ON turn_trace BEGIN
		INSERT INTO turn_trace_records (turn_trace_records, rowid, records) VALUES ('delete', old.seq, old.records);
	END;
	CREATE TRIGGER turn_trace_records_update AFTER UPDATE OF records ON turn_trace BEGIN
		INSERT INTO turn_trace_records (turn_trace_records, rowid, records) VALUES ('delete', old.seq, old.records);
		INSERT INTO turn_trace_records (rowid, records) VALUES (new.seq, new.records);
	END;`,
}

// SQLStore is the Store in the host's state database.
type SQLStore struct{ db *statedb.DB }

// NewSQLStore migrates the trace table in db and answers the store.
func NewSQLStore(ctx context.Context, db *statedb.DB) (*SQLStore, error) {
	if err := db.Migrate(ctx, component, migrations); err != nil {
		return nil, fmt.Errorf("turn trace: %w", err)
	}
	return &SQLStore{db: db}, nil
}

// appendRows bounds the traces one INSERT carries (7 parameters each).
const appendRows = 256

// Append writes traces in order, as one INSERT per appendRows of them.
// One statement, not one per trace: a statement after the first in a
// transaction opens a savepoint, and the records index (FTS5) writes what
// it holds to a new segment at every savepoint, so a batch written a row
// at a time cost a segment, and later its merge, per trace.
func (s *SQLStore) Append(ctx context.Context, traces []coordinator.TurnTrace) error {
	return s.db.Tx(ctx, "write turn trace", func(tx *sql.Tx) error {
		for part := range slices.Chunk(traces, appendRows) {
			var q strings.Builder
			q.WriteString(`INSERT INTO turn_trace (realm, identity, session, at_ms, bytes, trace, records) VALUES `)
			args := make([]any, 0, 7*len(part))
			for i, t := range part {
				body, err := json.Marshal(t)
				if err != nil {
					return err
				}
				if i > 0 {
					q.WriteString(", ")
				}
				q.WriteString("(?, ?, ?, ?, ?, ?, ?)")
				args = append(args, t.Realm, t.Identity, t.Session, t.At.UnixMilli(), t.Bytes, string(body), strings.Join(Named(t), " "))
			}
			if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *SQLStore) SessionPage(ctx context.Context, realm string, identities []string, session string, page Page) ([]coordinator.TurnTrace, int64, error) {
	out, seqs, err := s.traces(ctx, realm, `SELECT seq, trace FROM (SELECT seq, trace FROM turn_trace
		WHERE realm = ? AND session = ? AND `+ofIdentities+` AND (? = 0 OR seq < ?) ORDER BY seq DESC LIMIT ?) ORDER BY seq`,
		realm, session, identityList(identities), identityList(identities), page.After, page.After, page.Limit)
	if err != nil || len(seqs) == 0 {
		return out, 0, err
	}
	return out, page.next(len(out), seqs[0]), nil
}

// traces runs a listing of traces on the database's read connections.
func (s *SQLStore) traces(ctx context.Context, realm, query string, args ...any) (out []coordinator.TurnTrace, seqs []int64, err error) {
	err = s.db.Read(ctx, realm, "read turn trace", func(db *sql.DB) error {
		rows, err := db.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		out, seqs, err = scanTraces(rows)
		return err
	})
	return out, seqs, err
}

func (s *SQLStore) RecordPage(ctx context.Context, realm string, identities []string, id string, page Page) ([]coordinator.TurnTrace, int64, error) {
	match := matchAny([]string{id})
	if match == "" {
		return nil, 0, nil
	}
	// The index folds case: the rows it finds are checked for the id.
	out, seqs, err := s.traces(ctx, realm, `SELECT seq, trace FROM turn_trace
		WHERE seq IN (SELECT rowid FROM turn_trace_records WHERE turn_trace_records MATCH ?) AND realm = ? AND `+ofIdentities+`
		AND EXISTS (SELECT 1 FROM json_each(trace, '$.included') WHERE json_extract(value, '$.id') = ?)
		AND (? = 0 OR seq < ?) ORDER BY seq DESC LIMIT ?`, match, realm, identityList(identities), identityList(identities), id,
		page.After, page.After, page.Limit)
	if err != nil || len(seqs) == 0 {
		return out, 0, err
	}
	return out, page.next(len(out), seqs[len(seqs)-1]), nil
}

func (s *SQLStore) RecentPage(ctx context.Context, realm string, identities []string, page Page) ([]SessionSummary, int64, error) {
	var out []SessionSummary
	var seqs []int64
	err := s.db.Read(ctx, realm, "list traced sessions", func(db *sql.DB) error {
		rows, err := db.QueryContext(ctx, `SELECT realm, identity, session, count(*), sum(bytes), max(at_ms), max(seq) FROM turn_trace
			WHERE realm = ? AND `+ofIdentities+` GROUP BY realm, identity, session HAVING (? = 0 OR max(seq) < ?) ORDER BY max(seq) DESC LIMIT ?`,
			realm, identityList(identities), identityList(identities), page.After, page.After, page.Limit)
		if err != nil {
			return err
		}
		out, seqs, err = scanSummaries(rows)
		return err
	})
	if err != nil || len(seqs) == 0 {
		return out, 0, err
	}
	return out, page.next(len(out), seqs[len(seqs)-1]), nil
}

// Session, Record and Recent are the first pages of SessionPage,
// RecordPage and RecentPage.
func (s *SQLStore) Session(ctx context.Context, realm string, identities []string, session string, limit int) ([]coordinator.TurnTrace, error) {
	out, _, err := s.SessionPage(ctx, realm, identities, session, Page{Limit: limit})
	return out, err
}

func (s *SQLStore) Record(ctx context.Context, realm string, identities []string, id string, limit int) ([]coordinator.TurnTrace, error) {
	out, _, err := s.RecordPage(ctx, realm, identities, id, Page{Limit: limit})
	return out, err
}

func (s *SQLStore) Recent(ctx context.Context, realm string, identities []string, limit int) ([]SessionSummary, error) {
	out, _, err := s.RecentPage(ctx, realm, identities, Page{Limit: limit})
	return out, err
}

func (s *SQLStore) Forget(ctx context.Context, realm string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	match := matchAny(ids)
	if match == "" {
		return nil
	}
	return s.db.Tx(ctx, "forget in turn trace", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT seq, trace FROM turn_trace
			WHERE seq IN (SELECT rowid FROM turn_trace_records WHERE turn_trace_records MATCH ?) AND realm = ?`,
			match, realm)
		if err != nil {
			return err
		}
		type row struct {
			seq  int64
			body string
		}
		var named []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.seq, &r.body); err != nil {
				rows.Close()
				return err
			}
			named = append(named, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range named {
			var t coordinator.TurnTrace
			if err := json.Unmarshal([]byte(r.body), &t); err != nil {
				return fmt.Errorf("a stored trace does not decode: %w", err)
			}
			if !ForgetTitles(&t, ids) {
				continue
			}
			body, err := json.Marshal(t)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE turn_trace SET trace = ? WHERE seq = ?`, string(body), r.seq); err != nil {
				return err
			}
		}
		return nil
	})
}

// matchAny is the FTS5 query for a trace naming any of ids, "" when none
// can be named. The index keeps an sdk token (letters, digits, '-', '_',
// '.') as one term; another character would split an id into a phrase,
// which the index (detail=none) cannot answer. Every id a trace holds
// passed that check, so an id failing it names no trace and is left out.
func matchAny(ids []string) string {
	var b strings.Builder
	for _, id := range ids {
		if sdk.ValidateID(id) != nil {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(" OR ")
		}
		// Quoted: an id such as "AND" or "NEAR" is a term, not syntax.
		b.WriteString(`"` + id + `"`)
	}
	return b.String()
}

// ofIdentities keeps the rows of the identities in its two parameters,
// both the same JSON list (NULL: every identity), before any LIMIT
// applies.
const ofIdentities = `(? IS NULL OR identity IN (SELECT value FROM json_each(?)))`

// identityList is ofIdentities' argument.
func identityList(identities []string) any {
	if identities == nil {
		return nil
	}
	b, _ := json.Marshal(identities)
	return string(b)
}

func (s *SQLStore) Prune(ctx context.Context, before time.Time, keep int) (int, error) {
	n := 0
	err := s.db.Tx(ctx, "prune turn trace", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM turn_trace WHERE at_ms < ?`, before.UnixMilli())
		if err != nil {
			return err
		}
		k, _ := res.RowsAffected()
		n += int(k)
		res, err = tx.ExecContext(ctx, `DELETE FROM turn_trace WHERE seq IN (`+fmt.Sprintf(OverRealmBound, "?")+`)`, keep)
		if err != nil {
			return err
		}
		k, _ = res.RowsAffected()
		n += int(k)
		return nil
	})
	return n, err
}

// Rows is what scanTraces and scanSummaries read: database/sql's rows
// and pgx's both fit.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// sqlRows adapts *sql.Rows (whose Close answers an error) to Rows.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }

func scanTraces(rows *sql.Rows) ([]coordinator.TurnTrace, []int64, error) {
	return ScanTraces(sqlRows{rows})
}

func scanSummaries(rows *sql.Rows) ([]SessionSummary, []int64, error) {
	return ScanSummaries(sqlRows{rows})
}

// ScanTraces reads rows of (seq, a trace's JSON): the traces, and their
// seqs for a page's next.
func ScanTraces(rows Rows) ([]coordinator.TurnTrace, []int64, error) {
	defer rows.Close()
	out := []coordinator.TurnTrace{}
	var seqs []int64
	for rows.Next() {
		var seq int64
		var body string
		if err := rows.Scan(&seq, &body); err != nil {
			return nil, nil, err
		}
		var t coordinator.TurnTrace
		if err := json.Unmarshal([]byte(body), &t); err != nil {
			return nil, nil, fmt.Errorf("a stored trace does not decode: %w", err)
		}
		withoutForeign(&t)
		out = append(out, t)
		seqs = append(seqs, seq)
	}
	return out, seqs, rows.Err()
}

// withoutForeign counts, instead of naming, the rows of t that are
// another identity's records. A host before out_of_scope stored the
// records a scope-blind plugin answered with their titles (reason
// "scope", and the selector's rows); traces kept since must not show them.
func withoutForeign(t *coordinator.TurnTrace) {
	own := sdk.IdentityScope(t.Identity)
	t.Excluded = slices.DeleteFunc(t.Excluded, func(r coordinator.TraceRecord) bool {
		foreign := r.Reason == "scope" || (r.Scope.Class() == sdk.ScopeIdentity && r.Scope != own)
		if foreign {
			t.OutOfScope++
		}
		return foreign
	})
}

// ScanSummaries reads rows of (realm, identity, session, turns, bytes,
// newest at_ms, newest seq): the summaries, and their newest seqs for a
// page's next.
func ScanSummaries(rows Rows) ([]SessionSummary, []int64, error) {
	defer rows.Close()
	out := []SessionSummary{}
	var seqs []int64
	for rows.Next() {
		var s SessionSummary
		var ms, seq int64
		if err := rows.Scan(&s.Realm, &s.Identity, &s.Session, &s.Turns, &s.Bytes, &ms, &seq); err != nil {
			return nil, nil, err
		}
		s.Last = time.UnixMilli(ms).UTC()
		out = append(out, s)
		seqs = append(seqs, seq)
	}
	return out, seqs, rows.Err()
}

var _ Store = (*SQLStore)(nil)
