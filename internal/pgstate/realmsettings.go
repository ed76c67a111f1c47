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
			var was string
			err := tx.QueryRow(ctx, db.q(`INSERT INTO realm_settings AS r (realm, digest, updated_ms) VALUES ($1, $2, `+dbNowMillis+`)
				ON CONFLICT (realm) DO UPDATE SET digest = excluded.digest, updated_ms = excluded.updated_ms
				RETURNING coalesce((SELECT digest FROM realm_settings WHERE realm = $1), '')`), realm, digests[realm]).Scan(&was)
			if err != nil {
				return err
			}
			if was != "" && was != digests[realm] {
				differ = append(differ, realm)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("shared state: compare the realms' settings: %w", classify(err))
	}
	return differ, nil
}
