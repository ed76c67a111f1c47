package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/sdk"
)

// A plugin is third-party code, and everything it writes to stderr is
// input the host parses. go-plugin's own parser panics on a JSON line
// whose "@message" is not a string and drops a line whose timestamp has
// other than six fractional digits to DEBUG, so the host never lets it
// parse: go-plugin gets a logger that is off for the plugin's stream
// (muted below), and the raw bytes reach pluginOutput, which cannot
// panic on any input.

// Bounds on what one plugin line may cost the host.
const (
	maxLineBytes  = 64 << 10 // longer lines are cut, the rest of them dropped
	maxLineFields = 32       // attributes kept from one JSON line
	maxValueBytes = 4 << 10  // one attribute value or message, rendered
	tailLines     = 20       // lines kept for a start failure's report
	tailLineBytes = 512
)

// A plugin's lines reach the host's log at most in a burst of lineBurst,
// then at linesPerSecond: one logging in a loop (a store retrying a broken
// connection) cannot flood the operator's log or disk. The host says once
// that it drops lines, and how many once the plugin is back under the
// rate. A crash report gets a full burst of its own.
const (
	lineBurst      = 1000
	linesPerSecond = 100
)

// pluginOutput receives a plugin's stderr: before the handshake straight
// from the process's pipe (ClientConfig.Stderr), after it the lines the
// plugin's go-plugin server forwards over its stdio stream (SyncStderr),
// and what it forwards of the stdout it swapped (SyncStdout), which
// go-plugin would drop.
// It logs each line under the plugin's name and keeps the last few, so a
// plugin that dies before the handshake can be reported with its own words.
type pluginOutput struct {
	log hclog.Logger

	mu sync.Mutex
	// The line being read from each way the plugin's stderr arrives:
	// its pipe (before the handshake, and from anything still writing to
	// the process's own stderr) and go-plugin's streams (what Serve swapped
	// os.Stderr and os.Stdout for). Read into one buffer, a line's halves
	// from two made one line of two (a JSON line ran into a raw one).
	pipe, stream, stdout partialLine
	tail                 []string
	crashed              bool // a crash report started: its untagged lines are errors

	now      func() time.Time // nil: time.Now
	started  bool             // tokens and last are set
	tokens   float64          // lines the plugin may log now
	last     time.Time
	dropped  int       // lines dropped in the run not yet reported
	runFrom  time.Time // when that run started
	lastDrop time.Time // when its latest line was dropped
}

// partialLine is a line being read: its bytes so far, and whether it
// passed maxLineBytes.
type partialLine struct {
	buf []byte
	cut bool
}

// Write reads the plugin's stderr pipe.
func (o *pluginOutput) Write(p []byte) (int, error) { return o.write(&o.pipe, p) }

// streamed reads what go-plugin forwards of the plugin's swapped stderr
// or stdout (l is the line being read from it).
type streamed struct {
	o *pluginOutput
	l *partialLine
}

func (s streamed) Write(p []byte) (int, error) { return s.o.write(s.l, p) }

func (o *pluginOutput) write(l *partialLine, p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !l.cut {
			room := maxLineBytes - len(l.buf)
			if len(chunk) > room {
				chunk, l.cut = chunk[:room], true
			}
			l.buf = append(l.buf, chunk...)
		}
		if i < 0 {
			break
		}
		o.line(bytes.TrimRight(l.buf, "\r"))
		l.buf, l.cut = l.buf[:0], false
		p = p[i+1:]
	}
	return n, nil
}

// flush logs a last line the plugin did not end with a newline.
func (o *pluginOutput) flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, l := range []*partialLine{&o.pipe, &o.stream, &o.stdout} {
		if len(l.buf) > 0 {
			o.line(l.buf)
			l.buf, l.cut = l.buf[:0], false
		}
	}
	o.reportDropped()
}

func (o *pluginOutput) line(raw []byte) {
	// A JSON line over the rate is kept for the tail as written, not
	// parsed: parsing one of 64 KiB takes about a millisecond, so a plugin
	// logging large lines in a loop would otherwise cost the host a core
	// for lines it drops.
	admitted := false
	if len(raw) > 0 && raw[0] == '{' {
		if !o.admit() {
			o.keep(clean(string(raw[:min(len(raw), tailLineBytes)])))
			return
		}
		admitted = true
	}
	l, ok := parsePluginLine(raw)
	if !ok {
		return
	}
	if !l.json {
		switch {
		case crashStart(l.msg):
			if !o.crashed {
				// The report gets through whole, after the count of
				// what was dropped before it.
				o.tokens, o.runFrom = lineBurst, time.Time{}
			}
			o.crashed = true
			l.level = hclog.Error
		case o.crashed:
			l.level = hclog.Error
		}
	}
	if !admitted && !o.admit() {
		o.keep(l.msg)
		return
	}
	// Keys the host's own JSON log reserves ("@timestamp", "@caller",
	// "@warn", ...) would overwrite the host's values there: the plugin's
	// stay visible under a name of their own.
	for i := 0; i < len(l.args); i += 2 {
		if k, _ := l.args[i].(string); strings.HasPrefix(k, "@") {
			l.args[i] = "plugin" + k
		}
	}
	o.log.Log(l.level, l.msg, l.args...)
	o.keep(l.msg)
}

// admit takes one line from the rate budget, reporting whether it may be
// logged; it logs the start and the end of each run of dropped lines. A
// run ends at the first line let through a second or more after it
// started, or after a pause in the drops: a plugin logging steadily over
// the rate gets a line through at each refilled token, and ending the run
// there put two notices beside each of its lines.
func (o *pluginOutput) admit() bool {
	now := time.Now
	if o.now != nil {
		now = o.now
	}
	t := now()
	if !o.started {
		o.started, o.tokens, o.last = true, lineBurst, t
	}
	if d := t.Sub(o.last); d > 0 {
		o.tokens = min(lineBurst, o.tokens+d.Seconds()*linesPerSecond)
		o.last = t
	}
	if o.tokens < 1 {
		if o.dropped == 0 {
			o.log.Log(hclog.Warn, "plugin logs faster than the host passes on; its lines are dropped until it slows down", "limit_per_second", linesPerSecond)
			o.runFrom = t
		}
		o.dropped++
		o.lastDrop = t
		return false
	}
	o.tokens--
	if o.dropped > 0 && (t.Sub(o.runFrom) >= time.Second || t.Sub(o.lastDrop) >= dropPause) {
		o.reportDropped()
	}
	return true
}

// dropPause is the pause in the drops that ends a run before its second.
const dropPause = 100 * time.Millisecond

// reportDropped logs the count of the run's dropped lines and ends it.
func (o *pluginOutput) reportDropped() {
	if o.dropped > 0 {
		o.log.Log(hclog.Warn, "plugin lines dropped over the rate limit", "dropped_lines", o.dropped)
		o.dropped = 0
	}
}

func (o *pluginOutput) keep(msg string) {
	if len(msg) > tailLineBytes {
		msg = msg[:tailLineBytes] + "…"
	}
	if len(o.tail) == tailLines {
		o.tail = slices.Delete(o.tail, 0, 1)
	}
	o.tail = append(o.tail, msg)
}

// lastLines answers a copy of the last lines the plugin wrote.
func (o *pluginOutput) lastLines() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.tail)
}

// crashStart reports whether a plain line starts a crash report (a Go
// panic or fatal error, a Python traceback).
func crashStart(s string) bool {
	for _, p := range []string{"panic: ", "fatal error: ", "Traceback (most recent call last):"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// pluginLine is one parsed line of plugin output.
type pluginLine struct {
	level hclog.Level
	msg   string
	args  []any
	json  bool // the line was a JSON object
}

// parsePluginLine reads one line of plugin output: a JSON object in
// hclog's shape ("@level", "@message", "@timestamp", other keys as
// attributes) at its own level, anything else as text at info. It never
// panics and never fails: a malformed field degrades to text, a missing or
// unknown level to info. Control characters are escaped, so a line cannot
// forge a second line in the host's log. ok is false for a blank line.
func parsePluginLine(raw []byte) (l pluginLine, ok bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return l, false
	}
	l.level = hclog.Info
	var entry map[string]any
	if raw[0] != '{' || json.Unmarshal(raw, &entry) != nil {
		l.msg = clean(string(raw))
		return l, true
	}
	l.json = true
	if lv, isString := entry["@level"].(string); isString {
		if level := hclog.LevelFromString(lv); level > hclog.NoLevel && level < hclog.Off {
			l.level = level
		}
	}
	switch m := entry["@message"].(type) {
	case string:
		l.msg = clean(m)
	case nil:
	default:
		l.msg = render(m)
	}
	// The host stamps every line with its own time: a plugin's timestamp,
	// any RFC 3339 form, is dropped; one that is no time stays visible.
	if ts, isString := entry["@timestamp"].(string); isString {
		if _, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			delete(entry, "@timestamp")
		}
	}
	for _, k := range []string{"@level", "@message", "@module"} {
		delete(entry, k)
	}
	keys := slices.Sorted(maps.Keys(entry))
	if len(keys) > maxLineFields {
		l.args = append(l.args, "dropped_fields", len(keys)-maxLineFields)
		keys = keys[:maxLineFields]
	}
	for _, k := range keys {
		l.args = append(l.args, attrKey(k), attrValue(entry[k]))
	}
	if l.msg == "" && len(l.args) == 0 {
		l.msg = clean(string(raw))
	}
	return l, true
}

// hostKeys are attributes the host sets on its own lines about a plugin;
// a plugin's attribute of that name is shown under plugin_<name>.
var hostKeys = map[string]bool{"instance": true, "plugin": true, "request_id": true}

// attrKey is a plugin's attribute name as the host logs it: letters,
// digits and _ . - @ alone, anything else as _, so that a name holding a
// space or '=' ("a b=c d") cannot read as more attributes in a text log.
func attrKey(k string) string {
	k = strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("_.-@", r) {
			return r
		}
		return '_'
	}, clean(k))
	if hostKeys[k] {
		k = "plugin_" + k
	}
	return k
}

// attrValue keeps JSON scalars as they are and renders anything nested as
// compact JSON text, bounded.
func attrValue(v any) any {
	switch v := v.(type) {
	case string:
		return clean(v)
	case float64, bool, nil:
		return v
	default:
		return render(v)
	}
}

func render(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return clean(fmt.Sprint(v))
	}
	return clean(string(data))
}

// clean bounds s and escapes what could break the host's log line:
// control characters (newlines among them) and invalid UTF-8.
func clean(s string) string {
	if len(s) > maxValueBytes {
		s = sdk.CutText(s, maxValueBytes) + "…"
	}
	if utf8.ValidString(s) && !strings.ContainsFunc(s, breaksLine) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case breaksLine(r):
			q := fmt.Sprintf("%+q", string(r))
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// breaksLine reports whether r could end or forge a log line: a control
// character (tab aside), DEL, a C1 control or a Unicode line separator.
func breaksLine(r rune) bool {
	return r < 0x20 && r != '\t' || r == 0x7f || r == 0x2028 || r == 0x2029 || (r >= 0x80 && r < 0xa0)
}

// clientLogger is the logger go-plugin gets for its own client-side
// lines. It is off for the plugin's stderr stream (go-plugin names that
// logger after the executable), so go-plugin never parses the plugin's
// output (pluginOutput does); it names the plugin by the path the host
// was given, not the /proc/self/fd path it execs; and a process the host
// killed on purpose is no error.
type clientLogger struct {
	hclog.Logger
	target, path string       // exec target and the path to show for it
	stopping     *atomic.Bool // the host is ending the process
	exit         *atomic.Value
	// stdoutTooLong is set when go-plugin gave up reading the plugin's
	// stdout at a line longer than its scanner takes.
	stdoutTooLong *atomic.Bool
}

func (l clientLogger) Named(name string) hclog.Logger {
	// An executable named "stdio" (a script runs by its path) gets a
	// muted logger too: go-plugin would parse its stderr, and panic.
	if name == "stdio" && filepath.Base(l.target) != name {
		return l
	}
	return muted{hclog.NewNullLogger()}
}

func (l clientLogger) Log(level hclog.Level, msg string, args ...any) {
	if msg == "error encountered while scanning stdout" && l.stdoutTooLong != nil && strings.Contains(fmt.Sprint(args...), "token too long") {
		l.stdoutTooLong.Store(true)
	}
	if msg == "plugin process exited" {
		for i := 0; i+1 < len(args); i += 2 {
			if args[i] == "error" {
				if s, ok := args[i+1].(string); ok {
					l.exit.Store(s)
				}
			}
		}
		if l.stopping.Load() {
			level = hclog.Debug
		}
	}
	// The host is ending the process itself and kills it if it lingers.
	if msg == "plugin failed to exit gracefully" && l.stopping.Load() {
		level = hclog.Debug
	}
	if l.target != "" && slices.Contains(args, any(l.target)) {
		args = slices.Clone(args)
		for i, a := range args {
			if a == any(l.target) {
				args[i] = l.path
			}
		}
	}
	l.Logger.Log(level, msg, args...)
}

func (l clientLogger) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l clientLogger) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l clientLogger) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l clientLogger) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l clientLogger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

// exitStatus is how the process ended, as go-plugin reported it ("" when
// it has not, or exited cleanly).
func (l clientLogger) exitStatus() string {
	s, _ := l.exit.Load().(string)
	return s
}

// muted is a logger that reports itself off, which is what makes
// go-plugin skip parsing the plugin's stderr.
type muted struct{ hclog.Logger }

func (muted) GetLevel() hclog.Level { return hclog.Off }

// levelName is the level a plugin should log at: the host's.
func levelName(l hclog.Logger) string {
	if lv := l.GetLevel(); lv != hclog.NoLevel {
		return lv.String()
	}
	return "info"
}
