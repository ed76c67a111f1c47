package main

import (
	"fmt"
	"os"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/internal/config"
	"github.com/spf13/cobra"
)

// configFlag is the --config flag shared by every command that reads the
// deployment's configuration.
type configFlag struct{ path string }

func (f *configFlag) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.path, "config", "", "HCL config file (default: built-in defaults, see docs/config.md)")
}

func (f *configFlag) load() (*config.Config, error) {
	if f.path == "" {
		return config.Default(), nil
	}
	return config.Load(f.path)
}

func newLogger(cfg *config.Config) hclog.Logger {
	level := hclog.LevelFromString(cfg.LogLevel)
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       "memhost",
		Level:      level,
		JSONFormat: cfg.LogFormat == "json",
		Output:     os.Stderr,
	})
}

// ensureDataDir creates the data directory plugins run in.
func ensureDataDir(cfg *config.Config) error {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data directory %s: %w", cfg.DataDir, err)
	}
	return nil
}
