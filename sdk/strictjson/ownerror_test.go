package strictjson

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// errInvalid stands for sdk.ErrInvalid (sdk imports this package).
var errInvalid = errors.New("invalid argument")

// fieldError has the shape of sdk.FieldError.
type fieldError struct{ Field, Problem string }

func (e *fieldError) Error() string { return e.Field + ": " + e.Problem }
func (e *fieldError) Unwrap() error { return errInvalid }

// block refuses as coordinator.Content does: a string or a list only, and
// it names its own field.
type block struct{ text string }

func (b *block) UnmarshalJSON(data []byte) error {
	switch data[0] {
	case '"':
		b.text = string(data)
		return nil
	case '[':
		return errors.New(`content[0]: content: a text block needs a string "text"`)
	}
	return &fieldError{"content", "must be a string or a list of blocks"}
}

// colour decodes itself from text.
type colour string

func (c *colour) UnmarshalText(b []byte) error {
	if string(b) != "red" {
		return errors.New(`is not a colour memhost knows ("red")`)
	}
	*c = colour(b)
	return nil
}

// strictInside decodes itself with Decode, as a plugin type might.
type strictInside struct {
	v struct {
		N int `json:"n"`
	}
}

func (s *strictInside) UnmarshalJSON(b []byte) error { return Decode(b, &s.v) }

type withOwn struct {
	Content block            `json:"content"`
	List    []block          `json:"list"`
	Ptr     *block           `json:"ptr"`
	Map     map[string]block `json:"map"`
	Colour  colour           `json:"colour"`
	Inner   strictInside     `json:"inner"`
	At      time.Time        `json:"at"`
	Title   string           `json:"title"`
	I64     int64            `json:"i64"`
	U64     uint64           `json:"u64"`
	I8      int8             `json:"i8"`
	Int     int              `json:"int"`
	F64     float64          `json:"f64"`
	Any     any              `json:"any"`
	Pair    [2]int           `json:"pair"`
}

// TestOwnDecoderRefusal pins that a type's own decoder's refusal reaches
// the caller in its words under the field's path (it used to be replaced
// by "must be an object, not an array", even "not an object"), and that
// strictjson's own checks keep theirs.
func TestOwnDecoderRefusal(t *testing.T) {
	cases := []struct {
		name, in, path, problem string
		own                     bool // errors.Is reaches the decoder's error
	}{
		{"own refusal of an object", `{"content":{}}`, "content", "must be a string or a list of blocks", true},
		{"own refusal of a list", `{"content":[{}]}`, "content", `content[0]: content: a text block needs a string "text"`, false},
		{"own refusal in a list", `{"list":["ok",{}]}`, "list[1]", "content: must be a string or a list of blocks", true},
		{"own refusal behind a pointer", `{"ptr":7}`, "ptr", "must be a string or a list of blocks", true},
		{"own refusal in a map", `{"map":{"k":true}}`, "map.k", "must be a string or a list of blocks", true},
		{"text decoder refusal", `{"colour":"blue"}`, "colour", "is not a colour memhost knows", false},
		{"text decoder, not a string", `{"colour":1}`, "colour", "must be a string, not a number", false},
		{"strict decoder inside", `{"inner":{"n":"x"}}`, "inner.n", "must be an integer, not a string", false},
		{"strict decoder inside, unknown", `{"inner":{"m":1}}`, "inner.m", "unknown field", false},
		// strictjson's own checks keep their words around such types.
		{"duplicate around own", `{"content":"a","content":"b"}`, "content", "appears more than once", false},
		{"duplicate inside own", `{"content":[{"a":1,"a":2}]}`, "content[0].a", "appears more than once", false},
		{"UTF-8 inside own", "{\"content\":\"\xff\"}", "content", "not valid UTF-8", false},
		{"surrogate inside own", `{"content":"\udc00"}`, "content", "lone UTF-16 surrogate", false},
		{"unknown beside own", `{"content":"a","Content":"b"}`, "Content", "unknown field", false},
		{"time string", `{"at":"soon"}`, "at", "is not an RFC 3339 time", false},
		{"time kind", `{"at":[]}`, "at", "must be an RFC 3339 time string, not an array", false},
		{"kind still", `{"title":1}`, "title", "must be a string, not a number", false},
		// Numbers: say the range, never "must be a number, not a number"
		// nor "must be an integer, not a number".
		{"int64 overflow", `{"i64":9223372036854775808}`, "i64", "is a number out of range", false},
		{"int8 overflow", `{"i8":300}`, "i8", "must be an integer from -128 to 127", false},
		{"uint64 negative", `{"u64":-1}`, "u64", "must be a non-negative integer (no fraction or exponent)", false},
		{"uint64 overflow", `{"u64":18446744073709551616}`, "u64", "is a number out of range", false},
		{"float into int", `{"int":1.5}`, "int", "must be an integer (no fraction or exponent)", false},
		{"exact float into int", `{"int":1.0}`, "int", "must be an integer (no fraction or exponent)", false},
		{"small exponent into int", `{"int":1e2}`, "int", "must be an integer (no fraction or exponent)", false},
		{"exponent into int", `{"int":1e400}`, "int", "must be an integer", false},
		{"float overflow", `{"f64":1e400}`, "f64", "is a number too large to hold", false},
		{"any overflow", `{"any":-1e400}`, "any", "is a number too large to hold", false},
		{"array too long", `{"pair":[1,2,3]}`, "pair", "must be an array of exactly 2 elements", false},
		{"array too short", `{"pair":[1]}`, "pair", "must be an array of exactly 2 elements", false},
		// Document-level refusals.
		{"BOM", "\ufeff{}", "", "invalid JSON at byte 0", false},
		{"trailing after own", `{"content":"a"} x`, "", "trailing data", false},
		{"huge unknown name", `{"` + strings.Repeat("k", 1<<20) + `":1}`, strings.Repeat("k", 256) + "…", "unknown field", false},
		{"bad escape", `{"title":"\x"}`, "title", "invalid escape", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var v withOwn
			err := Decode([]byte(c.in), &v)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Decode(%q) = %v, want an *Error", c.in, err)
			}
			if e.Path != c.path || !strings.Contains(e.Problem, c.problem) {
				t.Fatalf("Decode(%q) = path %q problem %q, want path %q problem containing %q", c.in, e.Path, e.Problem, c.path, c.problem)
			}
			for _, bad := range []string{"not an object", "a number, not a number", "integer, not a number", "something else", "Go ", "strictjson.", "int64 ", "uint64 "} {
				if strings.Contains(e.Problem, bad) {
					t.Fatalf("Decode(%q) problem %q says %q", c.in, e.Problem, bad)
				}
			}
			if got := errors.Is(err, errInvalid); got != c.own {
				t.Fatalf("errors.Is(%v, errInvalid) = %v, want %v", err, got, c.own)
			}
		})
	}
}

func TestOwnDecoderFieldErrorReachable(t *testing.T) {
	var v withOwn
	err := Decode([]byte(`{"list":[{}]}`), &v)
	var fe *fieldError
	if !errors.As(err, &fe) || fe.Problem != "must be a string or a list of blocks" {
		t.Fatalf("errors.As(%v, *fieldError) = %v", err, fe)
	}
	if err.Error() != "list[0]: content: must be a string or a list of blocks" {
		t.Fatalf("Error() = %q", err)
	}
}

func TestOwnDecoderAccepts(t *testing.T) {
	var v withOwn
	in := `{"content":"a","list":["b"],"ptr":"c","map":{"k":"d"},"colour":"red","inner":{"n":2},"i64":-9223372036854775808,"u64":18446744073709551615,"f64":-0,"int":-0,"pair":[1,2]}`
	if err := Decode([]byte(in), &v); err != nil {
		t.Fatal(err)
	}
	if v.Colour != "red" || v.Inner.v.N != 2 || v.U64 != 1<<64-1 || v.Pair != [2]int{1, 2} {
		t.Fatalf("decoded %+v", v)
	}
}

// TestHugeInputs pins that nesting is bounded (no stack exhaustion), that
// the refusal of a too-deep document is short, and that large flat input
// decodes in time linear in its size.
func TestHugeInputs(t *testing.T) {
	for _, in := range []string{
		strings.Repeat("[", 1<<20),
		strings.Repeat(`{"any":`, 1<<16),
		`{"any":` + strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20001),
	} {
		var v withOwn
		err := Decode([]byte(in), &v)
		if err == nil {
			t.Fatalf("accepted %d bytes of nesting", len(in))
		}
		if len(err.Error()) > 1000 {
			t.Errorf("refusal of deep input is %d bytes long: %.120q…", len(err.Error()), err)
		}
	}
	var list []string
	big := "[" + strings.Repeat(`"abcdefgh\u00e9",`, 200000) + `"z"]`
	// CPU time, not wall time: on a loaded machine (make test on two
	// cores) the decode waited past 5 s for a core while it worked for a
	// fifth of a second. Quadratic work on 200,000 items takes minutes.
	start := processCPU()
	if err := Decode([]byte(big), &list); err != nil || len(list) != 200001 {
		t.Fatalf("flat list: %v (%d)", err, len(list))
	}
	if took := processCPU() - start; took > 5*time.Second {
		t.Fatalf("decoding %d bytes took %v of CPU time", len(big), took)
	}
}

// FuzzDecodeOwn decodes into types with their own decoders: every refusal
// is an *Error with a bounded path and no self-contradicting words, and a
// refusal by a type's own decoder is never reworded as a kind mismatch.
func FuzzDecodeOwn(f *testing.F) {
	for _, s := range []string{`{"content":{}}`, `{"list":["a",[1]]}`, `{"colour":"blue"}`, `{"inner":{"n":"x"}}`, `{"i8":300}`, `{"f64":1e400}`, `{"pair":[1,2,3]}`, `{"at":"2026-01-02T03:04:05Z"}`, "\ufeff{}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v withOwn
		err := Decode(data, &v)
		if err == nil {
			return
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("error %v is not an *Error", err)
		}
		if len(e.Path) > 256+len("…") {
			t.Fatalf("path is %d bytes long", len(e.Path))
		}
		for _, bad := range []string{"an object, not an object", "a number, not a number", "a string, not a string", "an array, not an array", "not something else"} {
			if strings.Contains(e.Problem, bad) {
				t.Fatalf("Decode(%q): problem %q", data, e.Problem)
			}
		}
	})
}

// ownMembers decodes an object whose members are not its Go fields.
type ownMembers struct{ m map[string]int }

func (o *ownMembers) UnmarshalJSON(b []byte) error { return Decode(b, &o.m) }

// TestDecodeTolerantOwnDecoder pins that DecodeTolerant does not call the
// members of a self-decoding type unknown (it used to walk the Go
// struct's fields, which the type's decoder does not read by).
func TestDecodeTolerantOwnDecoder(t *testing.T) {
	var v struct {
		Own   ownMembers `json:"own"`
		Other int        `json:"other"`
	}
	unknown, err := DecodeTolerant([]byte(`{"own":{"a":1,"b":2},"later":true}`), &v)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(unknown, ",") != "later" || v.Own.m["b"] != 2 {
		t.Fatalf("unknown = %v, decoded %+v", unknown, v)
	}
}
