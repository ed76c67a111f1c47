package markdown

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk"
)

var update = flag.Bool("update", false, "rewrite golden files")

func goldenRecord() sdk.Record {
	created := time.Date(2026, 1, 2, 3, 4, 5, 123e6, time.UTC)
	r := sdk.Record{
		ID:          "r0194f3c2a1b07e3c5d2a9f1e",
		Scope:       sdk.IdentityScope("alice"),
		Kind:        sdk.KindPreference,
		Title:       `Prefers "tabs" <over> spaces & café`,
		Description: "Indentation style for Go and Makefiles",
		Body:        "Use tabs.\n\n---\n\nEven in `Makefile`s:\n\ttab\n",
		Tags:        []string{"style", "Go"},
		Trust:       sdk.TrustAgentVerified,
		Status:      sdk.StatusActive,
		Supersedes:  "r0194f3c2a1b07e3c5d2a9f00",
		CreatedAt:   created,
		UpdatedAt:   created.Add(time.Hour),
		ExpiresAt:   created.Add(365 * 24 * time.Hour),
		UseCount:    3,
		LastUsedAt:  created.Add(2 * time.Hour),
		Thread:      &sdk.Thread{ID: "conv-7", Seq: 12},
	}
	r.ContentHash = sdk.ContentHash(r.Title, r.Body)
	return r
}

func TestRenderGolden(t *testing.T) {
	r := goldenRecord()
	got := renderRecord(&r)
	path := filepath.Join("testdata", "record.md")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("render differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
	back, err := parseRecord(want)
	if err != nil {
		t.Fatal(err)
	}
	if !sameRecord(back, r) {
		t.Fatalf("golden file parses to\n%+v\nwant\n%+v", back, r)
	}
}

// sameRecord compares records treating nil and empty tags alike.
func sameRecord(a, b sdk.Record) bool {
	if len(a.Tags) == 0 && len(b.Tags) == 0 {
		a.Tags, b.Tags = nil, nil
	}
	return reflect.DeepEqual(a, b)
}

func TestParseAcceptsHandWriting(t *testing.T) {
	tests := []struct {
		name string
		file string
		want sdk.Record
	}{
		{"minimal", "---\nkind: \"fact\"\ntitle: \"T\"\n---\nbody\n",
			sdk.Record{Kind: "fact", Title: "T", Body: "body"}},
		{"no final newline", "---\nkind: \"fact\"\n---\nbody",
			sdk.Record{Kind: "fact", Body: "body"}},
		{"blank lines and spacing", "---\n\nkind:\"fact\"\ntitle:    \"T\"   \n\n---\nbody\n\n",
			sdk.Record{Kind: "fact", Title: "T", Body: "body\n"}},
		{"CRLF front matter", "---\r\nkind: \"fact\"\r\ntitle: \"T\"\r\n---\r\nbody\r\n",
			sdk.Record{Kind: "fact", Title: "T", Body: "body"}},
		{"CRLF body", "---\r\nkind: \"fact\"\r\n---\r\none\r\n\r\ntwo\r\n",
			sdk.Record{Kind: "fact", Body: "one\n\ntwo"}},
		{"a carriage return memhost wrote", "---\nkind: \"fact\"\n---\none\r\ntwo\n",
			sdk.Record{Kind: "fact", Body: "one\r\ntwo"}},
		{"BOM", "\ufeff---\nkind: \"fact\"\n---\n",
			sdk.Record{Kind: "fact"}},
		{"escapes", "---\ntitle: \"a\\\"b\\u00e9\\n\"\ntags: [\"x\",\"y z\"]\n---\n",
			sdk.Record{Title: "a\"bé\n", Tags: []string{"x", "y z"}}},
		{"empty tags", "---\ntags: []\n---\n", sdk.Record{}},
		{"offset time", "---\ncreated: \"2026-01-02T05:04:05+02:00\"\n---\n",
			sdk.Record{CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}},
		{"body holding delimiters", "---\nkind: \"fact\"\n---\n---\nkind: \"x\"\n---\n",
			sdk.Record{Kind: "fact", Body: "---\nkind: \"x\"\n---"}},
		{"use count", "---\nuse_count: 12\n---\n", sdk.Record{UseCount: 12}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRecord([]byte(tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if !sameRecord(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name, file, errHas string
	}{
		{"empty", "", "line 1"},
		{"no front matter", "# Title\nbody\n", "line 1"},
		{"unclosed", "---\nkind: \"fact\"\n", "no closing"},
		{"yaml bare string", "---\nkind: fact\n---\n", "kind: want a JSON string"},
		{"yaml list", "---\ntags: [a, b]\n---\n", "tags: want a JSON list"},
		{"yaml dash list", "---\ntags:\n  - a\n---\n", "tags: no value"},
		{"indented key", "---\n  kind: \"fact\"\n---\n", "want `key: <JSON value>`"},
		{"no colon", "---\nkind \"fact\"\n---\n", "want `key: <JSON value>`"},
		{"unknown key", "---\ncolour: \"red\"\n---\n", `unknown key "colour"`},
		{"repeated key", "---\ntitle: \"a\"\ntitle: \"b\"\n---\n", "title: appears twice"},
		{"null", "---\ntitle: null\n---\n", "title: want a JSON string"},
		{"trailing junk", "---\ntitle: \"a\" b\n---\n", "title: bad JSON string"},
		{"unterminated", "---\ntitle: \"a\n---\n", "title: bad JSON string"},
		{"lone quote", "---\ntitle: \"\n---\n", "title: bad JSON string"},
		{"tag not string", "---\ntags: [1]\n---\n", "tags: item 0"},
		{"bad time", "---\ncreated: \"yesterday\"\n---\n", "created: want an RFC 3339 time"},
		{"negative count", "---\nuse_count: -1\n---\n", "use_count: want a whole number"},
		{"fraction count", "---\nuse_count: 1.5\n---\n", "use_count: want a whole number"},
		{"invalid UTF-8", "---\ntitle: \"\xff\"\n---\n", "not valid UTF-8"},
		{"thread seq alone", "---\nthread_seq: 3\n---\n", "thread_seq without thread"},
		{"thread seq negative", "---\nthread: \"c\"\nthread_seq: -3\n---\n", "thread_seq: want a whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseRecord([]byte(tt.file))
			if err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("err = %v, want one containing %q", err, tt.errHas)
			}
		})
	}
}

func TestRenderEscapesToOneLine(t *testing.T) {
	weird := "a\nb\rc\td\x00e\x7ff\u2028g\u2029h\"i\\j<k>&"
	r := sdk.Record{Title: weird, Tags: []string{"x\u2028y"}}
	out := renderRecord(&r)
	fm := out[:bytes.Index(out, []byte("\n---\n"))]
	if n := bytes.Count(fm, []byte("\n")); n != 2 {
		t.Fatalf("front matter spans %d lines, want 3:\n%s", n+1, fm)
	}
	back, err := parseRecord(out)
	if err != nil {
		t.Fatal(err)
	}
	if back.Title != weird || back.Tags[0] != "x\u2028y" {
		t.Fatalf("round trip: title %q tags %q", back.Title, back.Tags)
	}
}

// FuzzParseRecord feeds garbage to the parser: it must never panic, and
// whatever it accepts must render to a file that parses back the same.
func FuzzParseRecord(f *testing.F) {
	golden, _ := os.ReadFile(filepath.Join("testdata", "record.md"))
	f.Add(golden)
	for _, s := range []string{
		"", "---", "---\n", "---\n---\n", "---\n---", "\ufeff---\n---\n",
		"---\nkind: \"fact\"\ntitle: \"T\"\n---\nbody\n",
		"---\ntags: [\"a\", \"b\"]\nuse_count: 3\n---\n",
		"---\ntitle: \"\\u2028\\\"\"\n---\n\n\n",
		"---\ntitle: \"\n---\n", "---\r\nkind: \"x\"\r\n---\r\n",
		"---\ncreated: \"2026-01-02T03:04:05.999999999Z\"\n---\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := parseRecord(data)
		if err != nil {
			return
		}
		if !utf8.ValidString(r.Body) || len(r.Body) > maxFileBytes {
			return // the loader's Validate refuses these
		}
		for _, tm := range []time.Time{r.CreatedAt, r.UpdatedAt, r.ExpiresAt, r.LastUsedAt} {
			if !tm.IsZero() && (tm.Year() < 1 || tm.Year() > 9999) {
				return
			}
		}
		out := renderRecord(&r)
		back, err := parseRecord(out)
		if err != nil {
			t.Fatalf("accepted %q, but its rendering %q does not parse: %v", data, out, err)
		}
		if !sameRecord(back, r) {
			t.Fatalf("render/parse changed the record:\n%+v\n%+v", r, back)
		}
	})
}

// FuzzRoundTrip builds valid records from fuzzed fields: parse(render(r))
// must give r back exactly.
func FuzzRoundTrip(f *testing.F) {
	g := goldenRecord()
	f.Add(g.ID, string(g.Scope), string(g.Kind), g.Title, g.Description, g.Body, "style", "go", string(g.Trust), string(g.Status), g.Supersedes, g.CreatedAt.UnixNano(), g.ExpiresAt.UnixNano(), g.UseCount)
	f.Add("x", "realm", "fact", "", "", "b", "", "", "", "", "", int64(0), int64(0), int64(0))
	f.Add("a.b-c_d", "mob:ops", "gotcha", "---", "\n", "\n---\n\r", "a b", "ç", "operator", "tombstoned", "", int64(-1), int64(1), int64(1<<40))
	f.Fuzz(func(t *testing.T, id, scope, kind, title, desc, body, tag1, tag2, trust, status, supersedes string, created, expires, uses int64) {
		r := sdk.Record{
			ID: id, Scope: sdk.Scope(scope), Kind: sdk.RecordKind(kind), Title: title, Description: desc, Body: body,
			Trust: sdk.Trust(trust), Status: sdk.Status(status), Supersedes: supersedes, UseCount: uses,
		}
		for _, tag := range []string{tag1, tag2} {
			if tag != "" {
				r.Tags = append(r.Tags, tag)
			}
		}
		if r.Validate() != nil || uses < 0 {
			return
		}
		r.CreatedAt = fuzzTime(created)
		r.UpdatedAt = r.CreatedAt
		r.ExpiresAt = fuzzTime(expires)
		r.ContentHash = sdk.ContentHash(r.Title, r.Body)
		back, err := parseRecord(renderRecord(&r))
		if err != nil {
			t.Fatalf("valid record does not round-trip: %v\n%s", err, renderRecord(&r))
		}
		if !sameRecord(back, r) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", r, back)
		}
		// A tool converting the file's line ends to CRLF changes nothing
		// of a record whose body holds no carriage return.
		if !strings.Contains(body, "\r") {
			converted := bytes.ReplaceAll(renderRecord(&r), []byte("\n"), []byte("\r\n"))
			back, err := parseRecord(converted)
			if err != nil || !sameRecord(back, r) {
				t.Fatalf("the file converted to CRLF reads %+v (%v), want %+v", back, err, r)
			}
		}
	})
}

// fuzzTime maps any int64 to a zero time or one in years 1970-2262.
func fuzzTime(ns int64) time.Time {
	if ns <= 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}
