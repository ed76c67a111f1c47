// Command memhost-plugin-openai serves the OpenAI-compatible embedder (any
// /embeddings endpoint) to a memhost host. It is started by the host,
// never by hand.
package main

import (
	"github.com/memhost/memhost/plugins/openai"
	"github.com/memhost/memhost/sdk"
)

func main() { sdk.Serve(openai.New()) }
