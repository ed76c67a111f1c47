// Command memhost-plugin-bleve serves the bleve provider as a memhost plugin.
package main

import (
	"github.com/memhost/memhost/plugins/bleve"
	"github.com/memhost/memhost/sdk"
)

func main() { sdk.Serve(bleve.New()) }
