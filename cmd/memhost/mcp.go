package main

import (
	"context"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/memhost/memhost/internal/mcpserver"
	"github.com/memhost/memhost/sdk"
	"github.com/spf13/cobra"
)

func mcpCommand() *cobra.Command {
	var cf configFlag
	var identity, realm string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve memory to one agent as an MCP server on standard input and output",
		Long: `Serve the MCP memory tools (remember, recall, forget, index) on standard
input and output for one identity, starting the configured plugins in this
process. Point a desktop or IDE agent's MCP configuration at this command.
Logs go to standard error; standard output carries only the protocol.

The HTTP server offers the same tools at /mcp, for many identities.`,
		Example: `  memhost mcp --identity alice
  memhost mcp --config memhost.hcl --identity alice --realm team`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cf.load()
			if err != nil {
				return err
			}
			if realm == "" {
				realm = cfg.DefaultRealm
			}
			id := sdk.Identity{Realm: realm, ID: identity}
			if err := id.Validate(); err != nil {
				return err
			}
			if err := checkTokenIdentity(cfg, id); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			h, err := startHost(ctx, cfg, newLogger(cfg))
			if err != nil {
				return err
			}
			defer h.close()
			return serveMCP(ctx, h, id)
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&identity, "identity", "", "the identity the tools act for (required)")
	cmd.Flags().StringVar(&realm, "realm", "", "the identity's realm (default: the configured default realm)")
	_ = cmd.MarkFlagRequired("identity")
	return cmd
}

// serveMCP serves the tools on stdio for one fixed identity.
func serveMCP(ctx context.Context, h *host, id sdk.Identity) error {
	return mcpserver.ServeStdio(ctx, mcpserver.Options{
		Version:     version,
		Provider:    h.provider,
		Coordinator: h.coordinator,
		Bind:        func(http.Header) (sdk.Identity, error) { return id, nil },
		Logger:      h.logger.Named("mcp"),
	})
}
