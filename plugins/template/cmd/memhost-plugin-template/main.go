// Command memhost-plugin-template serves the deterministic template
// compactor to a memhost host. It is started by the host, never by hand.
package main

import (
	"github.com/memhost/memhost/plugins/template"
	"github.com/memhost/memhost/sdk"
)

func main() { sdk.Serve(template.New()) }
