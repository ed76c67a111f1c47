package main

import (
	"encoding/json"
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
	for _, c := range []struct{ name, line, want string }{
		{"duplicate member", strings.Replace(good, `{`, `{"title":"other",`, 1), "appears more than once"},
		{"unknown member", strings.Replace(good, `{`, `{"colour":"red",`, 1), "colour: unknown field"},
		{"member in another case", strings.Replace(good, `"title"`, `"Title"`, 1), "Title: unknown field"},
		{"trailing data", good + ` {}`, "trailing data"},
		{"wrong kind", strings.Replace(good, `"title":"kept"`, `"title":7`, 1), "title: must be a string"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseLine([]byte(c.line), "")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("parseLine = %v, want an error containing %q", err, c.want)
			}
		})
	}
}
