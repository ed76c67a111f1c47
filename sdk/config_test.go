package sdk

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
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
