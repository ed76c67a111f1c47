package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/sdk"
)

// reindexBatch is how many unthreaded records one re-index step reads.
const reindexBatch = 1000

// Reindex rebuilds realm's inverted index ("" means every realm) from its
// records (after a tokenizer change, say) in one transaction, so recall
// answers from the old index until it commits, and a canceled or failed
// one changes nothing; it answers how many records it indexed. progress,
// when set, hears the records done out of the active total. Writers to the
// schema, and another reindex, wait while it runs (it holds a SHARE ROW
// EXCLUSIVE lock on records); readers do not.
func (s *Store) Reindex(ctx context.Context, realm string, progress func(done, total int)) (int, error) {
	ctx = inRealm(ctx, realm)
	if realm != "" {
		if err := sdk.ValidateRealm(realm); err != nil {
			return 0, fmt.Errorf("postgres: reindex: %w", err)
		}
	}
	var done int
	err := s.use(func(db *pgdb) error {
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) (err error) {
			done, err = reindex(ctx, tx, realm, progress)
			return err
		})
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: reindex %s: %w", realm, classify(err))
	}
	return done, nil
}

func reindex(ctx context.Context, tx pgx.Tx, realm string, progress func(done, total int)) (int, error) {
	if _, err := tx.Exec(ctx, "LOCK TABLE records IN SHARE ROW EXCLUSIVE MODE"); err != nil {
		return 0, err
	}
	var realms []string
	if realm != "" {
		realms = []string{realm}
	} else {
		// Realms with index rows but no records left are cleared too.
		rows, err := tx.Query(ctx, "SELECT realm FROM records UNION SELECT realm FROM terms UNION SELECT realm FROM index_totals")
		if err != nil {
			return 0, err
		}
		if realms, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return 0, err
		}
	}
	var total int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM records WHERE realm = ANY($1) AND status = 'active'", realms).Scan(&total); err != nil {
		return 0, err
	}
	done := 0
	report := func(n int) {
		if progress != nil {
			progress(done+n, total)
		}
	}
	report(0)
	for _, r := range realms {
		n, err := reindexRealm(ctx, tx, r, report)
		done += n
		if err != nil {
			return done, err
		}
	}
	_, err := logRealms(ctx, tx, realms)
	return done, err
}

// reindexRealm rebuilds one realm's index; report hears the records done
// in it so far.
func reindexRealm(ctx context.Context, tx pgx.Tx, realm string, report func(done int)) (int, error) {
	for _, sql := range []string{
		"DELETE FROM postings AS p USING terms AS t WHERE p.term_id = t.term_id AND t.realm = $1",
		"DELETE FROM terms WHERE realm = $1",
		"DELETE FROM index_totals WHERE realm = $1",
	} {
		if _, err := tx.Exec(ctx, sql, realm); err != nil {
			return 0, fmt.Errorf("clear the index: %w", err)
		}
	}
	done := 0
	for after := int64(0); ; {
		rows, err := tx.Query(ctx, `
			SELECT `+unthreadedColumns+` FROM records
			WHERE realm = $1 AND status = 'active' AND thread_id IS NULL AND seq > $2 ORDER BY seq LIMIT $3`,
			realm, after, reindexBatch)
		if err != nil {
			return done, err
		}
		batch, err := scanUnthreaded(rows)
		if err != nil {
			return done, err
		}
		if len(batch) == 0 {
			break
		}
		if err := reindexRows(ctx, tx, realm, batch, nil, false); err != nil {
			return done, err
		}
		done += len(batch)
		after = batch[len(batch)-1].seq
		report(done)
	}
	rows, err := tx.Query(ctx, `SELECT DISTINCT thread_id FROM records WHERE realm = $1 AND status = 'active' AND thread_id IS NOT NULL`, realm)
	if err != nil {
		return done, err
	}
	threads, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return done, err
	}
	for _, th := range threads {
		n, err := indexThread(ctx, tx, realm, th, false)
		if err != nil {
			return done, err
		}
		done += n
		report(done)
	}
	return done, nil
}

// unthreadedColumns are the columns scanUnthreaded reads, in order.
const unthreadedColumns = "seq, id, scope, expires_ms, ntok, tags, title, description, body"

// scanUnthreaded reads rows of unthreadedColumns, each with its own terms,
// and closes them.
func scanUnthreaded(rows pgx.Rows) ([]*threadRow, error) {
	defer rows.Close()
	var out []*threadRow
	for rows.Next() {
		r := &threadRow{}
		var tags []string
		var title, description, body string
		if err := rows.Scan(&r.seq, &r.id, &r.scope, &r.exp, &r.ntok, &tags, &title, &description, &body); err != nil {
			return nil, err
		}
		r.own = recordTerms(tags, title, description, body)
		out = append(out, r)
	}
	return out, rows.Err()
}
