package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/internal/config"
	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/spf13/cobra"
)

func pluginsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "plugins", Short: "Inspect, verify and package plugins"}
	cmd.AddCommand(pluginsListCommand(), pluginsVerifyCommand(), pluginsManifestCommand())
	return cmd
}

// loadPluginConfig reads the config for the plugins commands, with
// --plugin-dir applied. They start no server, so token secrets are not
// needed.
func loadPluginConfig(cf *configFlag, o *serveOverrides) (*config.Config, error) {
	return cf.loadForClient(o.set)
}

func pluginsListCommand() *cobra.Command {
	var cf configFlag
	var o serveOverrides
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the plugins found in the plugin directory (no plugin is started)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadPluginConfig(&cf, &o)
			if err != nil {
				return err
			}
			entries, refusals, err := pluginhost.Discover(cfg.PluginDir)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tVERSION\tKINDS\tPROTOCOLS\tEXECUTABLE")
			for _, e := range entries {
				fmt.Fprintf(w, "%s\t%s\t%v\t%v\t%s\n", e.Manifest.Name, e.Manifest.Version, e.Manifest.Kinds, e.Manifest.Protocols, e.Executable)
			}
			w.Flush()
			for _, r := range refusals {
				fmt.Fprintln(cmd.ErrOrStderr(), r)
			}
			printManifestWarnings(cmd.ErrOrStderr(), entries)
			return nil
		},
	}
	cf.register(cmd)
	o.registerPluginDir(cmd)
	return cmd
}

func pluginsVerifyCommand() *cobra.Command {
	var cf configFlag
	var o serveOverrides
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check every plugin: manifest, sha256, start, and Info against the manifest",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadPluginConfig(&cf, &o)
			if err != nil {
				return err
			}
			// A check changes nothing: the plugins run in the data
			// directory when there is one, else in a scratch one.
			dir, done, err := verifyDir(cfg.DataDir)
			if err != nil {
				return err
			}
			defer done()
			entries, refusals, err := pluginhost.Discover(cfg.PluginDir)
			if err != nil {
				return err
			}
			var refused []string
			for _, r := range refusals {
				refused = append(refused, r.Error())
			}
			plugins := len(refusals)
			printManifestWarnings(cmd.ErrOrStderr(), entries)
			// What serve would run without, verify passes with a warning.
			if dropAbsentCompactor(cfg, entries) {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: compaction is off: the default compactor's plugin %q is not in the plugin directory %s\n", config.DefaultCompactorPlugin, cfg.PluginDir)
			}
			// The config error holds every problem of every instance:
			// each is marked and counted on its own, whatever lines its
			// text spans.
			var problems []string
			if err := cfg.CheckPlugins(declared(entries, refusals)); err != nil {
				problems = []string{err.Error()}
				var cerr *config.Error
				if errors.As(err, &cerr) {
					problems = cerr.Problems()
				}
				refused = append(refused, problems...)
			}
			for _, e := range entries {
				conn, err := pluginhost.Start(cmd.Context(), e, pluginhost.StartOptions{Logger: hclog.NewNullLogger(), Dir: dir, Withhold: hostSecretEnv(cfg)})
				if err != nil {
					refused = append(refused, err.Error())
					plugins++
					continue
				}
				conn.Close()
				fmt.Fprintf(cmd.OutOrStdout(), "ok      %s %s (%s)\n", e.Manifest.Name, e.Manifest.Version, e.Executable)
			}
			for _, r := range refused {
				fmt.Fprintf(cmd.OutOrStdout(), "REFUSED %s\n", r)
			}
			var counts []string
			if plugins > 0 {
				counts = append(counts, fmt.Sprintf("%d plugin(s) refused", plugins))
			}
			if len(problems) > 0 {
				counts = append(counts, fmt.Sprintf("%d config problem(s)", len(problems)))
			}
			if len(counts) > 0 {
				return errors.New(strings.Join(counts, ", "))
			}
			return nil
		},
	}
	cf.register(cmd)
	o.registerPluginDir(cmd)
	return cmd
}

// verifyDir answers the directory plugins verify runs the plugins in:
// dataDir when it exists, else a scratch directory that done removes, so
// verifying (a refused config above all) leaves no data directory behind.
func verifyDir(dataDir string) (dir string, done func(), err error) {
	if _, err := os.Stat(dataDir); err == nil {
		return dataDir, func() {}, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", nil, describeDataDirError(dataDir, err)
	}
	tmp, err := os.MkdirTemp("", "memhost-verify-")
	if err != nil {
		return "", nil, err
	}
	return tmp, func() { _ = os.RemoveAll(tmp) }, nil
}

func pluginsManifestCommand() *cobra.Command {
	var script pluginhost.ScriptPlugin
	var force bool
	cmd := &cobra.Command{
		Use:   "manifest EXECUTABLE...",
		Short: "Start each plugin executable once and write its manifest beside it",
		Long: `Start each plugin executable once and write its manifest beside it.
With --interpreter, each argument is a script plugin's entry script, inside
its script tree (a directory of the plugin directory); the manifest pins the
interpreter and the tree's digest (docs/plugins.md, "Interpreted plugins").

The manifest is named for the name the plugin reports. One already there
is replaced, and the output says so, when it names the same executable; one
naming another executable belongs to another plugin and is refused unless
--force is given.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var errs []error
			for _, exe := range args {
				// Said once, as typed: the loader's errors repeat the path
				// and name the step that met it ("hash D: read D: is a
				// directory").
				if info, err := os.Stat(exe); err != nil {
					errs = append(errs, unreadable("plugin "+exe, err))
					continue
				} else if info.IsDir() {
					errs = append(errs, fmt.Errorf("plugin %s is a directory: name the plugin's executable (or, with --interpreter, its entry script)", exe))
					continue
				}
				write := pluginhost.WriteManifest
				if script.Interpreter != "" {
					write = func(ctx context.Context, exe string, logger hclog.Logger, force bool) (pluginhost.Written, error) {
						sp := script
						sp.Script = exe
						return pluginhost.WriteScriptManifest(ctx, sp, logger, force)
					}
				}
				w, err := write(context.WithoutCancel(cmd.Context()), exe, hclog.NewNullLogger(), force)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				m := w.Manifest
				switch {
				case !w.Replaced:
					fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%s %s)\n", w.Path, m.Name, m.Version)
				case w.Previous == "":
					fmt.Fprintf(cmd.OutOrStdout(), "replaced %s, which could not be read (%s %s)\n", w.Path, m.Name, m.Version)
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "replaced %s, which named %s (%s %s)\n", w.Path, w.Previous, m.Name, m.Version)
				}
			}
			if len(errs) > 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), errors.Join(errs...))
				return fmt.Errorf("%d manifest(s) not written", len(errs))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&script.Interpreter, "interpreter", "", "absolute path of the interpreter that runs script plugins")
	cmd.Flags().StringArrayVar(&script.Args, "interpreter-arg", nil, "an argument for the interpreter, before the script (repeatable)")
	cmd.Flags().BoolVar(&force, "force", false, "replace a manifest that names another executable")
	return cmd
}

// printManifestWarnings names what this memhost ignored in each manifest
// (fields and kinds a newer memhost added).
func printManifestWarnings(w io.Writer, entries []pluginhost.Entry) {
	for _, e := range entries {
		for _, warning := range e.Manifest.Warnings {
			fmt.Fprintf(w, "warning: %s: %s\n", e.ManifestPath, warning)
		}
	}
}
