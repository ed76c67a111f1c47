package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// TestParseLineIsStrict: an archive line is decoded as the API decodes a
// body: what the standard decoder would take silently (a duplicate member,
// whose last value would win; a member named in another case; trailing
// data) is a bad line, reported as such.
func TestParseLineIsStrict(t *testing.T) {
	r := sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "kept", Body: "b"}
	if err := r.Prepare("default", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	good := string(raw)
	if _, err := parseLine([]byte(good), ""); err != nil {
		t.Fatalf("a line the exporter writes is refused: %v", err)
	}
	// RFC 3339 allows "t" and "z" in lower case, as every surface reads them.
	lower := strings.Replace(good, `{`, `{"occurred_at":"2023-05-27t09:00:00z",`, 1)
	if r, err := parseLine([]byte(lower), ""); err != nil || r.OccurredAt.Year() != 2023 {
		t.Fatalf("a line with a lower-case t and z = %+v, %v; want it read", r.OccurredAt, err)
	}
	for _, c := range []struct{ name, line, want string }{
		{"duplicate member", strings.Replace(good, `{`, `{"title":"other",`, 1), "appears more than once"},
		{"unknown member", strings.Replace(good, `{`, `{"colour":"red",`, 1), "colour: unknown field"},
		{"member in another case", strings.Replace(good, `"title"`, `"Title"`, 1), "Title: unknown field"},
		{"trailing data", good + ` {}`, "trailing data"},
		{"wrong kind", strings.Replace(good, `"title":"kept"`, `"title":7`, 1), "title: must be a string"},
		{"an expiry of the zero time", strings.Replace(good, `{`, `{"expires_at":"0001-01-01T00:00:00Z",`, 1), "expires_at: is 0001-01-01T00:00:00Z, the zero time"},
		{"an occurrence of the zero time elsewhere", strings.Replace(good, `{`, `{"occurred_at":"0001-01-01T01:00:00+01:00",`, 1), "occurred_at: is 0001-01-01T00:00:00Z"},
		{"null", "null", "must be an object, not null"},
		{"null among spaces", " null\t", "must be an object, not null"},
		{"array", "[1,2]", "must be an object, not an array"},
		{"string", `"hi"`, "must be an object, not a string"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseLine([]byte(c.line), "")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("parseLine = %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0 bad lines"}, {1, "1 bad line"}, {2, "2 bad lines"}} {
		if got := count(c.n, "bad line"); got != c.want {
			t.Errorf("count(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

// TestBinaryFileReportsFewLines: a file that is no JSON Lines at all is
// reported by its first few bad lines and a count of the rest, by the
// strict check and by the import alike.
func TestBinaryFileReportsFewLines(t *testing.T) {
	const lines = 3000
	var file bytes.Buffer
	for i := range lines {
		fmt.Fprintf(&file, "\x7fELF\x00\x01%d\x00\n", i)
	}
	check := func(t *testing.T, bad int, out string) {
		t.Helper()
		if bad != lines {
			t.Errorf("counted %d bad lines, want %d", bad, lines)
		}
		shown := regexp.MustCompile(`(?m)^line \d+: `).FindAllString(out, -1)
		if len(shown) != maxShownBadLines {
			t.Errorf("%d bad lines shown, want %d:\n%s", len(shown), maxShownBadLines, out)
		}
		if want := fmt.Sprintf("... and %d more bad lines, not shown\n", lines-maxShownBadLines); !strings.HasSuffix(out, want) {
			t.Errorf("output does not end with %q:\n%s", want, out)
		}
	}
	t.Run("strict", func(t *testing.T) {
		var out strings.Builder
		check(t, checkLinesOf(file.Bytes(), "default", &out), out.String())
	})
	t.Run("import", func(t *testing.T) {
		var out strings.Builder
		// Every line is bad, so no request is sent: the client has no server.
		st, err := importFrom(context.Background(), &apiClient{}, importOptions{batch: 500}, bytes.NewReader(file.Bytes()), &out, newProgress(io.Discard, int64(file.Len()), false))
		if err != nil {
			t.Fatal(err)
		}
		check(t, st.Bad, out.String())
	})
}

func TestTrimOneNewline(t *testing.T) {
	for in, want := range map[string]string{
		"body":       "body",
		"body\n":     "body",
		"body\r\n":   "body",
		"body\n\n":   "body\n",
		"a\nb\n":     "a\nb",
		"":           "",
		"\n":         "",
		"body \t\n":  "body \t",
		"body\r":     "body\r",
		"body\n\r\n": "body\n",
	} {
		if got := trimOneNewline(in); got != want {
			t.Errorf("trimOneNewline(%q) = %q, want %q", in, got, want)
		}
	}
}

var rateRE = regexp.MustCompile(`([0-9.]+) ([kMGTP]?B)/s`)

// TestProgressRate: the bar's rate is the bytes over the time since the
// import started, also at its first step, after the first batch. The
// test's pause is a lower bound on that time, so the rate shown can be no
// more than done/pause.
func TestProgressRate(t *testing.T) {
	const total, done = 8 << 20, 4 << 20
	const pause = 200 * time.Millisecond
	var out bytes.Buffer
	p := newProgress(&out, total, true)
	time.Sleep(pause)
	p.set(done, importStats{Imported: 1})
	defer p.finish()
	m := rateRE.FindAllStringSubmatch(out.String(), -1)
	if len(m) == 0 {
		t.Fatalf("no rate shown: %q", out.String())
	}
	last := m[len(m)-1]
	v, err := strconv.ParseFloat(last[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	unit := map[string]float64{"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15}[last[2]]
	if most := float64(done) / pause.Seconds(); v*unit > most*1.01 {
		t.Fatalf("rate shown %s %s/s, at most %.0f B/s is possible: %q", last[1], last[2], most, out.String())
	}
}

// A new export file is the user's alone (it holds every record of a
// realm); it was created 0666 less the umask, readable by every local
// user at the usual 022. An existing file keeps its own mode.
func TestExportFileMode(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing.jsonl")
	if err := os.WriteFile(existing, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(existing, 0o640); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want fs.FileMode
	}{
		{filepath.Join(dir, "new.jsonl"), 0o600},
		{existing, 0o640},
	} {
		out, err := createOutputFile(c.path, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := out.w.Write([]byte("{}\n")); err != nil {
			t.Fatal(err)
		}
		if err := out.commit(); err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != c.want {
			t.Errorf("%s: mode %v, want %v", filepath.Base(c.path), got, c.want)
		}
	}
}
