// Command memhost-plugin-markdown serves the markdown provider to a
// memhost host. It is started by the host, never by hand.
package main

import (
	"github.com/memhost/memhost/plugins/markdown"
	"github.com/memhost/memhost/sdk"
)

func main() {
	sdk.Serve(markdown.New())
}
