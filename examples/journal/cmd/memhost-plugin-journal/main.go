// Command memhost-plugin-journal serves the journal provider as a memhost
// plugin. It is started by memhost, never by hand: go-plugin owns stdout.
package main

import (
	"example.com/journal"
	"github.com/memhost/memhost/sdk"
)

func main() { sdk.Serve(journal.New()) }
