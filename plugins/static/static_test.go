package static

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
)

const goodFile = `{"realms": {
  "default": {"mobs": {"alice": ["team-a", "oncall", "team-a"]}, "operators": {"alice": "carol", "bob": ""}},
  "acme":    {"mobs": {"alice": ["acme-ops"]}}
}}`

func configured(t *testing.T, content string) (*Resolver, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bindings.json")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	r := New()
	cfg, _ := json.Marshal(Config{File: path})
	if err := r.Configure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	return r, path
}

func TestResolve(t *testing.T) {
	r, _ := configured(t, goodFile)
	tests := []struct {
		id       sdk.Identity
		mobs     []string
		operator string
	}{
		{sdk.Identity{Realm: "default", ID: "alice"}, []string{"team-a", "oncall"}, "carol"},
		{sdk.Identity{Realm: "default", ID: "bob"}, []string{}, ""},
		{sdk.Identity{Realm: "acme", ID: "alice"}, []string{"acme-ops"}, ""}, // realms never mix
		{sdk.Identity{Realm: "nowhere", ID: "alice"}, []string{}, ""},
	}
	for _, tt := range tests {
		mobs, err := r.ResolveMobs(context.Background(), tt.id)
		if err != nil || !slices.Equal(mobs, tt.mobs) {
			t.Errorf("ResolveMobs(%v) = %v, %v; want %v", tt.id, mobs, err, tt.mobs)
		}
		op, err := r.ResolveOperator(context.Background(), tt.id)
		if err != nil || op != tt.operator {
			t.Errorf("ResolveOperator(%v) = %q, %v; want %q", tt.id, op, err, tt.operator)
		}
	}
}

func TestEditTakesEffectAndMalformedKeepsLastGood(t *testing.T) {
	r, path := configured(t, goodFile)
	alice := sdk.Identity{Realm: "default", ID: "alice"}
	steps := []struct {
		write string
		want  []string
	}{
		{`{"realms": {"default": {"mobs": {"alice": ["team-b"]}}}}`, []string{"team-b"}},
		{`{"realms": {"default": {"mobs": {"alice": ["team-b"]`, []string{"team-b"}},       // truncated
		{`{"realms": {"default": {"mobs": {"alice": ["bad name"]}}}}`, []string{"team-b"}}, // bad mob
		{`{"realms": {"default": {"mobs": {"alice": ["team-c", "team-d"]}}}}`, []string{"team-c", "team-d"}},
	}
	for i, st := range steps {
		// Write a new file and rename it over the old one, as editors do.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(st.write), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		mobs, err := r.ResolveMobs(context.Background(), alice)
		if err != nil || !slices.Equal(mobs, st.want) {
			t.Errorf("step %d: ResolveMobs = %v, %v; want %v", i, mobs, err, st.want)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if mobs, err := r.ResolveMobs(context.Background(), alice); err != nil || !slices.Equal(mobs, []string{"team-c", "team-d"}) {
		t.Errorf("file removed: ResolveMobs = %v, %v; want the last good bindings", mobs, err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ data, want string }{
		{``, "empty"},
		{`{"realms": {"default": {"mobs": {"alice": "team-a"}}}}`, "line 1"},
		{"{\n\"realms\": {\n\"default\": {\"mobz\": {}}}}", "unknown field"},
		{`{"realms": {"bad realm": {}}}`, "realms.bad realm"},
		{`{"realms": {"default": {"mobs": {"bad id": ["x"]}}}}`, "realms.default.mobs.bad id"},
		{`{"realms": {"default": {"mobs": {"alice": [""]}}}}`, "realms.default.mobs.alice[0]"},
		{`{"realms": {"default": {"operators": {"alice": "no good"}}}}`, "realms.default.operators.alice"},
		{"{\n\"realms\": {\n}\n,}", "line 4"},
		{`{"realms": {}} {}`, "trailing"},
		{"{\n\"realms\": {},\n\"realms\": {}}", "line 3: realms: appears more than once"},
		{`{"realms": {"default": {"mobs": {}, "mobs": {"alice": ["x"]}}}}`, "realms.default.mobs: appears more than once"},
		{`{"Realms": {}}`, "Realms: unknown field"},
		{"{\"realms\": {\"default\": {\"mobs\": {\"alice\": [\"\xff\"]}}}}", "not valid UTF-8"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.data))
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v; want ErrMalformed mentioning %q", tt.data, err, tt.want)
		}
	}
}

func TestConfigure(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"realms": [}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []string{`{}`, `{"file":""}`, `{"file":"` + bad + `"}`, `{"path":"x"}`, `"x"`} {
		if err := New().Configure(context.Background(), json.RawMessage(cfg)); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("Configure(%s) = %v, want ErrInvalid", cfg, err)
		}
	}
}

func TestMissingFileMeansNoBindingsUntilWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bindings.json")
	r := New()
	cfg, _ := json.Marshal(Config{File: path})
	if err := r.Configure(context.Background(), cfg); err != nil {
		t.Fatalf("Configure with a file not written yet: %v", err)
	}
	alice := sdk.Identity{Realm: "default", ID: "alice"}
	if mobs, err := r.ResolveMobs(context.Background(), alice); err != nil || len(mobs) != 0 {
		t.Fatalf("before the file exists: %v, %v; want no mobs", mobs, err)
	}
	if err := os.WriteFile(path, []byte(goodFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if mobs, err := r.ResolveMobs(context.Background(), alice); err != nil || !slices.Equal(mobs, []string{"team-a", "oncall"}) {
		t.Fatalf("after the file is written: %v, %v", mobs, err)
	}
}

func TestResolveBadInput(t *testing.T) {
	r, _ := configured(t, goodFile)
	for _, id := range []sdk.Identity{{Realm: "", ID: "alice"}, {Realm: "default", ID: ""}, {Realm: "default", ID: "a b"}} {
		if _, err := r.ResolveMobs(context.Background(), id); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("ResolveMobs(%v) = %v, want ErrInvalid", id, err)
		}
		if _, err := r.ResolveOperator(context.Background(), id); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("ResolveOperator(%v) = %v, want ErrInvalid", id, err)
		}
	}
	if _, err := New().ResolveMobs(context.Background(), sdk.Identity{Realm: "default", ID: "alice"}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Errorf("unconfigured ResolveMobs = %v, want ErrUnavailable", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(goodFile))
	f.Add([]byte(`{"realms": {"default": {"mobs": {"alice": ["a"]}}}}`))
	f.Add([]byte(`{"realms": [`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		for realm, rb := range b.Realms {
			for id, mobs := range rb.Mobs {
				if (sdk.Identity{Realm: realm, ID: id}).Validate() != nil {
					t.Fatalf("accepted unusable identity %s/%q", realm, id)
				}
				for i, m := range mobs {
					if sdk.MobScope(m).Validate() != nil || slices.Contains(mobs[:i], m) {
						t.Fatalf("accepted unusable or repeated mob %q for %s/%s", m, realm, id)
					}
				}
			}
			for id, op := range rb.Operators {
				if (sdk.Identity{Realm: realm, ID: id}).Validate() != nil || op != "" && sdk.OperatorScope(op).Validate() != nil {
					t.Fatalf("accepted unusable operator %q for %s/%q", op, realm, id)
				}
			}
		}
		// What was accepted, written out, reads back the same.
		out, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("accepted %q, written as %s, is refused: %v", data, out, err)
		}
		if back, _ := json.Marshal(again); string(back) != string(out) {
			t.Fatalf("accepted %q, written as %s, reads back as %s", data, out, back)
		}
	})
}
