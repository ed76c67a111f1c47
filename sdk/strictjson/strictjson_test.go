package strictjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

type request struct {
	Identity struct {
		ID    string `json:"id"`
		Realm string `json:"realm"`
	} `json:"identity"`
	Limit   int             `json:"limit"`
	Records []record        `json:"records"`
	Config  json.RawMessage `json:"config"`
	At      *time.Time      `json:"at"`
}

type record struct {
	Title string   `json:"title"`
	Tags  []string `json:"tags"`
}

func TestDecodeRefuses(t *testing.T) {
	cases := []struct {
		name, in, path, problem string
	}{
		{"case-folded name", `{"Identity":{"id":"a"}}`, "Identity", "unknown field"},
		{"misspelled name", `{"records":[{"titel":"x"}]}`, "records[0].titel", "unknown field"},
		{"trailing brace", `{"limit":1}}`, "", "trailing data"},
		{"second value", `{"limit":1} {}`, "", "trailing data"},
		{"duplicate key", `{"limit":1,"limit":2}`, "limit", "more than once"},
		{"duplicate nested key", `{"identity":{"id":"a","id":"b"}}`, "identity.id", "more than once"},
		{"invalid UTF-8", "{\"records\":[{\"title\":\"\xff\"}]}", "records[0].title", "not valid UTF-8"},
		{"lone surrogate", `{"records":[{"title":"\ud800"}]}`, "records[0].title", "surrogate"},
		{"wrong type", `{"limit":"ten"}`, "limit", "must be an integer, not a string"},
		{"wrong element type", `{"records":[{"tags":[1]}]}`, "records[0].tags[0]", "must be a string, not a number"},
		{"bad time", `{"at":"yesterday"}`, "at", "is not an RFC 3339 time (like "},
		{"time of the wrong kind", `{"at":5}`, "at", "must be an RFC 3339 time string, not a number"},
		{"empty", ``, "", "empty or cut short"},
		{"cut short", `{"limit":`, "limit", "empty or cut short"},
		{"not JSON", `limit=1`, "", "invalid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var v request
			err := Decode([]byte(c.in), &v)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Decode(%q) = %v, want an *Error", c.in, err)
			}
			if e.Path != c.path || !strings.Contains(e.Problem, c.problem) {
				t.Fatalf("Decode(%q) = path %q problem %q, want path %q problem containing %q", c.in, e.Path, e.Problem, c.path, c.problem)
			}
			if strings.Contains(err.Error(), "Go ") || strings.Contains(err.Error(), "strictjson.") || strings.Contains(err.Error(), "int64") {
				t.Fatalf("message names a Go type: %q", err)
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	var v request
	in := `{"identity":{"id":"alice","realm":"r"},"limit":3,"records":[{"title":"t","tags":["a"]}],"config":{"k":[1,2]},"at":"2026-01-02T03:04:05Z"}`
	if err := Decode([]byte(in), &v); err != nil {
		t.Fatal(err)
	}
	if v.Identity.ID != "alice" || v.Limit != 3 || v.Records[0].Tags[0] != "a" || string(v.Config) != `{"k":[1,2]}` || v.At.Year() != 2026 {
		t.Fatalf("decoded %+v", v)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"limit":1}}`, `{"Identity":{}}`, `{"a":1,"a":2}`, "{\"records\":[{\"title\":\"\xff\"}]}", `{"records":[{"title":"\udc00"}]}`, `{"records":[{"title":"ok"}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v request
		err := Decode(data, &v)
		if err == nil {
			// Whatever is accepted is one valid JSON value the standard
			// decoder reads the same way.
			var std request
			if !json.Valid(data) {
				t.Fatalf("accepted invalid JSON %q", data)
			}
			if err := json.Unmarshal(data, &std); err != nil {
				t.Fatalf("accepted %q that encoding/json refuses: %v", data, err)
			}
			return
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("error %v is not an *Error", err)
		}
	})
}

func TestDecodeTolerant(t *testing.T) {
	var v request
	unknown, err := DecodeTolerant([]byte(`{"limit":2,"future":true,"records":[{"title":"t","color":"red"}],"config":{"any":1}}`), &v)
	if err != nil {
		t.Fatal(err)
	}
	if v.Limit != 2 || v.Records[0].Title != "t" {
		t.Fatalf("decoded %+v", v)
	}
	if strings.Join(unknown, ",") != "future,records[0].color" && strings.Join(unknown, ",") != "records[0].color,future" {
		t.Fatalf("unknown = %v", unknown)
	}
	for _, bad := range []string{`{"limit":1}}`, `{"limit":1,"limit":2}`, "{\"future\":\"\xff\"}", `{"limit":"x"}`} {
		if _, err := DecodeTolerant([]byte(bad), &v); err == nil {
			t.Errorf("DecodeTolerant(%q) accepted", bad)
		}
	}
}

// TestTimesInEitherCase: RFC 3339 (§5.6) and JSON Schema's date-time
// allow "t" and "z" in lower case; the decoder refused them. What else is
// wrong with a time is still refused, under its field's name.
func TestTimesInEitherCase(t *testing.T) {
	type doc struct {
		At  time.Time  `json:"at"`
		Opt *time.Time `json:"opt"`
	}
	want := time.Date(2023, 5, 30, 10, 0, 0, 0, time.UTC)
	for _, in := range []string{
		`{"at":"2023-05-30T10:00:00Z","opt":"2023-05-30T10:00:00Z"}`,
		`{"at":"2023-05-30t10:00:00z","opt":"2023-05-30t10:00:00Z"}`,
		`{"at":"2023-05-30T10:00:00z","opt":"2023-05-30t12:00:00+02:00"}`,
	} {
		var d doc
		if err := Decode([]byte(in), &d); err != nil || !d.At.Equal(want) || d.Opt == nil || !d.Opt.Equal(want) {
			t.Errorf("Decode(%s) = %+v, %v; want both times %v", in, d, err, want)
		}
	}
	for _, in := range []string{
		`{"at":"2023-05-30x10:00:00z"}`,
		`{"at":"2023-05-30t25:00:00z"}`,
		`{"at":"yesterday"}`,
		`{"at":7}`,
	} {
		var d doc
		err := Decode([]byte(in), &d)
		var e *Error
		if !errors.As(err, &e) || e.Path != "at" || !strings.Contains(e.Problem, "RFC 3339") {
			t.Errorf("Decode(%s) = %v, want a refusal of at as no RFC 3339 time", in, err)
		}
	}
	var d doc
	if err := Decode([]byte(`{"at":null,"opt":null}`), &d); err != nil || !d.At.IsZero() || d.Opt != nil {
		t.Errorf("nulls = %+v, %v; want both absent", d, err)
	}
}
