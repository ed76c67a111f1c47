package redact

import "testing"

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
