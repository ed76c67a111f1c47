package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/memhost/memhost/sdk"
	memindex "github.com/memhost/memhost/sdk/index"
)

// Vectors (sdk.VectorStore) live in the vectors table, one row per active
// record keyed by its row (schema migration 7, whose triggers drop a row
// when its record leaves recall), and in the recall index, which ranks
// with them (sdk/index, vector.go). A put commits first and reaches the
// index after, through the index log like any other change, so a crash
// replays it; a rebuild reads them back from the table.

var _ sdk.VectorStore = (*Store)(nil)

// PutVectors stores each vector of an active record of realm, replacing
// its previous one; an id with no active record is skipped.
func (s *Store) PutVectors(ctx context.Context, realm string, vecs []sdk.RecordVector) error {
	err := s.use(func(db *database) error {
		return db.putVectors(ctx, realm, vecs)
	})
	if err != nil {
		return fmt.Errorf("sqlite: put vectors: %w", err)
	}
	return nil
}

// MissingVectors answers the ids of the realm's recallable records with no
// vector made by model, in id order after after.
func (s *Store) MissingVectors(ctx context.Context, realm, model, after string, limit int) ([]string, error) {
	var ids []string
	err := s.use(func(db *database) error {
		if err := db.awaitIndex(ctx); err != nil {
			return err
		}
		ids = db.ix.MissingVectors(realm, model, after, s.opts.now().UnixMilli(), limit)
		return nil
	})
	return ids, err
}

func (d *database) putVectors(ctx context.Context, realm string, vecs []sdk.RecordVector) error {
	return d.write(ctx, func(tx *sql.Tx, ch *indexChange) error {
		// The dimension check below reads the index.
		if err := d.awaitIndex(ctx); err != nil {
			return err
		}
		dims := map[string]int{}
		for i, v := range vecs {
			var seq int64
			var hash string
			err := tx.QueryRowContext(ctx, `SELECT seq, content_hash FROM records WHERE realm = ? AND id = ? AND status = 'active'`, realm, v.ID).Scan(&seq, &hash)
			if errors.Is(err, sql.ErrNoRows) {
				continue // forgotten or retired meanwhile
			}
			if err != nil {
				return err
			}
			if v.ContentHash != "" && v.ContentHash != hash {
				continue // made from text the record no longer holds
			}
			// One model's vectors have one length: refuse the batch
			// before it commits rather than leave the index behind it.
			if n, ok := dims[v.Model]; ok && n != len(v.Vector) {
				return fmt.Errorf("vectors[%d]: model %q gives %d dimensions here and %d before: %w", i, v.Model, len(v.Vector), n, sdk.ErrInvalid)
			}
			dims[v.Model] = len(v.Vector)
			if err := d.ix.VectorFits(realm, v.ID, v.Model, len(v.Vector)); err != nil {
				return fmt.Errorf("vectors[%d]: %w: %w", i, sdk.ErrInvalid, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO vectors (seq, model, vec) VALUES (?, ?, ?)
				ON CONFLICT (seq) DO UPDATE SET model = excluded.model, vec = excluded.vec`, seq, v.Model, vectorBlob(v.Vector)); err != nil {
				return err
			}
			ch.ops = append(ch.ops, indexOp{realm: realm, vec: &sdk.RecordVector{ID: v.ID, Model: v.Model, Vector: v.Vector}})
		}
		return nil
	})
}

// loadVectors puts the stored vectors of realm's active records ("" for
// every realm) into ix, which holds those records.
func loadVectors(ctx context.Context, db querier, ix *memindex.Index, realm string) error {
	query := `SELECT r.realm, r.id, v.model, v.vec FROM vectors AS v JOIN records AS r ON r.seq = v.seq WHERE r.status = 'active'`
	var args []any
	if realm != "" {
		query += ` AND r.realm = ?`
		args = append(args, realm)
	}
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("read vectors: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var rlm, id, model string
		var blob []byte
		if err := rows.Scan(&rlm, &id, &model, &blob); err != nil {
			return fmt.Errorf("read vectors: %w", err)
		}
		v, ok := vectorFromBlob(blob)
		if !ok {
			return fmt.Errorf("the vector of record %s is %d bytes, not whole float32s", id, len(blob))
		}
		if _, err := ix.PutVector(rlm, id, model, v); err != nil {
			return fmt.Errorf("index the vector of record %s: %w", id, err)
		}
	}
	return rows.Err()
}

func vectorBlob(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func vectorFromBlob(b []byte) ([]float32, bool) {
	if len(b)%4 != 0 {
		return nil, false
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, true
}
