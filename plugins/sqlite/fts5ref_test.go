package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/index"
)

// The reference for recall is SQLite FTS5's bm25(), which this provider
// used to answer recall with and which sdk/index ranks as: a contentless
// FTS5 table over the active records' terms, built in a scratch in-memory
// database from the store's rows.

// bm25Call is the FTS5 ranking expression with the field weights.
const bm25Call = "bm25(records_fts, 5.0, 4.0, 2.0, 1.0)"

// matchExpr is the FTS5 MATCH expression for any of terms, each quoted.
func matchExpr(terms []string) string {
	var b strings.Builder
	for i, t := range terms {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteByte('"')
		b.WriteString(strings.ReplaceAll(t, `"`, `""`))
		b.WriteByte('"')
	}
	return b.String()
}

// fts5Ref builds the reference over the active records of one realm of the
// store: table records (seq, realm, id, scope, expires_ms, tag_keys) and
// records_fts keyed by seq, as the provider's schema 1 kept them. FTS5
// takes BM25's statistics over its whole table, and recall over the
// query's realm only, so the reference holds that realm alone.
func fts5Ref(t testing.TB, s *Store, realm string) *sql.DB {
	t.Helper()
	registerDriver()
	ref, err := sql.Open(driverName, "file::memory:")
	if err != nil {
		t.Fatal(err)
	}
	ref.SetMaxOpenConns(1)
	t.Cleanup(func() { ref.Close() })
	if _, err := ref.Exec(`
		CREATE TABLE records (seq INTEGER PRIMARY KEY, realm TEXT, id TEXT, scope TEXT, expires_ms INTEGER, tag_keys TEXT);
		CREATE VIRTUAL TABLE records_fts USING fts5 (tags, title, description, body,
			content = '', contentless_delete = 1, tokenize = 'ascii');`); err != nil {
		t.Fatal(err)
	}
	rows, err := s.db.r.Query(`SELECT seq, id, scope, expires_ms, tag_keys, tags, title, description, body
		FROM records WHERE status = 'active' AND realm = ?`, realm)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	tx, err := ref.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var seq, exp int64
		var id, scope, tagKeys, tags, title, desc, body string
		if err := rows.Scan(&seq, &id, &scope, &exp, &tagKeys, &tags, &title, &desc, &body); err != nil {
			t.Fatal(err)
		}
		cols := [4]string{index.TagText(splitTags(tags)), title, desc, body}
		for i, c := range cols {
			cols[i] = strings.Join(index.FieldTerms(c), " ")
		}
		if _, err := tx.Exec("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?)", seq, realm, id, scope, exp, tagKeys); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("INSERT INTO records_fts (rowid, tags, title, description, body) VALUES (?, ?, ?, ?, ?)",
			seq, cols[0], cols[1], cols[2], cols[3]); err != nil {
			t.Fatal(err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return ref
}

// refFilteredSQL is the reference recall with every filter in SQL, best
// first, ties newest (highest seq) first, as FTS5 ranked for the provider.
const refFilteredSQL = `
SELECT r.id, ` + bm25Call + ` AS score
FROM records_fts CROSS JOIN records AS r ON r.seq = records_fts.rowid
WHERE records_fts MATCH ?1
	AND r.realm = ?2 AND (r.expires_ms = 0 OR r.expires_ms > ?3)
	AND (?4 IS NULL OR r.scope IN (SELECT value FROM json_each(?4)))
	AND (?5 IS NULL OR r.id NOT IN (SELECT value FROM json_each(?5)))
	AND (?6 IS NULL OR NOT EXISTS (SELECT 1 FROM json_each(?6) AS t WHERE instr(r.tag_keys, t.value) = 0))
	AND (?7 IS NULL OR NOT EXISTS (SELECT 1 FROM json_each(?7) AS t WHERE instr(r.tag_keys, t.value) > 0))
ORDER BY score, records_fts.rowid DESC
LIMIT ?8`

// tagNeedles answers the substrings tag_keys holds for each tag.
func tagNeedles(tags []string) []string {
	out := make([]string, len(tags))
	for i, t := range tags {
		out[i] = "\n" + index.FoldTag(t) + "\n"
	}
	return out
}

func jsonList(list []string) any {
	if len(list) == 0 {
		return nil
	}
	b, _ := json.Marshal(list) // []string always marshals
	return string(b)
}

// refHit is one reference answer.
type refHit struct {
	id    string
	score float64 // -bm25
}

// refRecall answers the reference's best hits for q at nowMs.
func refRecall(t testing.TB, ref *sql.DB, q sdk.RecallQuery, nowMs int64) []refHit {
	t.Helper()
	terms := index.QueryTerms(q.Query)
	if len(terms) == 0 {
		return nil
	}
	limit := q.Limit
	if limit == 0 {
		limit = sdk.DefaultRecallLimit
	}
	rows, err := ref.Query(refFilteredSQL, matchExpr(terms), q.Realm, nowMs, jsonScopes(q.Scopes), jsonList(q.ExcludeIDs),
		jsonList(tagNeedles(q.Tags)), jsonList(tagNeedles(q.ExcludeTags)), limit)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []refHit
	for rows.Next() {
		var h refHit
		if err := rows.Scan(&h.id, &h.score); err != nil {
			t.Fatal(err)
		}
		h.score = -h.score
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameAsRef reports how hits differ from the reference: same ids in the
// same order, scores within 1e-12 relative (Go's math.Log against libm's).
func sameAsRef(hits []sdk.Hit, want []refHit) error {
	if len(hits) != len(want) {
		return fmt.Errorf("%d hits, the reference %d", len(hits), len(want))
	}
	for k, h := range hits {
		w := want[k]
		if h.Record.ID != w.id || math.Abs(h.Score-w.score) > 1e-12*math.Max(1, math.Abs(w.score)) {
			return fmt.Errorf("hit %d is %s (%v), the reference's %s (%v)", k, h.Record.ID, h.Score, w.id, w.score)
		}
	}
	return nil
}
