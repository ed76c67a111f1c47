package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk/internal/wire"
	"google.golang.org/grpc/metadata"
)

// TestLoggerLinesAreHostParsable: each line is the JSON shape go-plugin's
// host side parses (hclog's keys, its timestamp layout, lower-case levels),
// and the level the host sets filters.
func TestLoggerLinesAreHostParsable(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, "WARN")
	log.Info("dropped at warn")
	log.Warn("kept", "file", "a.md", "error", errors.New("bad front matter"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("lines = %q, want only the warning", lines)
	}
	var e map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &e); err != nil {
		t.Fatal(err)
	}
	if e["@level"] != "warn" || e["@message"] != "kept" || e["file"] != "a.md" || e["error"] != "bad front matter" {
		t.Fatalf("entry = %v", e)
	}
	if _, err := time.Parse("2006-01-02T15:04:05.000000Z07:00", e["@timestamp"].(string)); err != nil {
		t.Fatalf("@timestamp %v is not go-plugin's layout: %v", e["@timestamp"], err)
	}
}

// A line logged with a call's context carries the host request's id, from
// the call's metadata; one logged without it, or for a call without an id
// (or with an absurd one), carries none.
func TestLinesOfACallCarryItsRequestID(t *testing.T) {
	call := func(ids ...string) context.Context {
		return withIncomingRequestID(metadata.NewIncomingContext(context.Background(), metadata.Pairs(pairs(ids)...)))
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want any // nil: no request_id
	}{
		{"call with an id", call("req-7"), "req-7"},
		{"call without one", call(), nil},
		{"id over the bound", call(strings.Repeat("x", maxRequestIDBytes+1)), nil},
		{"no call", context.Background(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			newLogger(&buf, "info").With("plugin_attr", 1).InfoContext(tc.ctx, "recall")
			var e map[string]any
			if err := json.Unmarshal(buf.Bytes(), &e); err != nil {
				t.Fatal(err)
			}
			if e["request_id"] != tc.want || e["plugin_attr"] != float64(1) {
				t.Fatalf("entry = %v, want request_id %v", e, tc.want)
			}
		})
	}
}

func pairs(ids []string) []string {
	var kv []string
	for _, id := range ids {
		kv = append(kv, wire.MetadataRequestID, id)
	}
	return kv
}

// nilErr is an error type whose Error method needs a value, as many do.
type nilErr struct{ msg string }

func (e *nilErr) Error() string { return e.msg }

// A typed nil error (the classic Go mistake) or an error whose Error
// panics is logged, as slog logs one, rather than panicking the plugin
// from inside its logger.
func TestLoggerSurvivesAnErrorThatPanics(t *testing.T) {
	var buf bytes.Buffer
	var typedNil *nilErr
	newLogger(&buf, "info").Error("store failed", "error", error(typedNil), "n", 1)
	var e map[string]any
	if err := json.Unmarshal(buf.Bytes(), &e); err != nil {
		t.Fatalf("line %q: %v", buf.String(), err)
	}
	if e["@message"] != "store failed" || e["n"] != float64(1) || e["error"] == nil {
		t.Fatalf("entry = %v", e)
	}
}

// TestALargeLineStaysJSONAtItsLevel: the host cuts a line past 64 KiB,
// which is then no JSON and is logged as text at info; each value is cut
// to the 4 KiB the host shows, and a line still too long keeps its level
// and message.
func TestALargeLineStaysJSONAtItsLevel(t *testing.T) {
	cases := []struct {
		name string
		args []any
	}{
		{"a large error and value", []any{"error", errors.New(strings.Repeat("b", 70000)), "body", strings.Repeat("é", 40000)}},
		{"many escaped fields", func() []any {
			var args []any
			for i := range 40 {
				args = append(args, "f"+strings.Repeat("x", i), strings.Repeat("\x00", 4000))
			}
			return args
		}()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			newLogger(&buf, "info").Error(strings.Repeat("mé", 50000), c.args...)
			if buf.Len() >= 64<<10 {
				t.Fatalf("a line of %d bytes: the host cuts it", buf.Len())
			}
			var e map[string]any
			if err := json.Unmarshal(buf.Bytes(), &e); err != nil {
				t.Fatalf("the line is no JSON: %v", err)
			}
			if e["@level"] != "error" || !strings.HasPrefix(e["@message"].(string), "mémé") {
				t.Fatalf("level %v, message %.20q", e["@level"], e["@message"])
			}
		})
	}
}

// TestAttributesCannotTakeTheLinesOwnFields: an attribute, a group or a
// With of a name the line's own fields use (hclog's "@level", "@message",
// "@timestamp", "@module"; slog's "level", "msg", "time") neither changes
// the level or message the host reads (the last of a repeated key wins)
// nor panics the plugin; it is kept under a name of its own.
func TestAttributesCannotTakeTheLinesOwnFields(t *testing.T) {
	for _, c := range []struct {
		name string
		log  func(*slog.Logger)
		kept string // the key the attribute is kept under
	}{
		{"@level", func(l *slog.Logger) { l.Info("m", "@level", "error") }, "plugin@level"},
		{"@message", func(l *slog.Logger) { l.Info("m", "@message", "forged") }, "plugin@message"},
		{"@timestamp", func(l *slog.Logger) { l.Info("m", "@timestamp", "2020-01-01T00:00:00.000000Z") }, "plugin@timestamp"},
		{"@module", func(l *slog.Logger) { l.Info("m", "@module", "memhost") }, "plugin@module"},
		{"level as text", func(l *slog.Logger) { l.Info("m", "level", "high") }, "plugin_level"},
		{"level as a level", func(l *slog.Logger) { l.Info("m", slog.Any("level", slog.LevelError)) }, "plugin_level"},
		{"msg", func(l *slog.Logger) { l.Info("m", "msg", "forged") }, "plugin_msg"},
		{"time as text", func(l *slog.Logger) { l.Info("m", "time", "noon") }, "plugin_time"},
		{"time as a time", func(l *slog.Logger) { l.Info("m", "time", time.Unix(0, 0)) }, "plugin_time"},
		{"a group", func(l *slog.Logger) { l.Info("m", slog.Group("@message", "x", "forged")) }, "plugin@message"},
		{"inside a group without a key", func(l *slog.Logger) { l.Info("m", slog.Group("", "@level", "error")) }, "plugin@level"},
		{"With", func(l *slog.Logger) { l.With("@level", "error").Info("m") }, "plugin@level"},
		{"WithGroup", func(l *slog.Logger) { l.WithGroup("@message").Info("m", "x", "forged") }, "plugin@message"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			c.log(newLogger(&buf, "info"))
			var e map[string]any
			if err := json.Unmarshal(buf.Bytes(), &e); err != nil {
				t.Fatalf("%v: %q", err, buf.String())
			}
			if e["@level"] != "info" || e["@message"] != "m" {
				t.Errorf("the host reads level %v, message %v, want info and m: %s", e["@level"], e["@message"], buf.String())
			}
			if _, ok := e[c.kept]; !ok {
				t.Errorf("the attribute is not kept as %s: %s", c.kept, buf.String())
			}
			if strings.Count(buf.String(), `"@level"`) != 1 || strings.Count(buf.String(), `"@message"`) != 1 {
				t.Errorf("a field of the line's own is repeated: %s", buf.String())
			}
		})
	}
}
