package sdk

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDecodeConfig(t *testing.T) {
	type cfg struct {
		Path  string `json:"path"`
		Limit int    `json:"limit"`
	}
	cases := []struct {
		name, raw string
		want      cfg
		err       string
	}{
		{"empty keeps defaults", "", cfg{Path: "default.db"}, ""},
		{"null is not an object", " null ", cfg{}, "must be a JSON object"},
		{"empty object keeps defaults", "{}", cfg{Path: "default.db"}, ""},
		{"known keys", `{"path":"x.db","limit":3}`, cfg{Path: "x.db", Limit: 3}, ""},
		{"unknown key", `{"pth":"x.db"}`, cfg{}, `pth: unknown field`},
		{"case-folded key", `{"Path":"x.db"}`, cfg{}, `Path: unknown field`},
		{"duplicate key", `{"path":"a.db","path":"b.db"}`, cfg{}, `path: appears more than once`},
		{"extra closing brace", `{"path":"x.db"}}`, cfg{}, "trailing data"},
		{"lone surrogate", `{"path":"\udc00"}`, cfg{}, "surrogate"},
		{"wrong type", `{"limit":"3"}`, cfg{}, "limit"},
		{"not an object", `["x.db"]`, cfg{}, "must be a JSON object"},
		{"trailing data", `{"path":"x.db"} {}`, cfg{}, "trailing data"},
		{"truncated", `{"path":`, cfg{}, "cut short"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := cfg{Path: "default.db"}
			err := DecodeConfig(json.RawMessage(c.raw), &got)
			if c.err != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want ErrInvalid containing %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("= %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestSecretFromEnv(t *testing.T) {
	env := map[string]string{"SET": " sk-1 ", "BLANK": "  ", "BROKEN": "sk-first-half\nsecond-half", "NUL": "sk-1\x00", "DEL": "sk\x7f1", "TAB": "sk\t1"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct {
		name, want, problem string
	}{
		{"", "", ""},
		{"SET", "sk-1", ""},
		{"UNSET", "", "names UNSET, which is not set"},
		{"BLANK", "", "names BLANK, which is not set"},
		{"sk-pasted-secret", "", "must name an environment variable"},
		{"1ABC", "", "must name an environment variable"},
		{"BROKEN", "", "names BROKEN, whose value holds a control character"},
		{"NUL", "", "whose value holds a control character"},
		{"DEL", "", "whose value holds a control character"},
		{"TAB", "sk\t1", ""},
	} {
		got, err := SecretFromEnv("api_key_env", tc.name, lookup)
		var fe *FieldError
		switch {
		case tc.problem == "" && (err != nil || got != tc.want):
			t.Errorf("%q: %q, %v; want %q", tc.name, got, err, tc.want)
		case tc.problem != "" && (!errors.As(err, &fe) || fe.Field != "api_key_env" || !strings.Contains(fe.Problem, tc.problem) || !errors.Is(err, ErrInvalid)):
			t.Errorf("%q: %v, want an invalid api_key_env saying %q", tc.name, err, tc.problem)
		case err != nil && strings.Contains(err.Error(), "pasted-secret"):
			t.Errorf("%q: the error echoes the value: %v", tc.name, err)
		}
	}
}

func TestLedgerBoundsLimits(t *testing.T) {
	cases := []struct {
		b         LedgerBounds
		retention time.Duration
		rows      int64
		field     string // the key an error names; "" for none
	}{
		{LedgerBounds{}, DefaultLedgerRetention, DefaultLedgerMaxRows, ""},
		{LedgerBounds{RetentionHours: 2, MaxRows: 50}, 2 * time.Hour, 50, ""},
		{LedgerBounds{RetentionHours: 2562047}, 2562047 * time.Hour, DefaultLedgerMaxRows, ""},
		{LedgerBounds{RetentionHours: 2562048}, 0, 0, "ledger_retention_hours"},
		{LedgerBounds{RetentionHours: -1}, 0, 0, "ledger_retention_hours"},
		{LedgerBounds{MaxRows: -5}, 0, 0, "ledger_max_rows"},
	}
	for _, c := range cases {
		retention, rows, err := c.b.Limits()
		var fe *FieldError
		switch {
		case c.field == "" && (err != nil || retention != c.retention || rows != c.rows):
			t.Errorf("%+v: %v, %d, %v; want %v, %d", c.b, retention, rows, err, c.retention, c.rows)
		case c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, ErrInvalid)):
			t.Errorf("%+v: %v; want an invalid %s", c.b, err, c.field)
		}
	}
}
