package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
)

const goodManifest = `{"name":"markdown","version":"0.1.0","kinds":["provider"],"protocols":[1],
"executable":"memhost-plugin-markdown","sha256":"` + "9f2c7a6b1d0e4f3a8b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a" + `"}`

// withFields answers goodManifest with the members of edit (a JSON
// object) set over its own.
func withFields(t *testing.T, edit string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(goodManifest), &m); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(edit), &m); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestParseManifest(t *testing.T) {
	cases := []struct {
		name, edit, want string
	}{
		{"valid", `{}`, ""},
		{"escaping executable", `{"executable":"../evil"}`, "plain file name"},
		{"hidden executable", `{"executable":".evil"}`, "plain file name"},
		{"bad version", `{"version":"one"}`, "semantic version"},
		{"only unknown kinds", `{"kinds":["oracle"]}`, `none is a kind this memhost serves`},
		{"unknown format", `{"format":3}`, `format 3 is not one this memhost reads`},
		{"no kinds", `{"kinds":[]}`, "kinds is empty"},
		{"short sha", `{"sha256":"abc"}`, "64 hex digits"},
		{"bad name", `{"name":"a/b"}`, "name"},
		{"mistyped field", `{"protocols":"1"}`, "protocols: must be an array, not a string"},
		// Nothing a refusal repeats may hold a control character.
		{"line break in executable", `{"executable":"x\n[ERROR] forged"}`, "executable holds a control character"},
		{"escape sequence in executable", `{"executable":"x\u001b]52;c;owned\u0007"}`, "executable holds a control character"},
		{"C1 control in executable", `{"executable":"x\u009b2J"}`, "executable holds a control character"},
		{"escape sequence in a kind", `{"kinds":["\u001b[2J"]}`, `kinds ["\x1b[2J"]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := ParseManifest([]byte(withFields(t, c.edit)))
			if c.want == "" {
				if err != nil || m.Name != "markdown" || len(m.Checksum()) != 32 {
					t.Fatalf("ParseManifest = %+v, %v", m, err)
				}
				return
			}
			if err == nil || !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want sdk.ErrInvalid containing %q", err, c.want)
			}
			if strings.ContainsFunc(err.Error(), breaksLine) {
				t.Fatalf("the refusal %q holds a control character", err)
			}
		})
	}
}

// TestParseManifestIsStrictJSON: what the standard decoder would take
// silently is refused (a duplicate member, whose last value would win;
// trailing data; invalid UTF-8), and a member named in another case is
// not the field: it is unknown, so the manifest lacks the real one.
func TestParseManifestIsStrictJSON(t *testing.T) {
	body := goodManifest[:len(goodManifest)-1]
	for _, c := range []struct{ name, data, want string }{
		{"duplicate member", body + `,"executable":"other"}`, "executable: appears more than once"},
		{"duplicate format", `{"format":1,"format":2}`, "format: appears more than once"},
		{"trailing data", goodManifest + ` {}`, "trailing data"},
		{"invalid UTF-8", body + ",\"x\":\"\xff\"}", "not valid UTF-8"},
		{"not an object", `[]`, "must be an object"},
		{"other case", strings.Replace(goodManifest, `"sha256"`, `"SHA256"`, 1), "sha256 must be 64 hex digits"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseManifest([]byte(c.data))
			if !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want sdk.ErrInvalid containing %q", err, c.want)
			}
		})
	}
}

func TestManifestMismatch(t *testing.T) {
	m, err := ParseManifest([]byte(goodManifest))
	if err != nil {
		t.Fatal(err)
	}
	same := sdk.Info{Name: "markdown", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindProvider}, Protocols: []int{1}}
	if d := m.Mismatch(same); d != "" {
		t.Fatalf("Mismatch(same) = %q", d)
	}
	other := sdk.Info{Name: "md", Version: "0.2.0", Kinds: []sdk.PluginKind{sdk.KindProvider, sdk.KindSelector}, Protocols: []int{2}}
	d := m.Mismatch(other)
	for _, want := range []string{"name:", "version:", "kinds:", "protocols:"} {
		if !strings.Contains(d, want) {
			t.Errorf("Mismatch = %q, missing %q", d, want)
		}
	}
	// What the plugin says of itself reaches the refusal escaped.
	hostile := sdk.Info{Name: "md\x1b[2J", Version: "0.1.0\n[ERROR] x", Kinds: []sdk.PluginKind{"provider\x1b]0;owned\x07"}, Protocols: []int{1}}
	if d := m.Mismatch(hostile); strings.ContainsFunc(d, breaksLine) {
		t.Errorf("Mismatch = %q holds the plugin's control characters", d)
	}
	// And bounded: an Info may be as large as a message (megabytes), and
	// the refusal is logged and shown at every restart.
	huge := sdk.Info{Name: strings.Repeat("n", 1<<20), Version: strings.Repeat("v", 1<<20), Kinds: make([]sdk.PluginKind, 1<<18), Protocols: make([]int, 1<<18)}
	if d := m.Mismatch(huge); len(d) > 5*maxValueBytes {
		t.Errorf("Mismatch of an Info of megabytes is %d bytes", len(d))
	}
	if err := CheckInfo(huge); err == nil || len(err.Error()) > 2*maxValueBytes {
		t.Errorf("CheckInfo of an Info of megabytes: %.200v", err)
	}
	huge.Name, huge.Version = "ok", strings.Repeat("v", 1<<20)
	if err := CheckInfo(huge); err == nil || len(err.Error()) > 2*maxValueBytes {
		t.Errorf("CheckInfo of a version of megabytes: %.200v", err)
	}
	huge.Version = "1.0.0"
	if err := CheckInfo(huge); err == nil || len(err.Error()) > 2*maxValueBytes {
		t.Errorf("CheckInfo of protocols of megabytes: %.200v", err)
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(goodManifest))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"name":"x","version":"1.0.0-rc.1+b","kinds":["selector","compactor"],"protocols":[1,2],"executable":"x","sha256":"` + strings.Repeat("a", 64) + `","config_schema":{"type":"object"}}`))
	f.Add([]byte(`{"executable":"..\\x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			if !errors.Is(err, sdk.ErrInvalid) {
				t.Fatalf("error does not wrap sdk.ErrInvalid: %v", err)
			}
			return
		}
		// Whatever parses is safe to use: a plain executable name, a real
		// digest, and it survives a round trip.
		if strings.ContainsAny(m.Executable, `/\`) || strings.HasPrefix(m.Executable, ".") || len(m.Checksum()) != 32 {
			t.Fatalf("unsafe manifest accepted: %+v", m)
		}
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseManifest(again)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", again, err)
		}
		// The round trip keeps every field but the warnings, which are
		// not part of the file; the schema only loses its layout.
		m.Warnings, back.Warnings = nil, nil
		for _, x := range []*Manifest{m, back} {
			if x.ConfigSchema != nil {
				var b bytes.Buffer
				if err := json.Compact(&b, x.ConfigSchema); err != nil {
					t.Fatal(err)
				}
				x.ConfigSchema = b.Bytes()
			}
		}
		if !reflect.DeepEqual(m, back) {
			t.Fatalf("round trip changed the manifest:\n%+v\n%+v", m, back)
		}
	})
}

// TestManifestForwardCompatible: within format 1, a field and a kind a
// newer memhost added are accepted with a warning each; the kinds this
// host knows are still served.
func TestManifestForwardCompatible(t *testing.T) {
	m, err := ParseManifest([]byte(withFields(t, `{"format":1,"kinds":["provider","oracle"],"signature":"abc"}`)))
	if err != nil {
		t.Fatalf("ParseManifest: %v", err)
	}
	if len(m.Warnings) != 2 || !strings.Contains(m.Warnings[0], `"signature"`) || !strings.Contains(m.Warnings[1], `"oracle"`) {
		t.Fatalf("Warnings = %q, want one for the field and one for the kind", m.Warnings)
	}
	if k := m.KnownKinds(); len(k) != 1 || k[0] != sdk.KindProvider {
		t.Fatalf("KnownKinds = %v, want [provider]", k)
	}
}

// TestManifestUnknownFormat: a format this host does not read is refused
// in one line that says what to do.
func TestManifestUnknownFormat(t *testing.T) {
	data := goodManifest[:len(goodManifest)-1] + `,"format":7,"future":{"x":1}}`
	_, err := ParseManifest([]byte(data))
	if !errors.Is(err, ErrManifestFormat) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "format 7") {
		t.Fatalf("err = %v, want one line wrapping ErrManifestFormat naming format 7", err)
	}
}
