package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

func open(t *testing.T, path string) *Provider {
	t.Helper()
	p := New()
	cfg, _ := json.Marshal(Config{File: path})
	if err := p.Configure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	return p
}

func note(title string) sdk.Record {
	return sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: title, Body: "body of " + title}
}

// TestTornWriteIsCutOff: a partial last line (the plugin died mid-append,
// before it acknowledged anything) is cut off at the next start, and the
// journal stays appendable.
func TestTornWriteIsCutOff(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.jsonl")
	p := open(t, path)
	ids, err := p.Remember(ctx, "default", []sdk.Record{note("first"), note("second")})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	whole, _ := os.ReadFile(path)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"op":"put","realm":"default","records":[{"id":"half`)
	f.Close()

	p = open(t, path)
	got, err := p.Get(ctx, "default", ids)
	if err != nil || len(got) != 2 {
		t.Fatalf("after a torn write, Get = %d records, %v; want both acknowledged ones", len(got), err)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, whole) {
		t.Fatalf("the torn line was not cut off:\n%s", now)
	}
	if _, err := p.Remember(ctx, "default", []sdk.Record{note("third")}); err != nil {
		t.Fatal(err)
	}
	p.Close()
	p = open(t, path)
	defer p.Close()
	if rows, err := p.Manifest(ctx, sdk.ManifestQuery{Realm: "default", Tier: sdk.TierFull}); err != nil || len(rows) != 3 {
		t.Fatalf("after reopening, the manifest has %d rows, %v; want 3", len(rows), err)
	}
}

// TestCorruptJournalIsRefused: a damaged complete line is not skipped
// (that would silently lose or resurrect records): Configure fails and
// names the line.
func TestCorruptJournalIsRefused(t *testing.T) {
	for name, line := range map[string]string{
		"not json":           "{oops\n",
		"unknown op":         `{"op":"drop","realm":"default"}` + "\n",
		"bad realm":          `{"op":"forget","realm":"../x","ids":["a"]}` + "\n",
		"hash mismatch":      `{"op":"put","realm":"default","records":[{"id":"a","realm":"default","scope":"realm","kind":"fact","title":"t","body":"b","trust":"operator","status":"active","content_hash":"00"}]}` + "\n",
		"supersede, no repl": `{"op":"supersede","realm":"default","old":"a"}` + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "j.jsonl")
			p := open(t, path)
			if _, err := p.Remember(ctx, "default", []sdk.Record{note("first")}); err != nil {
				t.Fatal(err)
			}
			p.Close()
			f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString(line)
			f.Close()
			cfg, _ := json.Marshal(Config{File: path})
			err := New().Configure(ctx, cfg)
			if err == nil || !strings.Contains(err.Error(), "line 2") {
				t.Fatalf("Configure over a corrupt journal: %v; want an error naming line 2", err)
			}
		})
	}
}

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		file string // "" means the config must be refused
	}{
		{`{}`, DefaultFile},
		{`{"file":"x/y.jsonl"}`, "x/y.jsonl"},
		{` {"file":"a"} `, "a"},
		{`{"file":""}`, ""},
		{`{"path":"a"}`, ""},
		{`{"file":1}`, ""},
		{`[]`, ""},
		{`null`, ""},
		{``, ""},
		{`{"file":"a"}{}`, ""},
	} {
		cfg, err := ParseConfig(json.RawMessage(tc.raw))
		switch {
		case tc.file == "" && !errors.Is(err, sdk.ErrInvalid):
			t.Errorf("ParseConfig(%s) = %+v, %v; want sdk.ErrInvalid", tc.raw, cfg, err)
		case tc.file != "" && (err != nil || cfg.File != tc.file):
			t.Errorf("ParseConfig(%s) = %+v, %v; want file %q", tc.raw, cfg, err, tc.file)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{`{}`, `{"file":"a"}`, `{"file":""}`, `[]`, `{"file":"a"}x`, `{"x":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, err := ParseConfig(raw)
		if err == nil && cfg.File == "" {
			t.Fatalf("ParseConfig(%q) accepted an empty file", raw)
		}
		if err != nil && !errors.Is(err, sdk.ErrInvalid) {
			t.Fatalf("ParseConfig(%q): %v does not wrap sdk.ErrInvalid", raw, err)
		}
	})
}

// FuzzReplay: no journal, however damaged, panics the replay, and the
// prefix it accepts replays to the same memory on its own.
func FuzzReplay(f *testing.F) {
	valid := func() []byte {
		var b bytes.Buffer
		for _, e := range []entry{
			{Op: opPut, Realm: "default", Records: []sdk.Record{prepared(f, "one"), prepared(f, "two")}},
			{Op: opForget, Realm: "default", IDs: []string{"one"}},
			{Op: opSupersede, Realm: "default", Old: "two", Records: []sdk.Record{prepared(f, "three")}},
		} {
			line, _ := json.Marshal(e)
			b.Write(append(line, '\n'))
		}
		return b.Bytes()
	}()
	f.Add(valid)
	f.Add(valid[:len(valid)-7])
	f.Add([]byte("{}\n"))
	f.Add([]byte(`{"op":"put","realm":"default","records":[{}]}` + "\n"))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		realms, good, err := replay(bytes.NewReader(data))
		if err != nil {
			return
		}
		if good > int64(len(data)) {
			t.Fatalf("replay accepted %d bytes of %d", good, len(data))
		}
		again, good2, err := replay(bytes.NewReader(data[:good]))
		if err != nil || good2 != good || len(again) != len(realms) {
			t.Fatalf("the accepted prefix does not replay alone: %d bytes, %d realms, %v; want %d, %d", good2, len(again), err, good, len(realms))
		}
		for name, rm := range realms {
			for id, d := range rm.docs {
				if d.rec.ID != id || d.rec.Realm != name {
					t.Fatalf("record %s of realm %s is filed as %s in %s", d.rec.ID, d.rec.Realm, id, name)
				}
			}
		}
	})
}

func prepared(f *testing.F, id string) sdk.Record {
	r := note(id)
	r.ID = id
	if err := r.Prepare("default", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)); err != nil {
		f.Fatal(err)
	}
	return r
}
