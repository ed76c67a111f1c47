// Command memhost-plugin-kv serves the kv provider; memhost starts it.
package main

import (
	"example.com/kv"
	"github.com/memhost/memhost/sdk"
)

func main() { sdk.Serve(kv.New()) }
