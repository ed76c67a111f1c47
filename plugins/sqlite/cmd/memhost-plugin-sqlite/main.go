// Command memhost-plugin-sqlite serves the SQLite provider to a memhost
// host. It is started by the host, never by hand.
package main

import (
	"os"
	"runtime/debug"

	"github.com/memhost/memhost/plugins/sqlite"
	"github.com/memhost/memhost/sdk"
)

// gcPercent is the collector's target unless GOGC says otherwise. The
// heap is mostly the index, long-lived and growing with the store; at
// Go's default of 100 the process grows to about twice it between
// collections (docs/benchmarks.md: 910 MiB at 1M records, 780 at 50).
const gcPercent = 50

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	sdk.Serve(sqlite.New())
}
