package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/sdk"
)

// Vectors (sdk.VectorStore) are rows of the vectors table (schema
// migration 7), one per active record, float32 little-endian in bytea.
// PostgreSQL does not rank with them: the replica does (sdk/index), which
// loads them with their records and re-reads a record's vector when the
// change log names the record, so a put on any host reaches every
// replica. Recall with a query vector that the replica cannot answer (not
// loaded, behind, or turned off) answers the lexical ranking from SQL,
// the query vector checked but not used.
//
// One model's vectors in a realm have one length: PostgreSQL checks that
// under a per-realm advisory lock, so the replicas never meet a vector
// their index would refuse.

// vectorsLockKey is the first key of the per-realm lock PutVectors holds
// (the second hashes the schema and the realm): "memv" in ASCII.
const vectorsLockKey = 0x6d656d76

// PutVectors stores each vector of an active record of realm, replacing
// its previous one; an id with no active record is skipped.
func (s *Store) PutVectors(ctx context.Context, realm string, vecs []sdk.RecordVector) error {
	ctx = inRealm(ctx, realm)
	if err := sdk.ValidateRealm(realm); err != nil {
		return fmt.Errorf("postgres: put vectors: %w", err)
	}
	// The SDK's server checked these; a vector is checked here again
	// because a stored one reaches every host's replica, which would
	// refuse a zero or non-finite one.
	for i, v := range vecs {
		field := fmt.Sprintf("vectors[%d]", i)
		if err := sdk.ValidateVectorModel(field+".model", v.Model); err != nil {
			return fmt.Errorf("postgres: put vectors: %w", err)
		}
		if err := sdk.ValidateVector(field+".vector", v.Vector); err != nil {
			return fmt.Errorf("postgres: put vectors: %w", err)
		}
	}
	err := s.use(func(db *pgdb) error {
		seq, err := putVectors(ctx, db, realm, vecs)
		s.acknowledge(seq)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: put vectors: %w", err)
	}
	return nil
}

// MissingVectors answers the ids of the realm's recallable records with no
// vector made by model, in id byte order after after.
func (s *Store) MissingVectors(ctx context.Context, realm, model, after string, limit int) ([]string, error) {
	ctx = inRealm(ctx, realm)
	if err := sdk.ValidateRealm(realm); err != nil {
		return nil, fmt.Errorf("postgres: missing vectors: %w", err)
	}
	if limit <= 0 || limit > sdk.MaxExportPage {
		limit = sdk.MaxExportPage
	}
	ids := []string{}
	err := s.use(func(db *pgdb) error {
		return db.run(ctx, readOnly, func(q dbtx) error {
			rows, err := q.Query(ctx, `SELECT r.id FROM records AS r
				WHERE r.realm = $1 AND r.status = 'active' AND (r.expires_ms = 0 OR r.expires_ms > $2) AND r.id COLLATE "C" > $3
					AND NOT EXISTS (SELECT 1 FROM vectors AS v WHERE v.seq = r.seq AND v.model = $4)
				ORDER BY r.id COLLATE "C" LIMIT $5`, realm, s.now().UnixMilli(), after, model, limit)
			if err != nil {
				return err
			}
			ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: missing vectors: %w", classify(err))
	}
	if ids == nil {
		ids = []string{}
	}
	return ids, nil
}

// putVectors stores vecs in one transaction and logs the records it gave
// a vector; it answers the change log position.
func putVectors(ctx context.Context, db *pgdb, realm string, vecs []sdk.RecordVector) (int64, error) {
	if len(vecs) == 0 {
		return 0, nil
	}
	ids := make([]string, len(vecs))
	for i, v := range vecs {
		ids[i] = v.ID
	}
	var seq int64
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext(current_schema() || '/' || $2))", vectorsLockKey, realm); err != nil {
			return fmt.Errorf("lock the realm's vectors: %w", err)
		}
		// FOR SHARE holds each record active until commit: a supersede or
		// forget waits, so no vector outlives its record's retirement.
		rows, err := tx.Query(ctx, `SELECT r.id, r.seq, r.content_hash FROM records AS r
			WHERE r.realm = $1 AND r.id = ANY($2::text[]) AND r.status = 'active' FOR SHARE OF r`, realm, ids)
		if err != nil {
			return err
		}
		type active struct {
			seq  int64
			hash string
		}
		found := map[string]active{}
		var id, hash string
		var rs int64
		if _, err := pgx.ForEachRow(rows, []any{&id, &rs, &hash}, func() error { found[id] = active{rs, hash}; return nil }); err != nil {
			return err
		}
		var seqs []int64
		var models []string
		var blobs [][]byte
		var stored []string
		dims := map[string]int{}
		for i, v := range vecs {
			r, ok := found[v.ID]
			if !ok || v.ContentHash != "" && v.ContentHash != r.hash {
				continue // no active record, or made from text it no longer holds: skipped
			}
			s := r.seq
			if n, ok := dims[v.Model]; ok && n != len(v.Vector) {
				return fmt.Errorf("vectors[%d]: model %q gives %d dimensions here and %d before in the batch: %w", i, v.Model, len(v.Vector), n, sdk.ErrInvalid)
			}
			dims[v.Model] = len(v.Vector)
			seqs, models, blobs, stored = append(seqs, s), append(models, v.Model), append(blobs, vectorBlob(v.Vector)), append(stored, v.ID)
		}
		if len(stored) == 0 {
			return nil
		}
		// The model's vectors this batch does not replace keep their
		// length; the batch must match it.
		var batchModels []string
		var batchDims []int32
		for m, n := range dims {
			batchModels, batchDims = append(batchModels, m), append(batchDims, int32(n))
		}
		var model string
		var n int
		err = tx.QueryRow(ctx, `SELECT u.model, o.dims FROM unnest($2::text[], $3::int[]) AS u(model, dims)
			CROSS JOIN LATERAL (
				(SELECT v.dims FROM vectors AS v WHERE v.realm = $1 AND v.model = u.model AND v.dims < u.dims AND v.seq <> ALL ($4::bigint[]) LIMIT 1)
				UNION ALL
				(SELECT v.dims FROM vectors AS v WHERE v.realm = $1 AND v.model = u.model AND v.dims > u.dims AND v.seq <> ALL ($4::bigint[]) LIMIT 1)
			) AS o LIMIT 1`, realm, batchModels, batchDims, seqs).Scan(&model, &n)
		switch {
		case err == nil:
			return fmt.Errorf("model %q makes %d dimensions in realm %s, the batch's vectors have %d: %w", model, n, realm, dims[model], sdk.ErrInvalid)
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		lens := make([]int32, len(seqs))
		for i, v := range models {
			lens[i] = int32(dims[v])
		}
		if _, err := tx.Exec(ctx, `INSERT INTO vectors (seq, realm, model, dims, vec)
			SELECT u.seq, $1, u.model, u.dims, u.vec FROM unnest($2::bigint[], $3::text[], $4::int[], $5::bytea[]) AS u(seq, model, dims, vec)
			ON CONFLICT (seq) DO UPDATE SET model = excluded.model, dims = excluded.dims, vec = excluded.vec`, realm, seqs, models, lens, blobs); err != nil {
			return err
		}
		seq, err = logChanges(ctx, tx, realm, opPut, stored)
		return err
	})
	if err != nil {
		// The commit may be what failed, after the change was numbered: a
		// number no commit made must not be waited for as this process's.
		return 0, err
	}
	return seq, nil
}

// checkQueryVector answers sdk.ErrInvalid when the realm's stored vectors
// cannot be compared with q's query vector (another model, another
// length), as the replica's index would: recall from SQL refuses what
// recall from the replica refuses.
func checkQueryVector(ctx context.Context, db *pgdb, q sdk.RecallQuery) error {
	if q.QueryVector == nil {
		return nil
	}
	var dims *int
	var others bool
	err := db.run(ctx, readOnly, func(tx dbtx) error {
		return tx.QueryRow(ctx, `SELECT
			(SELECT v.dims FROM vectors AS v WHERE v.realm = $1 AND v.model = $2 LIMIT 1),
			EXISTS (SELECT 1 FROM vectors AS v WHERE v.realm = $1 AND v.model <> $2)`, q.Realm, q.VectorModel).Scan(&dims, &others)
	})
	switch {
	case err != nil:
		return fmt.Errorf("postgres: recall: %w", classify(err))
	case dims == nil && others:
		return fmt.Errorf("postgres: recall: realm %s holds vectors of other models than %q: %w", q.Realm, q.VectorModel, sdk.ErrInvalid)
	case dims != nil && *dims != len(q.QueryVector):
		return fmt.Errorf("postgres: recall: model %q makes %d dimensions in realm %s, the query vector has %d: %w",
			q.VectorModel, *dims, q.Realm, len(q.QueryVector), sdk.ErrInvalid)
	}
	return nil
}

// vectorBlob encodes v as float32 little-endian.
func vectorBlob(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// errVectorBlob marks a stored vector that is not whole float32s.
var errVectorBlob = errors.New("a stored vector is not whole float32s")

// vectorFromBlob decodes vectorBlob's encoding.
func vectorFromBlob(b []byte) ([]float32, error) {
	if len(b) == 0 || len(b)%4 != 0 {
		return nil, fmt.Errorf("%w (%d bytes)", errVectorBlob, len(b))
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}
