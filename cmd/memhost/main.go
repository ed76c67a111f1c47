// Command memhost is the memory host: it runs the recall coordinator and
// the memory guide behind an HTTP API, and supervises the plugins that
// store, rank, summarise and resolve memory.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is the host's version, set at build time with -ldflags.
var version = "0.1.0-dev"

func main() {
	if err := rootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "memhost:", err)
		os.Exit(1)
	}
}

func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "memhost",
		Short:         "Long-term memory for LLM agents, with pluggable backends",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCommand(), mcpCommand(), pluginsCommand())
	return root
}
