// Command memhost is the memory host: it runs the recall coordinator and
// the memory guide behind an HTTP API, and supervises the plugins that
// store, rank, summarise and resolve memory.
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/sdk"
)

// version and commit identify the build; make sets them with -ldflags.
var (
	version = "0.1.0-dev"
	commit  = "unknown"
)

func main() {
	if err := rootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "memhost:", err)
		os.Exit(1)
	}
}

// terminalText answers an error message rendered by the default rules for
// model-bound text, as the server renders the errors it answers: a
// command's check of a file's contents (an import's bad line) quotes what
// the file holds, written by whoever wrote the file, and an agent that
// runs the command reads its output. What the caller typed itself (a
// flag, a path) is printed as typed: rendering it changed a path holding
// "memtoken" into another path.
func terminalText(msg string) string {
	c, err := terminalRenderer()
	if err != nil {
		return msg
	}
	return c.RenderText(sdk.Identity{}, msg, coordinator.TextError)
}

// terminalRenderer is the process's renderer for terminalText, made at
// its first use and left for the exit to end.
var terminalRenderer = sync.OnceValues(defaultRenderer)

// defaultRenderer is a coordinator serving no realm, for rendering text
// by the default rules where no config is read.
func defaultRenderer() (*coordinator.Coordinator, error) {
	return coordinator.New(coordinator.DefaultConfig(), coordinator.Options{Providers: coordinator.RealmProviders{}})
}

func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "memhost",
		Short:         "Long-term memory for LLM agents, with pluggable backends",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("memhost {{.Version}}\n")
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if err := checkEmptyFlags(cmd); err != nil {
			return err
		}
		return checkText(cmd, args)
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return plainFlagError(err) })
	root.Version = version + " (commit " + commit + ")"
	root.AddCommand(serveCommand(), mcpCommand(), rememberCommand(), recallCommand(), injectCommand(), exportCommand(), importCommand(), reindexCommand(), benchCommand(), pluginsCommand(), proposalsCommand(), traceCommand(), versionCommand())
	nameArgs(root)
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes a command that only groups others
// ("plugins", "proposals") refuse a word that names none of them: cobra
// printed the group's help and exited 0, so a misspelt
// `memhost proposals aprove ID` approved nothing and reported success.
// Alone, the group still prints its help.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !cmd.HasParent() || !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if c.SuggestionsMinimumDistance <= 0 {
			c.SuggestionsMinimumDistance = 2 // cobra's default, set only for the root
		}
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", s[0])
		}
		return fmt.Errorf("%s (see %s --help)", msg, c.CommandPath())
	}
}

// nameArgs makes every command's argument check say what the command
// takes, from its Use line ("memhost recall needs QUERY"), rather than
// count them ("accepts 1 arg(s), received 0").
func nameArgs(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if check(c, args) == nil {
				return nil
			}
			takes := strings.TrimSpace(strings.TrimPrefix(c.Use, c.Name()))
			name := strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
			switch {
			case takes == "":
				return fmt.Errorf("%s takes no arguments; got %q (flags start with --)", name, args)
			case len(args) == 0:
				return fmt.Errorf("%s needs %s (see %s --help)", name, takes, c.CommandPath())
			}
			return fmt.Errorf("%s takes %s; got %d arguments: %q (quote an argument holding spaces)", name, takes, len(args), args)
		}
	}
	for _, sub := range cmd.Commands() {
		nameArgs(sub)
	}
}

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and the commit memhost was built from",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "memhost %s (commit %s)\n", version, commit)
		},
	}
}

// checkText refuses a flag or argument sent to the server as text that
// is not valid UTF-8: JSON would carry each bad byte as U+FFFD, so the
// server stored "caf\ufffd" for "caf\xe9" where the same bytes sent to
// the API are refused. File names (pathFlags, and the arguments of the
// commands in pathArgs) are the file system's, not text, and are left.
func checkText(cmd *cobra.Command, args []string) error {
	var bad error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if bad == nil && !pathFlags[f.Name] && !utf8.ValidString(f.Value.String()) {
			bad = fmt.Errorf("--%s is not valid UTF-8 text (memhost keeps text as UTF-8; convert it first, e.g. with iconv)", f.Name)
		}
	})
	if pathArgs[cmd.Name()] || cmd.HasParent() && cmd.Parent().Name() == "plugins" {
		return bad
	}
	for i, a := range args {
		if bad == nil && !utf8.ValidString(a) {
			bad = fmt.Errorf("argument %d is not valid UTF-8 text (memhost keeps text as UTF-8; convert it first, e.g. with iconv)", i+1)
		}
	}
	return bad
}

// noEmptyFlags are the flags whose empty value means "not given": given
// empty, as `--config "$MEMHOST_CONFIG"` is with the variable unset, the
// command went its other way in silence (serve on the built-in defaults
// and a ./memhost-data it created, mcp start plugins instead of calling
// the server at --addr, export, import or reindex the default realm or
// each record's own). A required one (--identity of recall, --session of
// inject) was sent empty for the server to refuse.
var noEmptyFlags = []string{"config", "data-dir", "plugin-dir", "listen", "log-level", "addr", "realm", "identity", "session", "scope"}

// checkEmptyFlags refuses a flag of noEmptyFlags given an empty value.
func checkEmptyFlags(cmd *cobra.Command) error {
	for _, name := range noEmptyFlags {
		f := cmd.Flags().Lookup(name)
		if f == nil || !f.Changed || f.Value.String() != "" {
			continue
		}
		if _, required := f.Annotations[cobra.BashCompOneRequiredFlag]; required {
			return fmt.Errorf("--%s is empty (an unset variable?): give it a value", name)
		}
		return fmt.Errorf("--%s is empty (an unset variable?): give it a value, or leave it out for its default", name)
	}
	return nil
}

// pathFlags name files or directories; pathArgs are the commands whose
// arguments do.
var (
	pathFlags = map[string]bool{"config": true, "data-dir": true, "plugin-dir": true, "interpreter": true, "interpreter-arg": true, "locomo": true, "longmemeval": true}
	pathArgs  = map[string]bool{"export": true, "import": true}
)

// plainFlagError says what a flag's value should have been instead of
// naming the Go function that failed to parse it ("strconv.ParseInt:
// parsing "abc": invalid syntax").
func plainFlagError(err error) error {
	var ne *strconv.NumError
	if !errors.As(err, &ne) {
		return err
	}
	want := "a whole number"
	switch {
	case ne.Func == "ParseBool":
		want = "true or false"
	case ne.Func == "ParseFloat":
		want = "a number"
	case errors.Is(ne.Err, strconv.ErrRange):
		want = "a whole number in range"
	}
	prefix := strings.TrimSuffix(err.Error(), ": "+ne.Error())
	return fmt.Errorf("%s: want %s", prefix, want)
}
