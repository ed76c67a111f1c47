package redact

import (
	"strconv"
	"strings"
	"testing"
)

// TestMessageHidesSecrets: a plugin's or provider's error may quote the
// URL or header it sent. A credential in it (URL userinfo, a secret query
// parameter, an Authorization header) is the host's, never the client's.
func TestMessageHidesSecrets(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"url userinfo", "dial postgres://memhost:hunter2@db.internal:5432/memhost failed",
			"dial postgres://[hidden]@db.internal:5432/memhost failed"},
		{"url user token", `Get "https://ghp_abc123@github.com/x": EOF`, `Get "https://[hidden]@github.com/x": EOF`},
		{"api_key query", `Get "https://api.example.com/v1/x?api_key=sk-abc123&q=1": EOF`,
			`Get "https://api.example.com/v1/x?api_key=[hidden]&q=1": EOF`},
		{"key query", `Post "https://gen.example.com/v1/models:embed?key=AIzaSyA-12345": timeout`,
			`Post "https://gen.example.com/v1/models:embed?key=[hidden]": timeout`},
		{"token after ampersand", "GET https://h.example/x?a=1&access_token=abc.def.ghi failed", "GET https://h.example/x?a=1&access_token=[hidden] failed"},
		{"dsn password", "cannot connect: host=db user=memhost password=hunter2 dbname=m", "cannot connect: host=db user=memhost password=[hidden] dbname=m"},
		{"prefixed dsn password", "dial: user=m db_password=hunter2", "dial: user=m db_password=[hidden]"},
		{"authorization header", "upstream said: Authorization: Bearer sk-live-0123456789abcdef rejected",
			"upstream said: Authorization: Bearer [hidden] rejected"},
		{"basic credentials", "proxy refused Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==", "proxy refused Authorization: Basic [hidden]"},
		{"bare bearer", "sent bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOjF9.sig", "sent bearer [hidden]"},
		// What a client needs to fix its request stays.
		{"auth advice kept", "an Authorization: Bearer token is required", "an Authorization: Bearer token is required"},
		{"bearer word kept", "the bearer token is not recognised", "the bearer token is not recognised"},
		{"words after basic kept", "basic authentication-required-here is not supported", "basic authentication-required-here is not supported"},
		{"key word kept", "duplicate key in tags; the idempotency key is too long", "duplicate key in tags; the idempotency key is too long"},
		{"url without secrets kept", "see https://example.com/docs/x?page=2", "see https://example.com/docs/x?page=2"},
		{"email kept", "write to ops@example.com", "write to ops@example.com"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := Message(tc.in)
			if got != tc.want || changed != (tc.in != tc.want) {
				t.Fatalf("Message(%q) = %q, %v; want %q", tc.in, got, changed, tc.want)
			}
		})
	}
}

// TestMessageHidesOtherPathForms: host paths written as Go writes them on
// Windows (forward slashes after the drive), inside JSON with escaped
// slashes, or as a SQLite file: URI.
func TestMessageHidesOtherPathForms(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"windows forward slashes", `open C:/Users/bob/memhost/store.db: denied`, `open …/store.db: denied`},
		{"windows mixed", `open D:\data/memhost\store.db`, `open …/store.db`},
		{"json escaped", `provider said {"error":"open \/var\/lib\/memhost\/x.db: denied"}`, `provider said {"error":"open …/x.db: denied"}`},
		{"file uri", "unable to open file:/var/lib/memhost/state.db?mode=rw", "unable to open file:…/state.db?mode=rw"},
		{"ratio kept", "ratio 3:4 and time 10:30", "ratio 3:4 and time 10:30"},
		{"url kept", "see https://example.com/a/b", "see https://example.com/a/b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := Message(tc.in)
			if got != tc.want || changed != (tc.in != tc.want) {
				t.Fatalf("Message(%q) = %q, %v; want %q", tc.in, got, changed, tc.want)
			}
		})
	}
}

// TestMessageInvalidUTF8: bytes that are not UTF-8 around a path or a
// secret do not stop either being hidden, and the rest is kept as sent.
func TestMessageInvalidUTF8(t *testing.T) {
	in := "\xff open /home/bob/\xfe/store.db pid=7 ?api_key=\xffsecret \xc3"
	got, _ := Message(in)
	for _, leak := range []string{"/home/bob", "=7", "secret"} {
		if strings.Contains(got, leak) {
			t.Fatalf("Message(%q) = %q, still holds %q", in, got, leak)
		}
	}
	if !strings.HasPrefix(got, "\xff open ") || !strings.HasSuffix(got, " \xc3") {
		t.Fatalf("Message(%q) = %q, lost the text around", in, got)
	}
}

// BenchmarkMessageLong: a long message costs time linear in its length.
func BenchmarkMessageLong(b *testing.B) {
	for _, n := range []int{1 << 10, 1 << 14, 1 << 18} {
		msg := strings.Repeat("open /var/lib/x.db pid 3 https://u:p@h/?key=v Bearer "+strings.Repeat("a", 20)+" ", n/80)
		b.Run(strconv.Itoa(len(msg)), func(b *testing.B) {
			b.SetBytes(int64(len(msg)))
			for b.Loop() {
				Message(msg)
			}
		})
	}
}
