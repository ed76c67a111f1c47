package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/memhost/memhost/internal/httpapi"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func reindexCommand() *cobra.Command {
	var f clientFlags
	var realm string
	cmd := &cobra.Command{
		Use:   "reindex",
		Short: "Rebuild a realm provider's search index from its records",
		Long: `Rebuild the search index of a realm's provider from the records it stores,
then swap it in. The provider keeps answering meanwhile, from its old index
until the new one is ready; records are not changed. Use it after an index was
lost or damaged, or after a change in how text is tokenized.

Progress shows as a bar on a terminal and as plain lines otherwise; the last
line says how many records were indexed. Needs an application token (or no
tokens) and a provider with the reindex capability. One reindex of a realm
runs at a time: a second is refused while the first runs. Interrupting the
command cancels the rebuild and leaves the old index in place.`,
		Example: `  memhost reindex --realm acme
  MEMHOST_TOKEN=... memhost reindex --addr memhost.internal:7077
  memhost reindex --local --config memhost.hcl --realm acme`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// An interrupt cancels the rebuild (the old index stays) and,
			// with --local, still stops the plugins cleanly.
			return f.runInterruptible(cmd, func(ctx context.Context, c *apiClient) error {
				// The rebuild's own deadline is the server's, which this
				// command need not know; a server that stops answering (hung,
				// or a proxy holding the connection) is met by a bound on the
				// silence before and between lines instead, as a provider
				// reports progress every 100 ms or so.
				wctx, cancelWait := context.WithCancelCause(ctx)
				defer cancelWait(nil)
				silent := time.AfterFunc(requestDeadline, func() {
					cancelWait(fmt.Errorf("%w (nothing for %s; the server may be overloaded or hung)", errNoAnswer, requestDeadline))
				})
				defer silent.Stop()
				prog := newReindexProgress(cmd.ErrOrStderr())
				var result *httpapi.ReindexResult
				err := c.call(wctx, "POST", "/v1/admin/reindex", map[string]any{"realm": realm}, streamLines(func(line []byte) error {
					silent.Reset(requestDeadline)
					var l httpapi.ReindexLine
					if err := json.Unmarshal(line, &l); err != nil {
						return fmt.Errorf("the server answered a line that is not JSON: %w", err)
					}
					switch {
					case l.Error != nil:
						return &callError{Status: 200, Code: l.Error.Code, Message: l.Error.Message}
					case l.Progress != nil:
						prog.set(l.Progress.Done, l.Progress.Total)
					case l.Result != nil:
						result = l.Result
					}
					return nil
				}))
				prog.finish()
				if err != nil {
					if ctx.Err() != nil && cmd.Context().Err() == nil {
						return errors.New("reindex interrupted: the rebuild is canceled and the old index stays")
					}
					if cause := context.Cause(wctx); errors.Is(cause, errNoAnswer) {
						// Closing the connection cancels the rebuild on a server
						// that still hears it.
						return fmt.Errorf("reindex gave up: memhost at %s: %w", c.addr(), cause)
					}
					return err
				}
				if result == nil {
					return errors.New("the server ended its answer without a result; the reindex may not have finished")
				}
				fmt.Fprintf(cmd.OutOrStdout(), "reindexed %d records of realm %s in %.1f s\n", result.Reindexed, result.Realm, result.DurationMs/1000)
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&realm, "realm", "", "realm (default: the server's default realm)")
	return cmd
}

// reindexProgress shows a reindex's progress: a bar on a terminal,
// otherwise a plain line at most every few seconds.
type reindexProgress struct {
	w     io.Writer
	term  bool
	bar   *progressbar.ProgressBar
	last  time.Time
	start time.Time
	// said is the count the last line said, so a report of the same
	// count (an empty realm's 0 of 0, at its start and its end) is not
	// said twice.
	said *[2]int
}

func newReindexProgress(w io.Writer) *reindexProgress {
	p := &reindexProgress{w: w, start: time.Now()}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.term = true
	}
	return p
}

func (p *reindexProgress) set(done, total int) {
	if p.term {
		// The total is known from the first report on.
		if p.bar == nil {
			p.bar = progressbar.NewOptions(total,
				progressbar.OptionSetWriter(p.w), progressbar.OptionSetDescription("reindexing"),
				progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionShowCount(),
				progressbar.OptionShowIts(), progressbar.OptionSetItsString("records"), progressbar.OptionClearOnFinish())
		}
		_ = p.bar.Set(done)
		return
	}
	if p.said != nil && *p.said == [2]int{done, total} {
		return
	}
	if now := time.Now(); now.Sub(p.last) >= 2*time.Second || done >= total {
		p.last, p.said = now, &[2]int{done, total}
		pct := 100.0
		if total > 0 {
			pct = float64(done) * 100 / float64(total)
		}
		fmt.Fprintf(p.w, "reindex: %d of %d records (%.0f%%), %.1f s\n", done, total, pct, time.Since(p.start).Seconds())
	}
}

func (p *reindexProgress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
