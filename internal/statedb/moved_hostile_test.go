package statedb

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteToDeletedFileFails: the state database file deleted or
// replaced while the host runs. SQLite would go on writing to the unlinked
// file, every write "succeeding" while all of it is lost at the next
// start (and with it every session's dedup). A write must fail instead.
func TestWriteToDeletedFileFails(t *testing.T) {
	ctx := context.Background()
	for _, replace := range []bool{false, true} {
		dir := t.TempDir()
		d, err := Open(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		if _, err := d.Exec(ctx, "create", `CREATE TABLE t (x INTEGER)`); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, FileName)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if replace {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := d.Exec(ctx, "insert", `INSERT INTO t VALUES (1)`); !errors.Is(err, ErrReadOnly) {
			t.Errorf("replaced=%v: Exec after the file went = %v, want ErrReadOnly", replace, err)
		}
		err = d.Tx(ctx, "insert", func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO t VALUES (2)`)
			return err
		})
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("replaced=%v: Tx after the file went = %v, want ErrReadOnly", replace, err)
		}
	}
}
