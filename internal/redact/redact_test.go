package redact

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMessage(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"plain", "record not found", "record not found"},
		{"unix path", "open /var/lib/memhost/default.db: permission denied", "open …/default.db: permission denied"},
		{"quoted path", `plugin "/opt/memhost/plugins/sqlite/memhost-sqlite" refused`, `plugin "…/memhost-sqlite" refused`},
		{"path at start", "/tmp/x/store.db is locked", "…/store.db is locked"},
		{"path in parentheses", "refused (manifest /etc/memhost/plugins/a/plugin.json)", "refused (manifest …/plugin.json)"},
		{"directory with trailing slash", "plugin directory /srv/plugins/ is empty", "plugin directory …/plugins is empty"},
		{"pid forms", "plugin exited (pid 4242); pid=77 PID: 12", "plugin exited (pid [hidden]); pid=[hidden] PID: [hidden]"},
		{"counts kept", "could not process 3 records", "could not process 3 records"},
		{"windows path", `open C:\ProgramData\memhost\store.db: denied`, `open …/store.db: denied`},
		{"unc path", `open \\fileserver\share\store.db`, `open …/store.db`},
		{"api route kept", "no such endpoint: GET /v1/nope", "no such endpoint: GET /v1/nope"},
		{"url kept", "see https://example.com/docs/x", "see https://example.com/docs/x"},
		{"fraction kept", "batch 3/4 failed", "batch 3/4 failed"},
		{"relative path kept", "plugins/sqlite failed", "plugins/sqlite failed"},
		// A gRPC connection's error names its socket after "->".
		{"socket after an arrow", "read unix @->/tmp/mhsock-1686244708/plugin3549001047: read: connection reset by peer", "read unix @->…/plugin3549001047: read: connection reset by peer"},
		{"escaped path after an arrow", `dial ->\/run\/memhost\/x.sock`, `dial ->…/x.sock`},
		{"windows path after an arrow", `pipe ->C:\memhost\x.sock refused`, `pipe ->…/x.sock refused`},
		// One element shows nothing a redaction would hide, and is often
		// a route or markup quoted in a message.
		{"route kept", "the X-Memhost-Identity header is required on /mcp", "the X-Memhost-Identity header is required on /mcp"},
		{"markup kept", `scope "identity:<i>bob</i>" may hold only`, `scope "identity:<i>bob</i>" may hold only`},
		{"root directory kept", "plugin directory /plugins is empty", "plugin directory /plugins is empty"},
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

// TestForClientShortensALongMessage: a message quoting a request's text
// whole (a 900 KB scope) is answered as its start and its end, within
// maxClientMessage and cut on character boundaries, the explanation at
// its end kept; a short one is answered whole.
func TestForClientShortensALongMessage(t *testing.T) {
	const explains = `" is not identity:<id>, mob:<name>, operator:<name> or realm`
	for _, c := range []struct {
		name  string
		quote string
		whole bool
	}{
		{"short", "identity alice", true},
		{"at the bound", strings.Repeat("a", maxClientMessage-len(`scope: "`)-len(explains)), true},
		{"ascii", strings.Repeat("a", 900<<10), false},
		{"multi-byte at every cut", strings.Repeat("é日🎉", 100<<10), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := `scope: "` + c.quote + explains
			out, _ := ForClient(nil, msg)
			if c.whole {
				if out != msg {
					t.Fatalf("a message within the bound changed: %d bytes to %d", len(msg), len(out))
				}
				return
			}
			if len(out) > maxClientMessage {
				t.Errorf("answered %d bytes, want at most %d", len(out), maxClientMessage)
			}
			if !utf8.ValidString(out) || strings.ContainsRune(out, utf8.RuneError) {
				t.Errorf("a cut split a character: %q", out[len(out)-200:])
			}
			if !strings.HasPrefix(out, `scope: "`) || !strings.HasSuffix(out, explains) || !strings.Contains(out, "bytes left out") {
				t.Errorf("answered %q … %q, want the start, the explanation and what was left out", out[:40], out[len(out)-80:])
			}
		})
	}
}

// TestALongMessageIsRedactedWhereItIsKept: a long message is redacted
// over the parts kept and a margin around each cut, not whole (which cost
// seconds of CPU for a quoted 4 MiB request). A credential or host path
// anywhere in what is kept, the cuts running through it included, is
// still hidden, and a message without any reads as shortening the whole
// redacted text would answer it.
func TestALongMessageIsRedactedWhereItIsKept(t *testing.T) {
	const secret = "hunter2hunter2hunter2"
	filler := strings.Repeat("x ", 300<<10)
	headCut := maxClientMessage - tailBytes - 64
	tailCut := len(filler) - tailBytes
	for _, at := range []int{0, 100, headCut - 200, headCut - 20, headCut - 5, headCut, headCut + 10, tailCut - 30, tailCut - 10, tailCut, tailCut + 5, len(filler) - 40} {
		for _, form := range []string{
			" password=" + secret + " ",
			" Authorization: Bearer " + secret + " ",
			" postgres://memhost:" + secret + "@db/x ",
			" /home/" + secret + "/data/memory.db ",
		} {
			msg := filler[:at] + form + filler[at:]
			out, _ := ForClient(nil, msg)
			if strings.Contains(out, "hunter2") {
				t.Errorf("%q at %d: the answer shows it: …%s…", strings.TrimSpace(form), at, out[max(0, strings.Index(out, "hunter2")-40):min(len(out), strings.Index(out, "hunter2")+40)])
			}
			if len(out) > maxClientMessage {
				t.Errorf("%q at %d: answered %d bytes", strings.TrimSpace(form), at, len(out))
			}
		}
	}
	for _, msg := range []string{filler, strings.Repeat("é日🎉 ", 100<<10), `scope: "` + filler + `" is not a scope`} {
		whole, _ := Message(msg)
		if got, want := shortMessage(msg, maxClientMessage), shorten(whole, maxClientMessage); got != want {
			t.Errorf("a message without secrets: answered %q…%q, want %q…%q", got[:30], got[len(got)-60:], want[:30], want[len(want)-60:])
		}
	}
}

func BenchmarkForClientLong(b *testing.B) {
	msg := `records[0].scope: "identity:` + strings.Repeat(`a\u007f`, 450<<10) + `" is not a scope`
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		ForClient(nil, msg)
	}
}

// TestALongMessageWhoseEndRedactsShort: a long message whose last part
// redacts to less than the tail kept (a long credential or path there)
// is answered with what is left of it, not a panic.
func TestALongMessageWhoseEndRedactsShort(t *testing.T) {
	filler := strings.Repeat("x ", 5<<10)
	for _, end := range []string{
		" password=" + strings.Repeat("a", 1900),
		" /" + strings.Repeat("d/", 950) + "file",
		" Authorization: Bearer " + strings.Repeat("A1", 1000),
	} {
		out, _ := ForClient(nil, filler+end)
		if !strings.Contains(out, "bytes left out") || strings.Contains(out, "aaaa") || strings.Contains(out, "d/d/") || strings.Contains(out, "A1A1") {
			t.Errorf("%.20q…: answered …%s", end, out[max(0, len(out)-200):])
		}
	}
}

// TestALongCredentialAcrossACutIsHidden: a credential longer than the
// margin redacted around a cut (a 2 KB JWT after "Bearer", a URL whose
// userinfo runs past the margin to its "@") is hidden where the cut runs
// through it, as redacting the whole message hides it.
func TestALongCredentialAcrossACutIsHidden(t *testing.T) {
	filler := strings.Repeat("x ", 300<<10)
	headCut := maxClientMessage - tailBytes - 64
	for _, size := range []int{redactMargin + 100, 3 * redactMargin, 8 << 10} {
		secret := strings.Repeat("hunter2", size/7)
		for _, form := range []string{
			" Authorization: Bearer " + secret + " ",
			" password=" + secret + " ",
			" postgres://memhost:" + secret + "@db/x ",
		} {
			// The message's tail cut, with form in it.
			tailCut := len(filler) + len(form) - tailBytes
			for _, at := range []int{headCut - 100, tailCut - len(form)/2, tailCut - len(form) + 30} {
				at = min(at, len(filler))
				msg := filler[:at] + form + filler[at:]
				out, _ := ForClient(nil, msg)
				if i := strings.Index(out, "hunter2"); i >= 0 {
					t.Errorf("%d-byte secret in %.20q at %d: the answer shows it: …%s…", size, form, at, out[max(0, i-40):min(len(out), i+40)])
				}
			}
		}
	}
}
