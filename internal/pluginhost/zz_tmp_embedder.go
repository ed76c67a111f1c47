package pluginhost

import (
	"fmt"

	"github.com/memhost/memhost/sdk"
)

// TEMPORARY (the embedder branch brings the real supervised embedder).
func (s *Supervisor) Embedder(name string) (sdk.Embedder, error) {
	return nil, fmt.Errorf("embedder %q: %w", name, sdk.ErrUnsupported)
}
