package sdk

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const goodManifest = `{"name":"markdown","version":"0.1.0","kinds":["provider"],"protocols":[1],
"executable":"memhost-plugin-markdown","sha256":"` + "9f2c7a6b1d0e4f3a8b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a" + `"}`

func TestParseManifest(t *testing.T) {
	cases := []struct {
		name, edit, want string
	}{
		{"valid", "", ""},
		{"unknown field", `"sha265":"x",`, `unknown field "sha265"`},
		{"escaping executable", `"executable":"../evil",`, "plain file name"},
		{"hidden executable", `"executable":".evil",`, "plain file name"},
		{"bad version", `"version":"one",`, "semantic version"},
		{"unknown kind", `"kinds":["oracle"],`, `unknown kind "oracle"`},
		{"no kinds", `"kinds":[],`, "kinds is empty"},
		{"short sha", `"sha256":"abc",`, "64 hex digits"},
		{"bad name", `"name":"a/b",`, "name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A later duplicate key wins in encoding/json: append the edit.
			data := goodManifest
			if c.edit != "" {
				data = goodManifest[:len(goodManifest)-1] + "," + strings.TrimSuffix(c.edit, ",") + "}"
			}
			m, err := ParseManifest([]byte(data))
			if c.want == "" {
				if err != nil || m.Name != "markdown" || len(m.Checksum()) != 32 {
					t.Fatalf("ParseManifest = %+v, %v", m, err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrInvalid containing %q", err, c.want)
			}
		})
	}
}

func TestManifestMismatch(t *testing.T) {
	m, err := ParseManifest([]byte(goodManifest))
	if err != nil {
		t.Fatal(err)
	}
	same := Info{Name: "markdown", Version: "0.1.0", Kinds: []PluginKind{KindProvider}, Protocols: []int{1}}
	if d := m.Mismatch(same); d != "" {
		t.Fatalf("Mismatch(same) = %q", d)
	}
	other := Info{Name: "md", Version: "0.2.0", Kinds: []PluginKind{KindProvider, KindSelector}, Protocols: []int{2}}
	d := m.Mismatch(other)
	for _, want := range []string{"name:", "version:", "kinds:", "protocols:"} {
		if !strings.Contains(d, want) {
			t.Errorf("Mismatch = %q, missing %q", d, want)
		}
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
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
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
		if _, err := ParseManifest(again); err != nil {
			t.Fatalf("re-parse of %s: %v", again, err)
		}
	})
}
