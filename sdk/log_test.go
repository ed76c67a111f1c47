package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
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
