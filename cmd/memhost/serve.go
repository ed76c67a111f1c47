package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"github.com/memhost/memhost/internal/config"
	"github.com/memhost/memhost/internal/httpapi"
	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/sdk"
	"github.com/spf13/cobra"
)

func serveCommand() *cobra.Command {
	var cf configFlag
	var listen string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Start the plugins and serve the HTTP API",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cf.load()
			if err != nil {
				return err
			}
			if listen != "" {
				cfg.Listen = listen
				if err := cfg.Validate(); err != nil {
					return err
				}
			}
			return serve(cmd.Context(), cfg)
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&listen, "listen", "", "listen address host:port (wins over the config file)")
	return cmd
}

// host is one running memhost: its plugins and its HTTP server.
type host struct {
	logger     hclog.Logger
	supervisor *pluginhost.Supervisor
	server     *httpapi.Server
}

// startHost discovers and starts every configured plugin and assembles the
// API on top of them.
func startHost(ctx context.Context, cfg *config.Config, logger hclog.Logger) (*host, error) {
	if err := ensureDataDir(cfg); err != nil {
		return nil, err
	}
	for _, w := range cfg.Warnings() {
		logger.Warn("config: " + w)
	}
	entries, refusals, err := pluginhost.Discover(cfg.PluginDir)
	if err != nil {
		return nil, err
	}
	for _, r := range refusals {
		logger.Error(r.Error())
	}
	sup := pluginhost.New(entries, pluginhost.Options{
		StartOptions: pluginhost.StartOptions{Logger: logger.Named("plugin"), Dir: cfg.DataDir},
	})
	var specs []pluginhost.Spec
	for _, inst := range cfg.Instances {
		specs = append(specs, pluginhost.Spec{Kind: inst.Kind, Name: inst.Name, Plugin: inst.Plugin, Config: inst.Config})
	}
	started := time.Now()
	if err := sup.Start(ctx, specs); err != nil {
		if len(refusals) > 0 {
			err = errors.Join(append([]error{err}, refusals...)...)
		}
		return nil, fmt.Errorf("starting plugins: %w", err)
	}
	logger.Info("plugins started", "count", len(specs), "elapsed", time.Since(started).Round(time.Millisecond))

	providers := map[string]sdk.Provider{}
	for _, inst := range cfg.InstancesOf(sdk.KindProvider) {
		p, err := sup.Provider(inst.Name)
		if err != nil {
			sup.Close()
			return nil, err
		}
		providers[inst.Name] = p
	}
	var tokens []httpapi.Token
	for _, t := range cfg.Tokens {
		tokens = append(tokens, httpapi.Token{Name: t.Name, Secret: t.Secret, Realms: t.Realms})
	}
	server := httpapi.New(httpapi.Options{
		Logger: logger.Named("http"),
		Provider: func(realm string) (sdk.Provider, error) {
			inst, ok := cfg.ProviderForRealm(realm)
			if !ok {
				return nil, fmt.Errorf("no provider serves realm %q: %w", realm, sdk.ErrNotFound)
			}
			return providers[inst.Name], nil
		},
		DefaultRealm: cfg.DefaultRealm,
		Tokens:       tokens,
		Plugins:      sup,
		MaxBodyBytes: cfg.Server.MaxBodyBytes,
	})
	return &host{logger: logger, supervisor: sup, server: server}, nil
}

func (h *host) close() {
	h.supervisor.Close()
	// Belt and braces: kill any go-plugin managed client still alive.
	plugin.CleanupClients()
}

func serve(ctx context.Context, cfg *config.Config) error {
	logger := newLogger(cfg)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	h, err := startHost(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer h.close()

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	srv := &http.Server{
		Handler:           h.server.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       cfg.Server.ReadTimeout,
	}
	logger.Info("memhost listening", "addr", ln.Addr().String(), "plugin_dir", cfg.PluginDir, "data_dir", cfg.DataDir)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		logger.Warn("http shutdown", "error", err)
	}
	return nil
}
