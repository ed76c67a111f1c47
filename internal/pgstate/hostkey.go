package pgstate

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// ErrHostKeyMismatch marks a host whose key differs from the one the other
// hosts sharing the state use: it would mint other nonces for the same
// sessions, splitting the framing of one session between hosts.
var ErrHostKeyMismatch = errors.New("host key differs from the shared state's")

// verifierLabel is what the verifier is the HMAC of, under the key.
const verifierLabel = "memhost host key verifier v1"

// verifier answers a value that tells keys apart without revealing one:
// HMAC-SHA256 of a fixed label under the key.
func verifier(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(verifierLabel))
	return hex.EncodeToString(m.Sum(nil))
}

// CheckHostKey stores key's verifier when the shared state has none (the
// first host to start), and otherwise answers an error wrapping
// ErrHostKeyMismatch when key is not the key of that verifier. The key
// itself is never stored.
func (db *DB) CheckHostKey(ctx context.Context, key []byte) error {
	mine := verifier(key)
	if _, err := db.pool.Exec(ctx, db.q(`INSERT INTO host_key (id, verifier) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`), mine); err != nil {
		return fmt.Errorf("shared state: record the host key's verifier: %w", classify(err))
	}
	var stored string
	var since time.Time
	if err := db.pool.QueryRow(ctx, db.q(`SELECT verifier, created_at FROM host_key WHERE id = 1`)).Scan(&stored, &since); err != nil {
		return fmt.Errorf("shared state: read the host key's verifier: %w", classify(err))
	}
	if !hmac.Equal([]byte(stored), []byte(mine)) {
		return fmt.Errorf("shared state: this host's key is not the key the hosts sharing schema %s have used since %s; give every host the same key (the same value in host_key_env), or rotate the key on every host at once (docs/deployment.md, Rotating the host key): %w",
			db.schema, since.UTC().Format(time.RFC3339), ErrHostKeyMismatch)
	}
	return nil
}
