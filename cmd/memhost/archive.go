package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/strictjson"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// Archive files are JSON Lines: one full record (the API's Record object,
// every field) per line, in id order as exported.

// maxLineBytes bounds one line of an import file: a record at every field
// limit, JSON-escaped, is well under it.
const maxLineBytes = 1 << 20

// importBatchBytes keeps an import request well under the server's default
// body limit (8 MiB).
const importBatchBytes = 4 << 20

func exportCommand() *cobra.Command {
	var f clientFlags
	var realm string
	cmd := &cobra.Command{
		Use:   "export [FILE]",
		Short: "Write every record of a realm as JSON Lines",
		Long: `Write every record of a realm, of every status, with every field (ids, scopes,
times, tags, trust, status, supersedes, use count), one JSON object a line in
id order, to FILE or standard output. Needs an application token (or no tokens)
and a provider with the archive capability. "memhost import" reads the file back.`,
		Example: `  memhost export --realm acme acme.jsonl
  MEMHOST_TOKEN=... memhost export --addr memhost.internal:7077 > default.jsonl`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := f.client(ctx)
			if err != nil {
				return err
			}
			defer c.close()
			out := cmd.OutOrStdout()
			var file *os.File
			if len(args) == 1 && args[0] != "-" {
				if file, err = os.Create(args[0]); err != nil {
					return err
				}
				defer file.Close()
				out = file
			}
			w := bufio.NewWriter(out)
			n, err := exportTo(ctx, c, realm, w)
			if err == nil {
				err = w.Flush()
			}
			if err == nil && file != nil {
				err = file.Sync()
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "exported %d records\n", n)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&realm, "realm", "", "realm (default: the server's default realm)")
	return cmd
}

// exportTo writes every record of realm to w, a line each, page by page.
func exportTo(ctx context.Context, c *apiClient, realm string, w io.Writer) (int, error) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	n, after := 0, ""
	for {
		var page struct {
			Records []sdk.Record `json:"records"`
			Next    string       `json:"next"`
		}
		if err := c.call(ctx, "POST", "/v1/export", map[string]any{"realm": realm, "after": after}, &page); err != nil {
			return n, err
		}
		for i := range page.Records {
			if err := enc.Encode(&page.Records[i]); err != nil {
				return n, err
			}
		}
		n += len(page.Records)
		if page.Next == "" {
			return n, nil
		}
		after = page.Next
	}
}

type importOptions struct {
	realm  string
	strict bool
	batch  int
}

// importStats is what an import did.
type importStats struct {
	Imported, Skipped, Bad int
}

func importCommand() *cobra.Command {
	var f clientFlags
	var o importOptions
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Load records from a JSON Lines file (as written by export)",
		Long: `Load full records from FILE, one JSON object a line, keeping their ids, times,
status and counters. Records go in batches, each stored all or nothing; a
record whose id is already stored (or whose content its scope already holds)
is skipped, so an interrupted import is resumed by running it again, without
duplicates. A bad line is reported by its number and skipped, and the command
fails at the end; with --strict the whole file is checked first and nothing is
imported if any line is bad. Progress shows as a bar on a terminal and as
plain lines otherwise. Needs an application token (or no tokens).`,
		Example: `  memhost import --realm acme acme.jsonl
  memhost import --local --strict backup.jsonl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			file, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer file.Close()
			info, err := file.Stat()
			if err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			if o.strict {
				if bad := checkLines(file, o.realm, stderr); bad > 0 {
					return fmt.Errorf("%s: %s; nothing imported (--strict)", args[0], count(bad, "bad line"))
				}
				if _, err := file.Seek(0, io.SeekStart); err != nil {
					return err
				}
			}
			c, err := f.client(ctx)
			if err != nil {
				return err
			}
			defer c.close()
			prog := newProgress(stderr, info.Size(), isTerminal(stderr))
			st, err := importFrom(ctx, c, o, file, stderr, prog)
			prog.finish()
			fmt.Fprintf(stderr, "imported %s, skipped %d already stored, %s\n", count(st.Imported, "record"), st.Skipped, count(st.Bad, "bad line"))
			if err != nil {
				return err
			}
			if st.Bad > 0 {
				return fmt.Errorf("%s: %s not imported", args[0], count(st.Bad, "bad line"))
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&o.realm, "realm", "", "realm to import into (default: each record's own realm)")
	cmd.Flags().BoolVar(&o.strict, "strict", false, "check every line first and import nothing if any is bad")
	cmd.Flags().IntVar(&o.batch, "batch", 500, "records per request (1-1000), each stored all or nothing")
	return cmd
}

// lineReader reads a file's lines, counting them and the bytes read.
type lineReader struct {
	sc    *bufio.Scanner
	line  int
	bytes int64
}

func newLineReader(r io.Reader) *lineReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	return &lineReader{sc: sc}
}

// next answers the next non-blank line, or false at the end.
func (l *lineReader) next() ([]byte, bool) {
	for l.sc.Scan() {
		l.line++
		b := l.sc.Bytes()
		l.bytes += int64(len(b)) + 1
		if len(bytes.TrimSpace(b)) > 0 {
			return b, true
		}
	}
	return nil, false
}

// err answers why reading stopped early, nil at the end of the file; the
// line it stopped at is l.line+1.
func (l *lineReader) err() error {
	err := l.sc.Err()
	if errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("the line is longer than %d MiB, the most an import reads", maxLineBytes>>20)
	}
	return err
}

// seenIDs finds an id that a file names twice in one realm: the later
// line would be skipped as "already stored". It keeps a 64-bit
// fingerprint of each realm and id, not the id, so a file of many GB
// costs little memory; two ids sharing a fingerprint are vanishingly rare.
type seenIDs struct {
	seed  maphash.Seed
	lines map[uint64]int
}

// check answers an error naming the earlier line when r's id was seen.
func (s *seenIDs) check(r *sdk.Record, line int) error {
	if s.lines == nil {
		s.seed, s.lines = maphash.MakeSeed(), map[uint64]int{}
	}
	key := maphash.String(s.seed, r.Realm+"\x00"+r.ID)
	if first, ok := s.lines[key]; ok {
		return fmt.Errorf("id %s is already on line %d", r.ID, first)
	}
	s.lines[key] = line
	return nil
}

// parseLine decodes one line strictly (sdk/strictjson, as the API will)
// and checks it as the provider will, so a bad line is reported by number
// instead of failing its whole batch.
func parseLine(b []byte, realm string) (sdk.Record, error) {
	var r sdk.Record
	if err := strictjson.Decode(b, &r); err != nil {
		return r, err
	}
	if realm != "" {
		r.Realm = realm
	}
	if r.Realm == "" {
		return r, errors.New("the record names no realm; give --realm")
	}
	probe := r
	if err := probe.PrepareImport(r.Realm); err != nil {
		return r, err
	}
	return r, nil
}

// count is "1 record", "2 records".
func count(n int, noun string) string {
	return fmt.Sprintf("%d %s", n, plural(n, noun))
}

// plural is noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// maxShownBadLines bounds the bad lines reported one by one: a file that
// is not JSON Lines at all (a binary, say) would otherwise print one error
// per line it happens to hold.
const maxShownBadLines = 10

// badLines reports bad lines, the first maxShownBadLines by number, and
// counts them all.
type badLines struct {
	w io.Writer
	n int
}

func (b *badLines) report(line int, err error) {
	b.n++
	if b.n <= maxShownBadLines {
		fmt.Fprintf(b.w, "line %d: %v\n", line, err)
	}
}

// close says how many bad lines went unshown.
func (b *badLines) close() {
	if hidden := b.n - maxShownBadLines; hidden > 0 {
		fmt.Fprintf(b.w, "... and %d more %s, not shown\n", hidden, plural(hidden, "bad line"))
	}
}

// checkLines reports the bad lines and answers how many there were.
func checkLines(r io.Reader, realm string, w io.Writer) int {
	lr, bad := newLineReader(r), &badLines{w: w}
	defer bad.close()
	var seen seenIDs
	for {
		b, ok := lr.next()
		if !ok {
			break
		}
		rec, err := parseLine(b, realm)
		if err == nil {
			err = seen.check(&rec, lr.line)
		}
		if err != nil {
			bad.report(lr.line, err)
		}
	}
	if err := lr.err(); err != nil {
		bad.report(lr.line+1, err)
	}
	return bad.n
}

// importFrom sends r's records in batches; a batch holds one realm's
// records only.
func importFrom(ctx context.Context, c *apiClient, o importOptions, r io.Reader, errw io.Writer, prog *progress) (importStats, error) {
	if o.batch < 1 || o.batch > sdk.MaxBatch {
		return importStats{}, fmt.Errorf("--batch %d is outside 1-%d", o.batch, sdk.MaxBatch)
	}
	var st importStats
	var batch []sdk.Record
	batchRealm, batchBytes, firstLine := "", 0, 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		var res sdk.ImportResult
		if err := c.call(ctx, "POST", "/v1/import", map[string]any{"realm": batchRealm, "records": batch}, &res); err != nil {
			return fmt.Errorf("lines %d and on: %w", firstLine, err)
		}
		st.Imported += res.Imported
		st.Skipped += res.Skipped
		batch, batchBytes = batch[:0], 0
		return nil
	}
	lr, bad := newLineReader(r), &badLines{w: errw}
	defer bad.close()
	var seen seenIDs
	for {
		b, ok := lr.next()
		if !ok {
			break
		}
		rec, err := parseLine(b, o.realm)
		if err == nil {
			err = seen.check(&rec, lr.line)
		}
		if err != nil {
			bad.report(lr.line, err)
			st.Bad = bad.n
			continue
		}
		if len(batch) > 0 && (rec.Realm != batchRealm || len(batch) == o.batch || batchBytes+len(b) > importBatchBytes) {
			if err := flush(); err != nil {
				return st, err
			}
			prog.set(lr.bytes-int64(len(b))-1, st)
		}
		if len(batch) == 0 {
			batchRealm, firstLine = rec.Realm, lr.line
		}
		batch = append(batch, rec)
		batchBytes += len(b)
	}
	if err := lr.err(); err != nil {
		return st, fmt.Errorf("line %d: %w", lr.line+1, err)
	}
	if err := flush(); err != nil {
		return st, err
	}
	prog.set(lr.bytes, st)
	return st, nil
}

// progress shows an import's progress: a bar on a terminal, otherwise a
// plain line at most every few seconds.
type progress struct {
	bar   *progressbar.ProgressBar
	w     io.Writer
	total int64
	last  time.Time
	start time.Time
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newProgress(w io.Writer, total int64, bar bool) *progress {
	p := &progress{w: w, total: total, start: time.Now()}
	if bar && total > 0 {
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w), progressbar.OptionShowBytes(true),
			progressbar.OptionSetDescription("importing"), progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
		// Start the bar's clocks now: it starts them at its first render
		// and first count otherwise, which for a file of one batch come
		// together at the end, and the rate is the file over a few
		// microseconds ("47 GB/s").
		_ = p.bar.RenderBlank()
		_ = p.bar.Add64(0)
	}
	return p
}

func (p *progress) set(done int64, st importStats) {
	if p.bar != nil {
		_ = p.bar.Set64(done)
		return
	}
	if now := time.Now(); now.Sub(p.last) >= 2*time.Second || done >= p.total {
		p.last = now
		pct := 100.0
		if p.total > 0 {
			pct = float64(done) * 100 / float64(p.total)
		}
		fmt.Fprintf(p.w, "import: %.0f%% of the file, %d imported, %d skipped, %s, %.1f s\n",
			pct, st.Imported, st.Skipped, count(st.Bad, "bad line"), time.Since(p.start).Seconds())
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
