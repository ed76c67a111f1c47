package markdown

import (
	"errors"
	"fmt"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/filelock"
)

// lockRoot keeps the root to this instance (sdk/filelock): a second one
// would finish this one's batch intents and remove its temporary files
// at its start, so a batch reported failed could land.
func lockRoot(path string) (*filelock.Lock, error) {
	l, err := filelock.Acquire(path, filePerm)
	switch {
	case errors.Is(err, filelock.ErrHeld):
		holder := ""
		if pid := filelock.Holder(path); pid != 0 {
			holder = fmt.Sprintf(" (pid %d)", pid)
		}
		return nil, fmt.Errorf("markdown: %s is locked by another instance of the provider%s: is a second provider block or memhost host using this root, or is the plugin of a host just killed still closing it (it exits on its own, and a retry then succeeds)? %w", path, holder, sdk.ErrConflict)
	case err != nil:
		return nil, fmt.Errorf("markdown: lock %s: %w", path, err)
	}
	return l, nil
}
