package main

import (
	"bytes"
	"context"
	"encoding/json"
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
	if bad := checkLines(bytes.NewReader(file.Bytes()), "", &out); bad != 1 || !strings.Contains(out.String(), "line 2: id imp-0000001 is already on line 1") {
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
	if bad := checkLines(bytes.NewReader(file.Bytes()), "", &out); bad != 0 {
		t.Fatalf("one id in two realms: %d bad lines:\n%s", bad, out.String())
	}
}

// TestImportOverlongLine: a line past the limit is reported once, by its
// number and in plain words, by the strict check and by the import.
func TestImportOverlongLine(t *testing.T) {
	file := []byte("\n\n" + strings.Repeat("x", maxLineBytes+10) + "\n")
	check := func(t *testing.T, msg string) {
		t.Helper()
		if strings.Count(msg, "line 3") != 1 || strings.Contains(msg, "bufio") || strings.Contains(msg, "token") || !strings.Contains(msg, "longer than") {
			t.Fatalf("overlong line reported as %q", msg)
		}
	}
	t.Run("strict", func(t *testing.T) {
		var out strings.Builder
		if bad := checkLines(bytes.NewReader(file), "default", &out); bad != 1 {
			t.Fatalf("%d bad lines, want 1", bad)
		}
		check(t, out.String())
	})
	t.Run("import", func(t *testing.T) {
		_, err := importFrom(context.Background(), &apiClient{}, importOptions{batch: 500}, bytes.NewReader(file), io.Discard, newProgress(io.Discard, int64(len(file)), false))
		if err == nil {
			t.Fatal("an overlong line was not refused")
		}
		check(t, err.Error())
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
			if bad := checkLines(bytes.NewReader(tc.file), "", &out); bad != tc.bad {
				t.Fatalf("%d bad lines, want %d:\n%s", bad, tc.bad, out.String())
			}
		})
	}
}
