// Command memhost-plugin-lexical serves the lexical selector to a memhost
// host. It is started by the host, never by hand.
package main

import (
	"github.com/memhost/memhost/plugins/lexical"
	"github.com/memhost/memhost/sdk"
)

func main() { sdk.Serve(lexical.New()) }
