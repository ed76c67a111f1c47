package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/proposal"
	"github.com/spf13/cobra"
)

// The review commands: an application's view of agents' proposals and of
// what each turn injected.

func proposalsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "proposals",
		Short: "List, approve or reject agents' pending proposals (application token)",
	}
	cmd.AddCommand(proposalsListCommand(), proposalsDecideCommand("approve"), proposalsDecideCommand("reject"))
	return cmd
}

// proposalPage is the part of GET /v1/proposals the CLI prints.
type proposalPage struct {
	Pending   int    `json:"pending"`
	Next      string `json:"next"`
	Proposals []struct {
		ID        string    `json:"id"`
		Proposer  string    `json:"proposer"`
		Imported  bool      `json:"imported"`
		CreatedAt time.Time `json:"created_at"`
		Target    string    `json:"target"`
		Record    struct {
			Scope       string    `json:"scope"`
			Kind        string    `json:"kind"`
			Title       string    `json:"title"`
			Description string    `json:"description"`
			Body        string    `json:"body"`
			Tags        []string  `json:"tags"`
			ExpiresAt   time.Time `json:"expires_at"`
			OccurredAt  time.Time `json:"occurred_at"`
			Thread      *struct {
				ID  string `json:"id"`
				Seq int64  `json:"seq"`
			} `json:"thread"`
		} `json:"record"`
		Diff []struct {
			Field string `json:"field"`
			Op    string `json:"op"`
			Text  string `json:"text"`
		} `json:"diff"`
	} `json:"proposals"`
}

func proposalsListCommand() *cobra.Command {
	var f clientFlags
	var o proposalListing
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List a realm's pending proposals, oldest first",
		Long: `List a realm's pending proposals, oldest first, a page of --limit at a time.
When more are pending, the next page's cursor is printed on standard error
for --after; --all follows the pages to the end.`,
		Example: "  memhost proposals list --realm acme --diff\n  memhost proposals list --realm acme --all",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list := func(ctx context.Context, c *apiClient) error { return o.list(ctx, cmd, c) }
			if !o.all {
				return f.run(cmd, list)
			}
			// Page after page: no deadline on the whole, only on each
			// request (as an export's), and an interrupt ends it.
			return f.runInterruptible(cmd, list)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&o.realm, "realm", "", "realm (default: the server's default realm)")
	cmd.Flags().IntVar(&o.limit, "limit", 50, "proposals to list (1-500); with --all, per page")
	cmd.Flags().StringVar(&o.after, "after", "", "start after this cursor (the next an earlier listing printed)")
	cmd.Flags().BoolVar(&o.all, "all", false, "list every pending proposal, following the pages to the end")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the answer as JSON (with --all, every page's proposals in one answer)")
	cmd.Flags().BoolVar(&o.diff, "diff", false, "print each proposal's diff against the record it would supersede (every field approval changes)")
	return cmd
}

// proposalListing is what `memhost proposals list` was asked for.
type proposalListing struct {
	realm, after      string
	limit             int
	all, asJSON, diff bool
}

// list prints the page of proposals after o.after, or with o.all every
// page from there to the end.
func (o proposalListing) list(ctx context.Context, cmd *cobra.Command, c *apiClient) error {
	after := o.after
	// A cursor sent before would repeat its pages for ever.
	sent := map[string]bool{after: true}
	var last proposalPage
	var rows []json.RawMessage
	var realm any
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
	if !o.asJSON {
		fmt.Fprintln(w, "ID\tPROPOSED BY\tAT\tSCOPE\tKIND\tTITLE\tEXPIRES\tSUPERSEDES")
	}
	for {
		q := url.Values{"limit": {fmt.Sprint(o.limit)}}
		if o.realm != "" {
			q.Set("realm", o.realm)
		}
		if after != "" {
			q.Set("after", after)
		}
		var raw json.RawMessage
		if err := c.callWithin(ctx, requestDeadline, "GET", "/v1/proposals?"+q.Encode(), nil, &raw); err != nil {
			return err
		}
		if o.asJSON && !o.all {
			var page map[string]any
			if err := json.Unmarshal(raw, &page); err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), page)
		}
		var page proposalPage
		if err := json.Unmarshal(raw, &page); err != nil {
			return err
		}
		last = page
		if o.asJSON {
			var whole struct {
				Realm     any               `json:"realm"`
				Proposals []json.RawMessage `json:"proposals"`
			}
			if err := json.Unmarshal(raw, &whole); err != nil {
				return err
			}
			realm = whole.Realm
			rows = append(rows, whole.Proposals...)
		} else {
			o.printPage(w, &page)
		}
		if !o.all || page.Next == "" {
			break
		}
		if sent[page.Next] {
			return fmt.Errorf("memhost at %s answered the proposals cursor %q a second time, so its pages would repeat for ever; stopped", c.addr(), page.Next)
		}
		after = page.Next
		sent[after] = true
	}
	if o.asJSON {
		if rows == nil {
			rows = []json.RawMessage{}
		}
		return printJSON(cmd.OutOrStdout(), map[string]any{"realm": realm, "pending": last.Pending, "next": "", "proposals": rows})
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%d pending in all\n", last.Pending)
	if last.Next != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "more after these: --after %s (or --all)\n", last.Next)
	}
	return nil
}

// printPage writes one page's proposals as table rows.
func (o proposalListing) printPage(w io.Writer, page *proposalPage) {
	for _, p := range page.Proposals {
		by := orDash(p.Proposer)
		if p.Imported {
			by = "(imported)"
		}
		expires := "-"
		if !p.Record.ExpiresAt.IsZero() {
			expires = p.Record.ExpiresAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, by, p.CreatedAt.Format(time.RFC3339),
			p.Record.Scope, p.Record.Kind, printable(p.Record.Title), expires, orDash(p.Target))
		if !o.diff {
			continue
		}
		for _, d := range p.Diff {
			fmt.Fprintf(w, "\t%s %s: %s\n", d.Op, d.Field, printable(d.Text))
		}
		if p.Target == "" {
			// A new record has no diff; what approval sets is shown all
			// the same, against no record: its description (builds
			// inject it), tags and body too.
			if p.Record.Description != "" {
				fmt.Fprintf(w, "\t+ description: %s\n", printable(p.Record.Description))
			}
			tags := slices.DeleteFunc(slices.Clone(p.Record.Tags), func(t string) bool { return strings.EqualFold(t, proposal.Tag) })
			if len(tags) > 0 {
				slices.Sort(tags)
				fmt.Fprintf(w, "\t+ tags: %s\n", printable(strings.Join(tags, ", ")))
			}
			if !p.Record.OccurredAt.IsZero() {
				fmt.Fprintf(w, "\t+ occurred_at: %s\n", p.Record.OccurredAt.UTC().Format(time.RFC3339Nano))
			}
			if t := p.Record.Thread; t != nil {
				fmt.Fprintf(w, "\t+ thread: %s #%d\n", printable(t.ID), t.Seq)
			}
			if p.Record.Body != "" {
				for _, line := range strings.Split(p.Record.Body, "\n") {
					fmt.Fprintf(w, "\t+ body: %s\n", printable(line))
				}
			}
		}
	}
}

func proposalsDecideCommand(verb string) *cobra.Command {
	var f clientFlags
	var realm, target string
	done := verb + "d" // approved
	if verb == "reject" {
		done = "rejected"
	}
	cmd := &cobra.Command{
		Use:     verb + " ID...",
		Short:   strings.ToUpper(verb[:1]) + verb[1:] + " pending proposals",
		Example: "  memhost proposals " + verb + " --realm acme 01J...",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// An empty id would call another endpoint (/v1/records/approve).
			if slices.Contains(args, "") {
				return errors.New("a proposal id is empty; nothing was " + done)
			}
			// The target is looked up when the approval runs: naming the
			// one the list showed keeps a record written in its place since
			// from being replaced unseen.
			shown := verb == "approve" && cmd.Flags().Changed("target")
			if shown && len(args) > 1 {
				return errors.New("--target names the record one proposal replaces: approve one proposal with it; nothing was approved")
			}
			return f.run(cmd, func(ctx context.Context, c *apiClient) error {
				v := url.Values{}
				if realm != "" {
					v.Set("realm", realm)
				}
				if shown {
					v.Set("target", target)
				}
				q := ""
				if len(v) > 0 {
					q = "?" + v.Encode()
				}
				var failed int
				for _, id := range args {
					var out map[string]any
					if err := c.call(ctx, "POST", "/v1/records/"+url.PathEscape(id)+"/"+verb+q, nil, &out); err != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", id, err)
						failed++
						continue
					}
					if verb == "approve" {
						fmt.Fprintf(cmd.OutOrStdout(), "%s approved as %v\n", id, out["id"])
					} else {
						fmt.Fprintf(cmd.OutOrStdout(), "%s rejected\n", id)
					}
				}
				if failed > 0 {
					return fmt.Errorf("%d of %d proposals were not %s", failed, len(args), done)
				}
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&realm, "realm", "", "realm (default: the server's default realm)")
	if verb == "approve" {
		cmd.Flags().StringVar(&target, "target", "", "approve only if the proposal still replaces record `ID`, as \"proposals list\" showed it under SUPERSEDES (--target= for none: it adds a record); else nothing changes")
	}
	return cmd
}

func traceCommand() *cobra.Command {
	var f clientFlags
	var realm, identity, after string
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "trace SESSION",
		Short: "Show what each turn of a session injected and what it left out (application token)",
		Example: `  memhost trace --realm acme --identity alice chat-42
  memhost trace --json chat-42 | jq '.turns[-1].excluded'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "" {
				return errors.New("the session is empty: name the session to trace")
			}
			return f.run(cmd, func(ctx context.Context, c *apiClient) error {
				q := url.Values{"limit": {fmt.Sprint(limit)}}
				if realm != "" {
					q.Set("realm", realm)
				}
				if identity != "" {
					q.Set("identity", identity)
				}
				if after != "" {
					q.Set("after", after)
				}
				path := "/v1/sessions/" + url.PathEscape(args[0]) + "/trace?" + q.Encode()
				var raw map[string]any
				if asJSON {
					if err := c.call(ctx, "GET", path, nil, &raw); err != nil {
						return err
					}
					return printJSON(cmd.OutOrStdout(), raw)
				}
				var out struct {
					Turns []coordinator.TurnTrace `json:"turns"`
					Next  string                  `json:"next"`
				}
				if err := c.call(ctx, "GET", path, nil, &out); err != nil {
					return err
				}
				if len(out.Turns) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "no traced turns for this session")
				}
				for _, t := range out.Turns {
					printTurn(cmd, t)
				}
				if out.Next != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "older turns: --after %s\n", out.Next)
				}
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&realm, "realm", "", "realm (default: the server's default realm)")
	cmd.Flags().StringVar(&identity, "identity", "", "only this identity's turns")
	cmd.Flags().IntVar(&limit, "limit", 100, "newest turns to show (1-1000)")
	cmd.Flags().StringVar(&after, "after", "", "show the turns before this cursor (the one an earlier trace printed)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the answer as JSON")
	return cmd
}

func printTurn(cmd *cobra.Command, t coordinator.TurnTrace) {
	out := cmd.OutOrStdout()
	head := fmt.Sprintf("%s  %s %s  identity %s", t.At.Format(time.RFC3339), t.Surface, t.Kind, t.Identity)
	switch t.Kind {
	case coordinator.TraceDefang:
		fmt.Fprintf(out, "%s  %d forged markers defanged\n", head, t.DefangHits)
		return
	case coordinator.TraceReset:
		fmt.Fprintf(out, "%s  compaction reset the budget and dedup set\n", head)
		return
	}
	if t.SkipReason != coordinator.SkipNone {
		head += "  skipped: " + string(t.SkipReason)
	}
	fmt.Fprintf(out, "%s  %d of %d bytes\n", head, t.Bytes, t.Budget)
	for _, r := range t.Included {
		fmt.Fprintf(out, "  + %s  %s  %s  trust %s  %d bytes  score %.3g\n", r.ID, traceTitle(r), r.Scope, r.Trust, r.Bytes, r.Score)
	}
	for _, r := range t.Excluded {
		fmt.Fprintf(out, "  - %s  %s  %s  left out: %s\n", r.ID, traceTitle(r), r.Scope, r.Reason)
	}
	if t.DedupExcluded > 0 {
		fmt.Fprintf(out, "  - %d records injected earlier in the session, left out of the recall (dedup)\n", t.DedupExcluded)
	}
	if t.OutOfScope > 0 {
		fmt.Fprintf(out, "  - %d records a plugin answered outside the turn's scopes, left out (the host's log names the plugin)\n", t.OutOfScope)
	}
}

// traceTitle is a trace row's title, quoted so terminal escapes are
// inert, or says the record was forgotten.
func traceTitle(r coordinator.TraceRecord) string {
	if r.Forgotten {
		return "(forgotten)"
	}
	return fmt.Sprintf("%q", r.Title)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printable keeps a terminal safe from what memory holds: control
// characters (escape sequences among them) print as their Go escapes.
func printable(s string) string {
	q := fmt.Sprintf("%q", s)
	return q[1 : len(q)-1]
}
