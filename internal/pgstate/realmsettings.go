package pgstate

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"
)

// CompareRealmSettings records digests (realm to a digest of the realm's
// settings that shape the shared state) as this host's, and answers the
// realms, sorted, whose digest another host recorded differently: hosts
// that disagree on a realm's provider or budgets serve one session by two
// rules. A realm first seen is no difference.
func (db *DB) CompareRealmSettings(ctx context.Context, digests map[string]string) ([]string, error) {
	var differ []string
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		differ = differ[:0]
		for _, realm := range slices.Sorted(maps.Keys(digests)) {
			// Three statements, not one upsert reading the old digest in
			// its RETURNING: that read is of the statement's snapshot, from
			// before it waited for another host's row still uncommitted
			// (two hosts starting together), so it saw no row and neither
			// host warned. Each statement here sees what committed before
			// it, and FOR UPDATE the newest digest.
			tag, err := tx.Exec(ctx, db.q(`INSERT INTO realm_settings (realm, digest, updated_ms) VALUES ($1, $2, `+dbNowMillis+`)
				ON CONFLICT (realm) DO NOTHING`), realm, digests[realm])
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 1 {
				continue // first seen
			}
			var was string
			if err := tx.QueryRow(ctx, db.q(`SELECT digest FROM realm_settings WHERE realm = $1 FOR UPDATE`), realm).Scan(&was); err != nil {
				return err
			}
			if was != digests[realm] {
				differ = append(differ, realm)
			}
			if _, err := tx.Exec(ctx, db.q(`UPDATE realm_settings SET digest = $2, updated_ms = `+dbNowMillis+` WHERE realm = $1`), realm, digests[realm]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("shared state: compare the realms' settings: %w", classify(err))
	}
	return differ, nil
}
