package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestImportDuplicateIDs: a file naming one id twice is malformed (an
// export never does): the second line is a bad line naming the first,
// not a record "skipped, already stored".
func TestImportDuplicateIDs(t *testing.T) {
	first := archiveLine(1, sdk.StatusActive)
	second := archiveLine(2, sdk.StatusActive)
	second.ID = first.ID
	var file bytes.Buffer
	enc := json.NewEncoder(&file)
	for _, r := range []sdk.Record{first, second} {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	if bad := checkLinesOf(file.Bytes(), "", &out); bad != 1 || !strings.Contains(out.String(), "line 2: id imp-0000001 is already on line 1") {
		t.Fatalf("strict check of a duplicated id: %d bad lines:\n%s", bad, out.String())
	}
	// The same id in two realms is no duplicate.
	other := second
	other.Realm = "other"
	file.Reset()
	for _, r := range []sdk.Record{first, other} {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	if bad := checkLinesOf(file.Bytes(), "", &out); bad != 0 {
		t.Fatalf("one id in two realms: %d bad lines:\n%s", bad, out.String())
	}
}

// TestImportOverlongLine: a line past the limit is a bad line like any
// other, reported once by its number and in plain words, counted, and
// skipped: the lines before it in its batch and the lines after it are
// imported, wherever it falls and whatever its line end.
func TestImportOverlongLine(t *testing.T) {
	long := strings.Repeat("x", maxLineBytes+10)
	for _, c := range []struct {
		name        string
		before, end int // good lines before and after the long one
		lineEnd     string
		longLine    string
		longEnd     string // the long line's line end
	}{
		{"mid batch", 600, 1, "\n", long, "\n"},
		{"first", 0, 1, "\n", strings.Repeat("y", 5<<20), "\n"},
		{"last, no line end", 3, 0, "\n", long, ""},
		{"crlf", 2, 2, "\r\n", long, "\r\n"},
		{"one byte over", 1, 1, "\n", strings.Repeat("z", maxLineBytes+1), "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var file bytes.Buffer
			for i := range c.before {
				file.Write(recordLine(t, i+1))
				file.WriteString(c.lineEnd)
			}
			file.WriteString(c.longLine + c.longEnd)
			for i := range c.end {
				file.Write(recordLine(t, c.before+i+2))
				file.WriteString(c.lineEnd)
			}
			longAt := fmt.Sprintf("line %d: ", c.before+1)
			check := func(t *testing.T, msg string) {
				t.Helper()
				if strings.Count(msg, "\n") != 1 || strings.Count(msg, longAt) != 1 || !strings.Contains(msg, longAt+"the line is longer than 1 MiB") || strings.Contains(msg, "bufio") || strings.Contains(msg, "token") {
					t.Fatalf("overlong line reported as %q", msg)
				}
			}
			t.Run("strict", func(t *testing.T) {
				var out strings.Builder
				if bad := checkLinesOf(file.Bytes(), "default", &out); bad != 1 {
					t.Fatalf("%d bad lines, want 1", bad)
				}
				check(t, out.String())
			})
			t.Run("import", func(t *testing.T) {
				srv := newImportServer(t)
				var out strings.Builder
				st, err := importFrom(context.Background(), srv.client, importOptions{batch: 500}, bytes.NewReader(file.Bytes()), &out, newProgress(io.Discard, int64(file.Len()), false))
				if err != nil {
					t.Fatal(err)
				}
				check(t, out.String())
				if want := c.before + c.end; st.Imported != want || st.Bad != 1 || len(srv.ids()) != want {
					t.Fatalf("imported %d (server has %d), %d bad; want %d and 1", st.Imported, len(srv.ids()), st.Bad, want)
				}
			})
		})
	}
}

// TestLineReaderCountsEveryByte: the bytes counted are the bytes read,
// whatever the line ends, so the progress of a CRLF file ends at 100%.
func TestLineReaderCountsEveryByte(t *testing.T) {
	for _, c := range []struct{ name, file string }{
		{"lf", "a\nb\n"},
		{"crlf", "a\r\nb\r\n"},
		{"no final line end", "a\r\nb"},
		{"blank lines", "\r\n\n  \r\na\n\n"},
		{"byte-order mark", "\ufeffa\r\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lr := newLineReader(strings.NewReader(c.file))
			var lines []string
			for {
				b, _, ok := lr.next()
				if !ok {
					break
				}
				lines = append(lines, string(b))
			}
			if lr.bytes != int64(len(c.file)) || lr.err() != nil {
				t.Fatalf("read %d bytes of %d (%v)", lr.bytes, len(c.file), lr.err())
			}
			for _, l := range lines {
				if strings.ContainsAny(l, "\r\n\ufeff") {
					t.Fatalf("lines %q keep their line ends", lines)
				}
			}
		})
	}
	t.Run("progress of a crlf file", func(t *testing.T) {
		var file bytes.Buffer
		for i := range 1200 {
			file.Write(recordLine(t, i+1))
			file.WriteString("\r\n")
		}
		srv := newImportServer(t)
		var out strings.Builder
		if _, err := importFrom(context.Background(), srv.client, importOptions{batch: 500}, bytes.NewReader(file.Bytes()), io.Discard, newProgress(&out, int64(file.Len()), false)); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if last := lines[len(lines)-1]; !strings.HasPrefix(last, "import: 100% of the file, 1200 imported") {
			t.Fatalf("the last progress line is %q", last)
		}
	})
}

// TestImportSkipsAByteOrderMark: a file saved by an editor that starts it
// with a UTF-8 byte-order mark imports whole; the mark is no part of line
// 1's record, and a mark anywhere else is still a bad line.
func TestImportSkipsAByteOrderMark(t *testing.T) {
	line := func(i int) []byte {
		b, err := json.Marshal(archiveLine(i, sdk.StatusActive))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		file []byte
		bad  int
	}{
		{"mark at the start", slices.Concat([]byte("\ufeff"), line(1), []byte("\n"), line(2), []byte("\n")), 0},
		{"mark on line 2", slices.Concat(line(1), []byte("\n\ufeff"), line(2), []byte("\n")), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			if bad := checkLinesOf(tc.file, "", &out); bad != tc.bad {
				t.Fatalf("%d bad lines, want %d:\n%s", bad, tc.bad, out.String())
			}
		})
	}
}
