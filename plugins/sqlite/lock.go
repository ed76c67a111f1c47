package sqlite

import (
	"errors"
	"fmt"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/filelock"
)

// lockFile keeps the database to this process (sdk/filelock). Where the
// platform has no flock, SQLite's own file locking still keeps the
// database consistent (WAL with a shared-memory index).
func lockFile(path string) (*filelock.Lock, error) {
	l, err := filelock.Acquire(path, 0o600)
	switch {
	case errors.Is(err, filelock.ErrHeld):
		holder := ""
		if pid := filelock.Holder(path); pid != 0 {
			holder = fmt.Sprintf(" (pid %d)", pid)
		}
		return nil, fmt.Errorf("sqlite: %s is locked by another process%s: is another memhost host, or another instance of this one, using this store, or is the plugin of a host just killed still closing it (it exits on its own, and a retry then succeeds)? %w", path, holder, sdk.ErrConflict)
	case err != nil:
		return nil, fmt.Errorf("sqlite: lock %s: %w", path, sdk.FileStorageError(sdk.FileProblem(err)))
	}
	return l, nil
}
