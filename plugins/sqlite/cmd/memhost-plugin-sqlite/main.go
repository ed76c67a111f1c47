// Command memhost-plugin-sqlite serves the SQLite provider to a memhost
// host. It is started by the host, never by hand.
package main

import (
	"github.com/memhost/memhost/plugins/sqlite"
	"github.com/memhost/memhost/sdk"
)

func main() { sdk.Serve(sqlite.New()) }
