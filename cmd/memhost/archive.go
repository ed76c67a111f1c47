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
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/memhost/memhost/coordinator"
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

// importBatchBytes bounds the encoded records of one import request: under
// the server's default body limit (server.max_body_bytes, 4 MiB) with room
// for the rest of the request. A server configured lower answers 413, and
// the batch is sent again in halves.
const importBatchBytes = 3 << 20

// requestDeadline bounds one request of an export or import: well past the
// server's own 30 s bound on a request, so only a server that is hung or
// unreachable meets it. A variable for the tests.
var requestDeadline = 2 * time.Minute

func exportCommand() *cobra.Command {
	var f clientFlags
	var realm string
	cmd := &cobra.Command{
		Use:   "export [FILE]",
		Short: "Write every record of a realm as JSON Lines",
		Long: `Write every record of a realm, of every status, with every field (ids, scopes,
times, tags, trust, status, supersedes, use count), one JSON object a line in
id order, to FILE or standard output. FILE is written under a temporary name
beside it and renamed only once the export is complete, so a failed or
interrupted export leaves FILE as it was. Progress shows on standard error.
Needs an application token (or no tokens) and a provider with the archive
capability. "memhost import" reads the file back.`,
		Example: `  memhost export --realm acme acme.jsonl
  MEMHOST_TOKEN=... memhost export --addr memhost.internal:7077 > default.jsonl`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// An interrupt ends the export cleanly: the partial file is
			// removed and, with --local, the plugins stop.
			ctx, stop := signal.NotifyContext(cmd.Context(), stopSignals...)
			defer stop()
			out := outputFile{w: cmd.OutOrStdout()}
			if len(args) == 1 && args[0] != "-" {
				var err error
				if out, err = createOutputFile(args[0], cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			defer out.discard()
			c, err := f.client(ctx)
			if err != nil {
				return err
			}
			defer c.close()
			w := bufio.NewWriter(out.w)
			prog := newCountProgress(cmd.ErrOrStderr(), "export", "exporting")
			n, targets, err := exportTo(ctx, c, realm, w, prog)
			prog.finish()
			if err == nil {
				err = w.Flush()
			}
			if err == nil && out.tmp != nil && len(targets) > 0 {
				var stale map[string]bool
				if stale, err = out.staleActive(targets); err == nil {
					err = dropStillActive(ctx, c, realm, stale)
				}
				if err == nil && len(stale) > 0 {
					err = out.settle(stale)
				}
			}
			if err == nil {
				err = out.commit()
			}
			if err != nil {
				if ctx.Err() != nil && cmd.Context().Err() == nil {
					err = fmt.Errorf("export interrupted after %s", count(n, "record"))
				}
				switch {
				case out.path != "" && out.existed:
					return fmt.Errorf("%s left as it was: %w", out.path, sdk.FileProblem(err))
				case out.path != "":
					return fmt.Errorf("%s not written: %w", out.path, sdk.FileProblem(err))
				case out.w == cmd.OutOrStdout():
					var pe *fs.PathError
					if errors.As(err, &pe) {
						return fmt.Errorf("standard output: %w", pe.Err)
					}
				}
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "exported %s\n", count(n, "record"))
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&realm, "realm", "", "realm (default: the server's default realm)")
	return cmd
}

// outputFile is where an export or a bench report writes: standard
// output, a device or pipe named as FILE (written in place), or a
// temporary file beside FILE that commit renames over it, so a run that
// fails leaves what FILE held.
type outputFile struct {
	w       io.Writer
	path    string   // FILE, when a temporary file stands in for it
	existed bool     // whether FILE was there before
	tmp     *os.File // the temporary file, nil once committed or discarded
}

// createOutputFile opens the output for FILE path. A directory is refused
// before any work is done. An existing FILE in a directory this user may
// not create files in is written in place, with a warning on warn.
func createOutputFile(path string, warn io.Writer) (outputFile, error) {
	// A symbolic link is written through, as opening it would: the
	// rename replaces the file it names, not the link.
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	info, err := os.Stat(path)
	switch {
	case err == nil && info.IsDir():
		return outputFile{}, fmt.Errorf("%s is a directory: name the file to write", path)
	case err == nil && !info.Mode().IsRegular():
		// /dev/stdout, a named pipe: nothing to rename over.
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return outputFile{}, err
		}
		return outputFile{w: f}, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return outputFile{}, err
	}
	// A new export holds every record of a realm in full: it is the
	// user's alone, as the host's own data files are, whatever the umask.
	mode := fs.FileMode(0o600)
	if err == nil {
		mode = info.Mode().Perm()
	}
	dir, base := filepath.Split(path)
	var tmp *os.File
	for range 100 {
		name := filepath.Join(dir, fmt.Sprintf(".%s.partial-%d", base, rand.Uint32()))
		tmp, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if errors.Is(err, fs.ErrPermission) && info != nil {
		f, ferr := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if ferr == nil {
			fmt.Fprintf(warn, "warning: cannot create a file in %s, so %s is written in place: an export that fails leaves it incomplete\n", filepath.Clean(dir), path)
			return outputFile{w: f}, nil
		}
	}
	if err != nil {
		// The temporary name means nothing to the operator: say what
		// is wrong with the directory.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return outputFile{}, fmt.Errorf("cannot write %s: directory %s: %w", path, filepath.Clean(dir), err)
	}
	// An existing file keeps its permissions exactly, umask or not.
	_ = tmp.Chmod(mode)
	return outputFile{w: tmp, path: path, existed: info != nil, tmp: tmp}, nil
}

// commit makes the written data durable and puts it in place.
func (o *outputFile) commit() error {
	if o.tmp == nil {
		f, ok := o.w.(*os.File)
		if !ok || f == os.Stdout {
			return nil
		}
		if info, err := f.Stat(); err == nil && info.Mode().IsRegular() {
			if err := f.Sync(); err != nil {
				f.Close()
				return err
			}
		}
		return f.Close()
	}
	tmp := o.tmp
	o.tmp = nil
	err := tmp.Sync()
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), o.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	// The rename itself survives a crash once the directory is synced.
	if d, err := os.Open(filepath.Dir(o.path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// staleActive answers the ids of targets written active into the
// temporary file.
func (o *outputFile) staleActive(targets map[string]bool) (map[string]bool, error) {
	in, err := os.Open(o.tmp.Name())
	if err != nil {
		return nil, err
	}
	defer in.Close()
	stale := map[string]bool{}
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 64<<20) // a line is one record, at most a few hundred KiB
	for sc.Scan() {
		var head struct{ ID, Status string }
		if json.Unmarshal(sc.Bytes(), &head) == nil && targets[head.ID] && head.Status == string(sdk.StatusActive) {
			stale[head.ID] = true
		}
	}
	return stale, sc.Err()
}

// dropStillActive takes out of stale the records the store holds active
// now: a successor naming a record does not make it superseded (an import
// stores records as given, a markdown file may be edited back to active),
// and the file must hold what the store does. Only a record the store
// superseded since its page was read (or forgot) stays to be settled.
func dropStillActive(ctx context.Context, c *apiClient, realm string, stale map[string]bool) error {
	q := ""
	if realm != "" {
		q = "?realm=" + url.QueryEscape(realm)
	}
	for id := range stale {
		var now struct{ Status sdk.Status }
		err := c.callWithin(ctx, requestDeadline, "GET", "/v1/records/"+url.PathEscape(id)+q, nil, &now)
		var ce *callError
		switch {
		case errors.As(err, &ce) && ce.Status == http.StatusNotFound:
		case err != nil:
			return err
		case now.Status == sdk.StatusActive:
			delete(stale, id)
		}
	}
	return nil
}

// settle rewrites the temporary file with every record of targets that
// was written as active marked superseded, as its successor in the file
// says it is: the store superseded it between the reads of their pages,
// and an import of the file would otherwise hold two active versions, a
// state the store never had. The rewrite goes to a second temporary file,
// which then stands in for the first.
func (o *outputFile) settle(targets map[string]bool) error {
	// Most exports with supersede chains wrote each older version as
	// superseded: a read finds whether any line needs the rewrite.
	stale := func(line []byte) bool {
		var head struct{ ID, Status string }
		return json.Unmarshal(line, &head) == nil && targets[head.ID] && head.Status == string(sdk.StatusActive)
	}
	in, err := os.Open(o.tmp.Name())
	if err != nil {
		return err
	}
	defer in.Close()
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 64<<20) // a line is one record, at most a few hundred KiB
	found := false
	for !found && sc.Scan() {
		found = stale(sc.Bytes())
	}
	if err := sc.Err(); err != nil || !found {
		return err
	}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return err
	}
	info, err := o.tmp.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(o.tmp.Name()+".settled", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return err
	}
	w := bufio.NewWriter(out)
	sc = bufio.NewScanner(in)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if stale(line) {
			var r sdk.Record
			if err := json.Unmarshal(line, &r); err != nil {
				out.Close()
				return err
			}
			r.Status = sdk.StatusSuperseded
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(&r); err != nil {
				out.Close()
				return err
			}
			line = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		}
		w.Write(line)
		w.WriteByte('\n')
	}
	err = sc.Err()
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		out.Close()
		os.Remove(out.Name())
		return err
	}
	path := o.tmp.Name()
	o.tmp.Close()
	err = os.Rename(out.Name(), path)
	out.Close()
	if err != nil {
		os.Remove(out.Name())
		o.tmp = nil // commit must not rename what is not there
		os.Remove(path)
		return err
	}
	// commit syncs and renames the temporary file by this handle's name.
	if o.tmp, err = os.OpenFile(path, os.O_WRONLY, 0); err != nil {
		os.Remove(path)
		return err
	}
	o.w = o.tmp
	return nil
}

// discard removes the temporary file of an export that did not commit.
func (o *outputFile) discard() {
	if o.tmp != nil {
		o.tmp.Close()
		os.Remove(o.tmp.Name())
		o.tmp = nil
	}
}

// exportTo writes every record of realm to w, a line each, page by page.
// It answers the ids that a written record in force (active or itself
// superseded) supersedes: each page is read at its own time, so a record
// superseded while the export ran may have been written as active on an
// earlier page than its successor (settle).
func exportTo(ctx context.Context, c *apiClient, realm string, w io.Writer, prog *countProgress) (int, map[string]bool, error) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	n, after := 0, ""
	targets := map[string]bool{}
	// A cursor sent before would repeat its pages for ever.
	sent := map[string]bool{after: true}
	for {
		var page struct {
			Records []sdk.Record `json:"records"`
			Next    string       `json:"next"`
		}
		if err := c.callWithin(ctx, requestDeadline, "POST", "/v1/export", map[string]any{"realm": realm, "after": after}, &page); err != nil {
			return n, nil, err
		}
		for i := range page.Records {
			r := &page.Records[i]
			if err := enc.Encode(r); err != nil {
				return n, nil, err
			}
			if r.Supersedes != "" && (r.Status == sdk.StatusActive || r.Status == sdk.StatusSuperseded) {
				targets[r.Supersedes] = true
			}
		}
		n += len(page.Records)
		prog.set(n)
		if page.Next == "" {
			return n, targets, nil
		}
		if sent[page.Next] {
			return n, nil, fmt.Errorf("memhost at %s answered the export cursor %q a second time, so its pages would repeat for ever; stopped", c.addr(), page.Next)
		}
		after = page.Next
		sent[after] = true
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
	// Retired counts stored records the file moved on to a later status
	// (superseded, tombstoned): a newer export of them.
	Retired int
}

func importCommand() *cobra.Command {
	var f clientFlags
	var o importOptions
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Load records from a JSON Lines file (as written by export)",
		Long: `Load full records from FILE ("-" for standard input), one JSON object a line,
keeping their ids, times, status and counters. Records go in batches, each
stored all or nothing; a record whose id is already stored (or whose content
its scope already holds) is skipped, so an interrupted import is resumed by
running it again, without duplicates; a stored record the file says was
superseded or tombstoned since takes that status (counted as retired), and
none is moved back to an earlier one. A bad line is reported by its number and
skipped, and the command fails at the end; with --strict the whole file is
checked first and nothing is imported if any line is bad (so --strict needs a
file it can read twice, not standard input). Progress shows as a bar on a
terminal and as plain lines otherwise. Needs an application token (or no
tokens).`,
		Example: `  memhost import --realm acme acme.jsonl
  memhost import --local --strict backup.jsonl
  gunzip -c backup.jsonl.gz | memhost import -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.batch < 1 || o.batch > sdk.MaxBatch {
				return fmt.Errorf("--batch %d is outside 1-%d", o.batch, sdk.MaxBatch)
			}
			// A bad --realm would be reported against every line.
			if o.realm != "" {
				var fe *sdk.FieldError
				if err := sdk.ValidateRealm(o.realm); errors.As(err, &fe) {
					return fmt.Errorf("--realm %s", fe.Problem)
				}
			}
			// An interrupt stops between batches and says how to resume;
			// with --local the plugins stop cleanly.
			ctx, stop := signal.NotifyContext(cmd.Context(), stopSignals...)
			defer stop()
			in, name, size, err := openImportFile(args[0], cmd.InOrStdin(), o.strict)
			if err != nil {
				return err
			}
			defer in.Close()
			stderr := cmd.ErrOrStderr()
			if o.strict {
				check := newCheckProgress(stderr, size, isTerminal(stderr))
				bad, err := checkLines(ctx, in, o.realm, stderr, check)
				check.finish()
				if err != nil {
					if cmd.Context().Err() == nil {
						return fmt.Errorf("import interrupted while checking %s: nothing imported; run it again to import", name)
					}
					return err
				}
				if bad > 0 {
					return fmt.Errorf("%s: %s; nothing imported (--strict)", name, count(bad, "bad line"))
				}
				if _, err := in.Seek(0, io.SeekStart); err != nil {
					return err
				}
			}
			c, err := f.client(ctx)
			if err != nil {
				return err
			}
			defer c.close()
			prog := newProgress(stderr, size, isTerminal(stderr))
			st, err := importFrom(ctx, c, o, in, stderr, prog)
			prog.finish()
			retired := ""
			if st.Retired > 0 {
				retired = fmt.Sprintf(", retired %d stored (superseded or tombstoned since)", st.Retired)
			}
			fmt.Fprintf(stderr, "imported %s, skipped %d already stored%s, %s\n", count(st.Imported, "record"), st.Skipped, retired, count(st.Bad, "bad line"))
			if err != nil {
				if ctx.Err() != nil && cmd.Context().Err() == nil {
					return errors.New("import interrupted: run it again to resume (what is stored is skipped)")
				}
				if st.Imported+st.Skipped+st.Retired > 0 {
					// Batches before the failure are stored: say that the
					// same command picks up after them, as an interrupt does.
					return fmt.Errorf("%w\nThe import stopped there: once that is fixed, run it again to resume (what is stored is skipped)", err)
				}
				return err
			}
			if st.Bad > 0 {
				return fmt.Errorf("%s: %s not imported", name, count(st.Bad, "bad line"))
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

// gzipMagic starts every gzip file.
var gzipMagic = []byte{0x1f, 0x8b}

// openImportFile opens what an import reads: the file at path, or stdin
// for "-". It answers the name to report it by and its size (-1: unknown).
// What no import could read (a directory, a gzip file, standard input or a
// pipe for --strict, which reads twice) is refused before anything is sent.
func openImportFile(path string, stdin io.Reader, strict bool) (io.ReadSeekCloser, string, int64, error) {
	name, stream := path, nopSeekCloser{Reader: stdin}
	var file *os.File
	if path == "-" {
		name = "standard input"
		// A file redirected to it, unread, can be read twice.
		if f, ok := stdin.(*os.File); ok {
			if off, err := f.Seek(0, io.SeekCurrent); err == nil && off == 0 {
				file = f
			}
		}
	} else {
		var err error
		if file, err = os.Open(path); err != nil {
			return nil, "", 0, unreadable(path, err)
		}
		stream = nopSeekCloser{Reader: file, Closer: file}
	}
	if file != nil {
		info, err := file.Stat()
		if err == nil && info.IsDir() {
			err = fmt.Errorf("%s is a directory, not a file of records", name)
		}
		if err != nil {
			stream.Close()
			return nil, "", 0, err
		}
		if info.Mode().IsRegular() {
			if err := refuseGzip(file, name); err != nil {
				stream.Close()
				return nil, "", 0, err
			}
			return file, name, info.Size(), nil
		}
	}
	// A pipe or a device: read once, in order.
	if strict {
		stream.Close()
		return nil, "", 0, fmt.Errorf("--strict reads the file twice, so it needs a regular file, not %s", name)
	}
	br := bufio.NewReaderSize(stream.Reader, 64<<10)
	if head, _ := br.Peek(len(gzipMagic)); bytes.Equal(head, gzipMagic) {
		stream.Close()
		return nil, "", 0, gzipError(name)
	}
	stream.Reader = br
	return stream, name, -1, nil
}

// refuseGzip answers an error when file starts as a gzip file does, and
// leaves file at its start.
func refuseGzip(file *os.File, name string) error {
	head := make([]byte, len(gzipMagic))
	n, err := io.ReadFull(file, head)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if n == len(head) && bytes.Equal(head, gzipMagic) {
		return gzipError(name)
	}
	return nil
}

func gzipError(name string) error {
	if name == "standard input" {
		return errors.New("standard input is gzip-compressed: decompress it first (gunzip -c FILE | memhost import -)")
	}
	return fmt.Errorf("%s is gzip-compressed: decompress it first (gunzip -c %s | memhost import -)", name, name)
}

// nopSeekCloser reads a stream that cannot be read again.
type nopSeekCloser struct {
	io.Reader
	io.Closer
}

func (n nopSeekCloser) Seek(int64, int) (int64, error) {
	return 0, errors.New("the input cannot be read twice")
}

func (n nopSeekCloser) Close() error {
	if n.Closer != nil {
		return n.Closer.Close()
	}
	return nil
}

var utf8BOM = []byte("\ufeff")

// lineReader reads a file's lines, counting them and the bytes read. A
// line longer than maxLineBytes is read past without being held, so the
// lines after it are read as any others.
type lineReader struct {
	r     *bufio.Reader
	buf   []byte
	line  int
	bytes int64 // bytes consumed, line ends included as they are
	start int64 // bytes before the line last read
	done  bool
	fail  error
	// ctx, when not nil, ends the reading of an endless line (a device
	// such as /dev/zero); tick, when not nil, is called as such a line is
	// read past, so progress shows.
	ctx  context.Context
	tick func()
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// errLineTooLong is the bad line a line longer than maxLineBytes is.
var errLineTooLong = fmt.Errorf("the line is longer than %d MiB, the most an import reads", maxLineBytes>>20)

// next answers the next non-blank line, or false at the end. A line longer
// than maxLineBytes is answered as nil with tooLong set.
func (l *lineReader) next() (b []byte, tooLong bool, ok bool) {
	for {
		b, tooLong, ok = l.read()
		if !ok || tooLong {
			return nil, tooLong, ok
		}
		if l.line == 1 {
			// Editors on Windows start a UTF-8 file with a byte-order mark;
			// it is no part of the first record.
			b = bytes.TrimPrefix(b, utf8BOM)
		}
		if len(bytes.TrimSpace(b)) > 0 {
			return b, false, true
		}
	}
}

// read reads one line without its line end (LF or CRLF), or answers false
// at the end or on an error.
func (l *lineReader) read() (b []byte, tooLong bool, ok bool) {
	if l.done {
		return nil, false, false
	}
	l.buf, l.start = l.buf[:0], l.bytes
	long, started := false, false
	for {
		chunk, err := l.r.ReadSlice('\n')
		l.bytes += int64(len(chunk))
		started = started || len(chunk) > 0
		if !long {
			// Room for the line end beyond the line itself.
			if len(l.buf)+len(chunk) > maxLineBytes+2 {
				long, l.buf = true, l.buf[:0]
			} else {
				l.buf = append(l.buf, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			if long {
				if l.ctx != nil && l.ctx.Err() != nil {
					l.done, l.fail = true, l.ctx.Err()
					return nil, false, false
				}
				if l.tick != nil {
					l.tick()
				}
			}
			continue
		}
		if err != nil {
			l.done = true
			if err != io.EOF {
				l.fail = err
				return nil, false, false
			}
			if !started {
				return nil, false, false
			}
		}
		break
	}
	l.line++
	b = bytes.TrimSuffix(l.buf, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if long || len(b) > maxLineBytes {
		return nil, true, true
	}
	return b, false, true
}

// err answers why reading stopped early, nil at the end of the file; the
// line it stopped at is l.line+1.
func (l *lineReader) err() error {
	return l.fail
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
	// The decoder takes null as an empty record, which would be blamed
	// on its missing realm or scope.
	if bytes.Equal(bytes.Trim(b, " \t\r\n"), []byte("null")) {
		return r, errors.New("must be an object, not null")
	}
	if err := strictjson.Decode(b, &r); err != nil {
		return r, err
	}
	// The times as written: decoded into the record, the zero instant
	// would read as absent and never reach the server.
	var sent coordinator.RecordTimes
	if _, err := strictjson.DecodeTolerant(b, &sent); err != nil {
		return r, err
	}
	if err := sent.Check(); err != nil {
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
		fmt.Fprintf(b.w, "line %d: %s\n", line, terminalText(err.Error()))
	}
}

// close says how many bad lines went unshown.
func (b *badLines) close() {
	if hidden := b.n - maxShownBadLines; hidden > 0 {
		fmt.Fprintf(b.w, "... and %d more %s, not shown\n", hidden, plural(hidden, "bad line"))
	}
}

// checkLines reports the bad lines and answers how many there were; it
// answers ctx's error when ctx ends first.
func checkLines(ctx context.Context, r io.Reader, realm string, w io.Writer, prog *progress) (int, error) {
	lr, bad := newLineReader(r), &badLines{w: w}
	defer bad.close()
	lr.ctx, lr.tick = ctx, func() { prog.tick(lr.bytes, importStats{Bad: bad.n}) }
	var seen seenIDs
	for {
		// A file of many GB takes minutes to check: an interrupt stops it.
		if ctx.Err() != nil {
			return bad.n, ctx.Err()
		}
		b, tooLong, ok := lr.next()
		if !ok {
			break
		}
		err := errLineTooLong
		if !tooLong {
			var rec sdk.Record
			if rec, err = parseLine(b, realm); err == nil {
				err = seen.check(&rec, lr.line)
			}
		}
		if err != nil {
			bad.report(lr.line, err)
		}
		prog.tick(lr.bytes, importStats{Bad: bad.n})
	}
	if err := lr.err(); err != nil {
		if ctx.Err() != nil {
			return bad.n, err
		}
		bad.report(lr.line+1, err)
	}
	prog.set(lr.bytes, importStats{Bad: bad.n})
	return bad.n, nil
}

// importFrom sends r's records in batches; a batch holds one realm's
// records only.
func importFrom(ctx context.Context, c *apiClient, o importOptions, r io.Reader, errw io.Writer, prog *progress) (importStats, error) {
	if o.batch < 1 || o.batch > sdk.MaxBatch {
		return importStats{}, fmt.Errorf("--batch %d is outside 1-%d", o.batch, sdk.MaxBatch)
	}
	var st importStats
	var b importBatch
	limit := importBatchBytes
	lr, bad := newLineReader(r), &badLines{w: errw}
	defer bad.close()
	flush := func() error {
		if len(b.records) == 0 {
			return nil
		}
		err := b.send(ctx, c, &st, &limit, func(line int, id string) {
			bad.report(line, fmt.Errorf("id %q names a record of other content or another scope in the store (changed since the export?); not imported", id))
			st.Bad = bad.n
		})
		b.reset()
		return err
	}
	lr.ctx, lr.tick = ctx, func() { prog.tick(lr.bytes, st) }
	var seen seenIDs
	for {
		// Checked for every line, not only between batches: a run of bad
		// lines (the wrong file, an endless pipe) sends nothing.
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		line, tooLong, ok := lr.next()
		if !ok {
			break
		}
		if tooLong {
			bad.report(lr.line, errLineTooLong)
			st.Bad = bad.n
			prog.tick(lr.bytes, st)
			continue
		}
		rec, err := parseLine(line, o.realm)
		if err == nil {
			err = seen.check(&rec, lr.line)
		}
		var enc []byte
		if err == nil {
			enc, err = encodeRecord(&rec)
		}
		if err != nil {
			bad.report(lr.line, err)
			st.Bad = bad.n
			prog.tick(lr.bytes, st)
			continue
		}
		if len(b.records) > 0 && (rec.Realm != b.realm || len(b.records) == o.batch || b.bytes+len(enc) > limit) {
			if err := flush(); err != nil {
				return st, err
			}
			prog.set(lr.start, st)
		}
		b.add(rec.Realm, enc, lr.line)
	}
	if ctx.Err() != nil {
		return st, ctx.Err()
	}
	// What was read before a read error is sent all the same.
	if err := flush(); err != nil {
		return st, err
	}
	if err := lr.err(); err != nil {
		return st, fmt.Errorf("line %d: %w", lr.line+1, err)
	}
	prog.set(lr.bytes, st)
	return st, nil
}

// encodeRecord is a record as an import request carries it. HTML is not
// escaped: "<" would grow sixfold, and a batch measured by the file's bytes
// could outgrow the server's body limit.
func encodeRecord(r *sdk.Record) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// importBatch is the records of one import request, encoded, and the
// file lines they came from.
type importBatch struct {
	realm   string
	records [][]byte
	lines   []int
	bytes   int
}

func (b *importBatch) add(realm string, rec []byte, line int) {
	if len(b.records) == 0 {
		b.realm = realm
	}
	b.records = append(b.records, rec)
	b.lines = append(b.lines, line)
	b.bytes += len(rec)
}

func (b *importBatch) reset() {
	b.records, b.lines, b.bytes = b.records[:0], b.lines[:0], 0
}

// send imports the batch, all or nothing. A server whose body limit is
// below the batch answers 413: the batch goes again as two, down to single
// records, each half still all or nothing, and *limit, the bytes of the
// batches to come, drops below what was refused.
// A record the server left out because its id names another record is
// told to conflict with its file line.
func (b *importBatch) send(ctx context.Context, c *apiClient, st *importStats, limit *int, conflict func(line int, id string)) error {
	realm, err := json.Marshal(b.realm)
	if err != nil {
		return err
	}
	var body bytes.Buffer
	body.WriteString(`{"realm":`)
	body.Write(realm)
	body.WriteString(`,"records":[`)
	for i, rec := range b.records {
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(rec)
	}
	body.WriteString("]}")
	var res struct {
		sdk.ImportResult
		Retired   int
		Conflicts []struct {
			Index int
			ID    string
		}
	}
	err = c.callWithin(ctx, requestDeadline, "POST", "/v1/import", body.Bytes(), &res)
	var ce *callError
	if errors.As(err, &ce) && ce.Status == http.StatusRequestEntityTooLarge && len(b.records) > 1 {
		*limit = min(*limit, b.bytes/2)
		half := len(b.records) / 2
		var first, second importBatch
		for i := range b.records {
			part := &first
			if i >= half {
				part = &second
			}
			part.add(b.realm, b.records[i], b.lines[i])
		}
		if err := first.send(ctx, c, st, limit, conflict); err != nil {
			return err
		}
		return second.send(ctx, c, st, limit, conflict)
	}
	if err != nil {
		return b.refusal(err)
	}
	st.Imported += res.Imported
	st.Skipped += res.Skipped
	st.Retired += res.Retired
	for _, cf := range res.Conflicts {
		if cf.Index >= 0 && cf.Index < len(b.lines) {
			conflict(b.lines[cf.Index], cf.ID)
		}
	}
	return nil
}

// recordIndex finds "records[i]" in a refusal: an index in the request,
// which means nothing to whoever reads the file.
var recordIndex = regexp.MustCompile(`records\[(\d+)\](: |\.)?`)

// refusal says what an error answer to the batch is about. A refusal that
// names records[i] is about that record's file line, and says so in place
// of the index; one about the records as a whole (400, 409, 413, 422) is
// about the batch's lines; anything else (authentication, permission, a
// server that fails or cannot be reached) is about the command, not about
// lines, and is answered as it is.
func (b *importBatch) refusal(err error) error {
	var ce *callError
	if !errors.As(err, &ce) {
		return err
	}
	first := -1
	msg := recordIndex.ReplaceAllStringFunc(ce.Message, func(m string) string {
		sub := recordIndex.FindStringSubmatch(m)
		i, convErr := strconv.Atoi(sub[1])
		if convErr != nil || i >= len(b.lines) {
			return m
		}
		if first < 0 && sub[2] != "" {
			// The record the refusal is about ("records[3].scope: …",
			// "…: records[3]: …"): its line leads the message.
			first = b.lines[i]
			return ""
		}
		return fmt.Sprintf("line %d%s", b.lines[i], sub[2])
	})
	if first >= 0 {
		return fmt.Errorf("line %d: %s: %s", first, ce.Code, msg)
	}
	mapped := *ce
	mapped.Message = msg
	switch ce.Status {
	case http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		if len(b.lines) == 1 {
			return fmt.Errorf("line %d: %w", b.lines[0], &mapped)
		}
		return fmt.Errorf("lines %d to %d: %w", b.lines[0], b.lines[len(b.lines)-1], &mapped)
	}
	return err
}

// progress shows an import's progress: a bar on a terminal, otherwise a
// plain line at most every few seconds. A negative total is unknown
// (standard input): the bar spins and the lines count records alone.
type progress struct {
	bar      *progressbar.ProgressBar
	w        io.Writer
	total    int64
	last     time.Time
	lastTick time.Time
	start    time.Time
	// checking shows the --strict check, which imports nothing: its lines
	// count bad lines only.
	checking bool
}

// progressEvery is how often a plain progress line shows. A variable for
// the tests.
var progressEvery = 2 * time.Second

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newProgress(w io.Writer, total int64, bar bool) *progress {
	return makeProgress(w, total, bar, false)
}

// newCheckProgress shows the progress of the --strict check.
func newCheckProgress(w io.Writer, total int64, bar bool) *progress {
	return makeProgress(w, total, bar, true)
}

func makeProgress(w io.Writer, total int64, bar, checking bool) *progress {
	p := &progress{w: w, total: total, start: time.Now(), checking: checking}
	if bar && total != 0 {
		description := "importing"
		if checking {
			description = "checking"
		}
		p.bar = progressbar.NewOptions64(total, // -1: a spinner
			progressbar.OptionSetWriter(w), progressbar.OptionShowBytes(true),
			progressbar.OptionSetDescription(description), progressbar.OptionThrottle(100*time.Millisecond),
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
		// A file appended to while it is read outgrows its first size.
		if p.total > 0 && done > p.total {
			p.total = done
			p.bar.ChangeMax64(done)
		}
		_ = p.bar.Set64(done)
		return
	}
	now := time.Now()
	if now.Sub(p.last) < progressEvery && (p.total < 0 || done < p.total) {
		return
	}
	p.last = now
	if p.checking {
		pct := ""
		if p.total > 0 {
			pct = fmt.Sprintf("%.0f%% of the file, ", min(float64(done)*100/float64(p.total), 100))
		}
		fmt.Fprintf(p.w, "check: %s%s, %.1f s\n", pct, count(st.Bad, "bad line"), time.Since(p.start).Seconds())
		return
	}
	if p.total < 0 {
		fmt.Fprintf(p.w, "import: %d imported, %d skipped, %s, %.1f s\n",
			st.Imported, st.Skipped, count(st.Bad, "bad line"), time.Since(p.start).Seconds())
		return
	}
	pct := 100.0
	if p.total > 0 {
		pct = min(float64(done)*100/float64(p.total), 100)
	}
	fmt.Fprintf(p.w, "import: %.0f%% of the file, %d imported, %d skipped, %s, %.1f s\n",
		pct, st.Imported, st.Skipped, count(st.Bad, "bad line"), time.Since(p.start).Seconds())
}

// tick is set for work that sends nothing (a run of bad lines, the
// --strict check), called for every line: cheap until it is time to show,
// and never the final line, which set shows.
func (p *progress) tick(done int64, st importStats) {
	now := time.Now()
	// A small file of bad lines shows only its final line.
	if now.Sub(p.lastTick) < 100*time.Millisecond || (p.bar == nil && now.Sub(p.start) < progressEvery) {
		return
	}
	p.lastTick = now
	if p.total < 0 || done < p.total {
		p.set(done, st)
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

// countProgress shows the progress of work whose total is not known ahead
// (an export): a spinner with a count on a terminal, otherwise a plain line
// at most every few seconds.
type countProgress struct {
	bar   *progressbar.ProgressBar
	w     io.Writer
	verb  string
	last  time.Time
	start time.Time
}

func newCountProgress(w io.Writer, verb, description string) *countProgress {
	p := &countProgress{w: w, verb: verb, start: time.Now()}
	if isTerminal(w) {
		p.bar = progressbar.NewOptions(-1,
			progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(description),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionShowCount(),
			progressbar.OptionShowIts(), progressbar.OptionSetItsString("records"), progressbar.OptionClearOnFinish())
	}
	return p
}

func (p *countProgress) set(done int) {
	if p.bar != nil {
		_ = p.bar.Set(done)
		return
	}
	if now := time.Now(); now.Sub(p.last) >= 2*time.Second {
		p.last = now
		fmt.Fprintf(p.w, "%s: %s, %.1f s\n", p.verb, count(done, "record"), time.Since(p.start).Seconds())
	}
}

func (p *countProgress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
