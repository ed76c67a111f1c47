package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestDurationOverflowHostile: a count of minutes or hours within the int32
// limit can still overflow a time.Duration; it must be refused as out of
// range, never wrap to another duration (accepted, or reported as "at
// least 1").
func TestDurationOverflowHostile(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"sessions {\n  idle_ttl_minutes = 307445736\n}\n",
			"memhost/memhost.hcl:2,22-31: Invalid value; idle_ttl_minutes is out of range (at most 153722867)."},
		{"sessions {\n  idle_ttl_minutes = 2147483647\n}\n",
			"memhost/memhost.hcl:2,22-32: Invalid value; idle_ttl_minutes is out of range (at most 153722867)."},
		{"trace {\n  retention_hours = 2147483647\n}\n",
			"memhost/memhost.hcl:2,21-31: Invalid value; retention_hours is out of range (at most 2562047)."},
		{"trace {\n  retention_hours = 2562048\n}\n",
			"memhost/memhost.hcl:2,21-28: Invalid value; retention_hours is out of range (at most 2562047)."},
		// Negative counts stay negative, whatever their size.
		{"trace {\n  retention_hours = -2147483648\n}\n",
			"memhost/memhost.hcl:2,21-32: Invalid retention_hours; retention_hours must be at least 1."},
		{"sessions {\n  idle_ttl_minutes = -2147483648\n}\n",
			"memhost/memhost.hcl:2,22-33: Invalid idle_ttl_minutes; idle_ttl_minutes must be at least 1."},
	} {
		_, err := parse(t, tc.src)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q:\n got %v\nwant %s", tc.src, err, tc.want)
		}
		if err != nil && !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("%q: error does not wrap sdk.ErrInvalid", tc.src)
		}
	}
	// The largest values that fit still load, unchanged.
	c := mustParse(t, "sessions {\n  idle_ttl_minutes = 153722867\n}\ntrace {\n  retention_hours = 2562047\n}\n")
	if got := int64(c.Sessions.IdleTTL.Minutes()); got != 153722867 {
		t.Errorf("idle_ttl_minutes: got %d minutes", got)
	}
	if got := int64(c.Trace.Retention.Hours()); got != 2562047 {
		t.Errorf("retention_hours: got %d hours", got)
	}
}

// TestHostKeyEnvHostile: docs/config.md says the host_key_env variable
// "must be set and hold at least 32 bytes"; a short or blank key must be
// refused at its line when the config loads, not only when serve starts,
// and the message must not show the key.
func TestHostKeyEnvHostile(t *testing.T) {
	opts := testOptions(t)
	opts.WorkDir = "/srv"
	env := map[string]string{
		"KEY_SHORT": "tiny-secret",
		"KEY_BLANK": "                                        ",
		"KEY_PAD":   "  0123456789abcdef0123456789abcde  ", // 31 bytes once trimmed, as serve reads it
		"KEY_OK":    "0123456789abcdef0123456789abcdef",
	}
	opts.LookupEnv = func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	for _, tc := range []struct{ name, want string }{
		{"KEY_SHORT", "memhost/memhost.hcl:1,16-27: Host key too short; host_key_env names the environment variable KEY_SHORT, which holds 11 bytes; the host key needs at least 32 (for example `openssl rand -hex 32`)."},
		{"KEY_BLANK", "memhost/memhost.hcl:1,16-27: Host key too short; host_key_env names the environment variable KEY_BLANK, which holds 0 bytes; the host key needs at least 32 (for example `openssl rand -hex 32`)."},
		{"KEY_PAD", "memhost/memhost.hcl:1,16-25: Host key too short; host_key_env names the environment variable KEY_PAD, which holds 31 bytes; the host key needs at least 32 (for example `openssl rand -hex 32`)."},
		{"KEY_OK", ""},
	} {
		_, err := opts.Parse("memhost/memhost.hcl", []byte("host_key_env = \""+tc.name+"\"\n"))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
		if v := strings.TrimSpace(env[tc.name]); v != "" && strings.Contains(got, v) {
			t.Errorf("%s: the error shows the key", tc.name)
		}
	}
}

// TestNestingHostile: a small file of nested brackets must be refused with
// a diagnostic; before, HCL's recursive parser overflowed the goroutine
// stack, a fatal error that no recover catches (so this test crashed the
// whole test binary). A sensible depth still loads.
func TestNestingHostile(t *testing.T) {
	nest := func(n int) string {
		return "provider \"p\" {\n  plugin = \"sqlite\"\n  config = { a = " + strings.Repeat("[", n) + strings.Repeat("]", n) + " }\n}\n"
	}
	for _, src := range []string{nest(300000), nest(maxNesting)} {
		_, err := parse(t, src)
		const want = "memhost/memhost.hcl:3,116-117: Nested too deeply; Blocks, lists and objects may nest at most 100 levels deep."
		if err == nil || err.Error() != want {
			t.Errorf("%d bytes of nesting:\n got %.300v\nwant %s", len(src), err, want)
		}
	}
	// Depth 100 counts the block and the config object: 98 lists fit.
	mustParse(t, nest(maxNesting-2))
	// Brackets inside strings and comments do not count.
	mustParse(t, "# "+strings.Repeat("[", 1000)+"\nprovider \"p\" {\n  plugin = \"sqlite\"\n  config = { a = \""+strings.Repeat("{", 1000)+"\" }\n}\n")
}
