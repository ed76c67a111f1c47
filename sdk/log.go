package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
)

// stderr is the process's real standard error, taken at package init:
// go-plugin's Serve later points os.Stderr at a pipe the host discards, so
// a logger made after Serve started (in Configure, say) must not follow it.
// The host reads this stream line by line and re-logs each JSON line under
// the plugin instance's name, in its own format and at its own level.
var stderr io.Writer = os.Stderr

var (
	loggerOnce sync.Once
	logger     *slog.Logger
)

// Logger is the logger a plugin uses, at any point of its life: in main,
// in Configure, in a call or in a background goroutine. Every line reaches
// the host's log, named by the plugin instance. The level is the host's
// (MEMHOST_LOG_LEVEL, set by the host; info when unset). In a call, log
// with the call's context (InfoContext(ctx, ...)): the line then carries
// the id of the host request the call serves, as request_id. A plugin must
// never write to stdout: go-plugin owns it for the handshake.
func Logger() *slog.Logger {
	loggerOnce.Do(func() { logger = newLogger(stderr, os.Getenv("MEMHOST_LOG_LEVEL")) })
	return logger
}

// newLogger writes JSON lines in the shape go-plugin's host side parses
// (hclog's: "@level", "@message", "@timestamp" with microseconds).
func newLogger(w io.Writer, level string) *slog.Logger {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "trace", "debug":
		lv = slog.LevelDebug
	case "warn":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		lv = slog.LevelInfo
	}
	h := slog.NewJSONHandler(&lineWriter{w: w}, &slog.HandlerOptions{
		Level: lv,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			// Only the record's own time, level and message have these
			// keys here: plainKeys renamed the plugin's attributes.
			switch a.Key {
			case slog.TimeKey:
				if a.Value.Kind() == slog.KindTime {
					return slog.String("@timestamp", a.Value.Time().Format("2006-01-02T15:04:05.000000Z07:00"))
				}
			case slog.LevelKey:
				if lv, ok := a.Value.Any().(slog.Level); ok {
					return slog.String("@level", strings.ToLower(lv.String()))
				}
			case slog.MessageKey:
				return slog.String("@message", cutValue(a.Value.String()))
			}
			if err, ok := a.Value.Any().(error); ok {
				return slog.String(a.Key, cutValue(errorText(err)))
			}
			if a.Value.Kind() == slog.KindString {
				return slog.String(a.Key, cutValue(a.Value.String()))
			}
			return a
		},
	})
	return slog.New(plainKeys{Handler: requestIDHandler{h}})
}

// plainKeys keeps a plugin's attributes off the keys a line's own fields
// use: the host reads "@level", "@message", "@timestamp" and "@module"
// from the line (the last of a repeated key wins, so `"@level", "error"`
// made an info line an error, and `"@message", "x"` replaced its
// message), and the handler turns slog's "time", "level" and "msg" into
// them ("level", "high" panicked the plugin; slog.LevelError as "level"
// set the line's level). At the top of a line, an attribute or group of
// such a name is kept under plugin<name> ("plugin@level") or
// plugin_<name> ("plugin_level"), as the host names a plugin's attribute
// that takes one of its own.
type plainKeys struct {
	slog.Handler
	grouped bool // a group is open: attributes are nested in it
}

func (h plainKeys) Handle(ctx context.Context, r slog.Record) error {
	if h.grouped {
		return h.Handler.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(plainAttrs(a)...)
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h plainKeys) WithAttrs(attrs []slog.Attr) slog.Handler {
	if !h.grouped {
		var plain []slog.Attr
		for _, a := range attrs {
			plain = append(plain, plainAttrs(a)...)
		}
		attrs = plain
	}
	return plainKeys{h.Handler.WithAttrs(attrs), h.grouped}
}

func (h plainKeys) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	if !h.grouped {
		name = plainKey(name)
	}
	return plainKeys{h.Handler.WithGroup(name), true}
}

// plainAttrs is a top-level attribute under a key of its own; a group
// without a key, whose attributes slog puts at the top, is each of them
// so.
func plainAttrs(a slog.Attr) []slog.Attr {
	a.Value = a.Value.Resolve()
	if a.Value.Kind() == slog.KindGroup && a.Key == "" {
		var out []slog.Attr
		for _, m := range a.Value.Group() {
			out = append(out, plainAttrs(m)...)
		}
		return out
	}
	a.Key = plainKey(a.Key)
	return []slog.Attr{a}
}

// plainKey is a top-level attribute's key as the line carries it.
func plainKey(k string) string {
	switch {
	case strings.HasPrefix(k, "@"):
		return "plugin" + k
	case k == slog.TimeKey, k == slog.LevelKey, k == slog.MessageKey:
		return "plugin_" + k
	}
	return k
}

// errorText is err's text, as slog writes an error it is given: a typed
// nil error, whose Error would dereference nil, is "<nil>", and an Error
// that panics is logged, not raised from inside the logger.
func errorText(err error) (text string) {
	defer func() {
		if r := recover(); r != nil {
			if v := reflect.ValueOf(err); v.Kind() == reflect.Pointer && v.IsNil() {
				text = "<nil>"
				return
			}
			text = fmt.Sprintf("!PANIC: %v", r)
		}
	}()
	return err.Error()
}

// The host's bounds (sdk/host/log.go): it shows at most maxLogValue bytes
// of a value, and cuts a line past maxLogLine, which then is no JSON and
// is logged as raw text at info, whatever its level (an error's line with
// a large error text in it, say).
const (
	maxLogValue = 4 << 10
	maxLogLine  = 64 << 10
)

// cutValue is s cut to the maxLogValue bytes the host shows, at a
// character's start.
func cutValue(s string) string {
	if len(s) <= maxLogValue {
		return s
	}
	return CutText(s, maxLogValue) + "…"
}

// lineWriter serialises writes, so lines from concurrent goroutines never
// interleave on the stream the host parses.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	if n >= maxLogLine {
		p = shortLine(p)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(p); err != nil {
		return 0, err
	}
	return n, nil
}

// shortLine is a line still too long for the host with each value cut
// (many fields, or escapes): it keeps its level, message, time and request
// id, and says how many fields it dropped.
func shortLine(p []byte) []byte {
	var fields map[string]json.RawMessage
	if json.Unmarshal(p, &fields) != nil {
		return p
	}
	kept := map[string]any{}
	for _, k := range []string{"@level", "@message", "@timestamp", "request_id"} {
		if v, ok := fields[k]; ok {
			kept[k] = v
		}
	}
	kept["dropped_fields"] = len(fields) - len(kept)
	short, err := json.Marshal(kept)
	if err != nil {
		return p
	}
	return append(short, '\n')
}

// hclogTo is go-plugin's own logger for the plugin side, on the same
// stream in the same JSON shape.
func hclogTo(w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Level:      hclog.LevelFromString(os.Getenv("MEMHOST_LOG_LEVEL")),
		JSONFormat: true,
		Output:     w,
		TimeFn:     func() time.Time { return time.Now() },
	})
}
