package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/config"
	"github.com/spf13/cobra"
)

// configFlag is the --config flag shared by every command that reads the
// deployment's configuration.
type configFlag struct{ path string }

func (f *configFlag) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.path, "config", "", "HCL config file (default: built-in defaults, see docs/config.md)")
}

// load reads the config, or the built-in defaults without --config;
// flags, when not nil, sets the command's flags on it before it is
// checked, as they win over the file.
func (f *configFlag) load(flags func(*config.Config) error) (*config.Config, error) {
	return f.loadWith(config.Options{Override: flags})
}

func (f *configFlag) loadWith(opts config.Options) (*config.Config, error) {
	if f.path == "" {
		cfg := opts.Default()
		if opts.Override == nil {
			return cfg, nil
		}
		if err := opts.Override(cfg); err != nil {
			return nil, err
		}
		return cfg, cfg.Validate()
	}
	if err := f.check(); err != nil {
		return nil, err
	}
	return opts.Load(f.path)
}

// check refuses a --config that names a directory, said once (the
// loader's own error repeats the path: "read D: read D: is a directory").
func (f *configFlag) check() error {
	info, err := os.Stat(f.path)
	if err != nil {
		return unreadable("config "+f.path, err)
	}
	if info.IsDir() {
		return fmt.Errorf("config %s is a directory: name the HCL file", f.path)
	}
	return nil
}

// unreadable says why a file named on the command line (name, with what
// it is) cannot be read: named once, without the system call that met
// the problem ("open F: no such file or directory").
func unreadable(name string, err error) error {
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		err = pathErr.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist", name)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s is not readable by this user", name)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%s: a folder above it is a file", name)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// loadForClient reads the config for a command that calls a server: it
// needs the listen address, never the servers' token secrets (those stay
// in the server's environment; the client sends its own from MEMHOST_TOKEN).
func (f *configFlag) loadForClient(flags func(*config.Config) error) (*config.Config, error) {
	return f.loadWith(config.Options{LookupEnv: placeholderSecret, Override: flags})
}

// placeholderSecret stands in for a token secret or host key the client
// does not read: unique per variable, so no two tokens share one, and long
// enough for the host key's minimum whatever the variable's name.
func placeholderSecret(name string) (string, bool) {
	return "memhost-client-placeholder-" + name + strings.Repeat(".", coordinator.MinHostKeyBytes), true
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
		return describeDataDirError(cfg.DataDir, err)
	}
	// Probe with a real write: a read-only mount would otherwise surface
	// later as a plugin's SQLite or index error, or only on the first write.
	// A full disk is no reason to refuse: reads still work and writes
	// answer storage_full.
	f, err := os.CreateTemp(cfg.DataDir, ".memhost-probe-*")
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return nil
	}
	if err != nil {
		return describeDataDirError(cfg.DataDir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

func describeDataDirError(dir string, err error) error {
	// The message names the directory once: the path error's own path
	// (the directory again, or the probe file) and system call are dropped.
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		err = pathErr.Err
	}
	switch {
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("data directory %s is read-only: memhost keeps its state and the plugins' data there; mount it read-write", dir)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("data directory %s is not writable by this user", dir)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("data directory %s: it, or a folder above it, is a file", dir)
	}
	return fmt.Errorf("data directory %s: %w", dir, err)
}
