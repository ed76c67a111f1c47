// Command memhost-plugin-llm serves the LLM compactor (any OpenAI-compatible
// chat completions endpoint) to a memhost host. It is started by the host,
// never by hand.
package main

import (
	"github.com/memhost/memhost/plugins/llm"
	"github.com/memhost/memhost/sdk"
)

func main() { sdk.Serve(llm.New()) }
