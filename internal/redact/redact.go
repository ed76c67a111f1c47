// Package redact takes host details out of text bound for a client.
// Errors from plugins, providers and the plugin host name files and
// processes of the machine the host runs on, which a client has no
// business learning (DESIGN 9); the HTTP API and the MCP tools pass every
// error message through ForClient, and the log keeps the full text.
package redact

import (
	"regexp"
	"strings"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/sdk"
)

var (
	// pidPattern is a process id as Go, go-plugin and hclog write it:
	// "pid 123", "pid=123", "pid: 123". A bare "process 3" is left alone:
	// it is more often a count than a pid.
	pidPattern = regexp.MustCompile(`(?i)\b(pid)(\s*[=:]\s*|\s+)\d+`)
	// unixPath is an absolute path after a start or a delimiter; "//"
	// (a URL's authority) is not one.
	unixPath = regexp.MustCompile(`(^|[\s"'(\[{=,<])(/[^\s"'()\[\]{},;:<>]+)`)
	// windowsPath is a drive-letter or UNC path.
	windowsPath = regexp.MustCompile(`(?i)(^|[\s"'(\[{=,<])((?:[a-z]:\\|\\\\)[^\s"'()\[\]{},;<>]*)`)
)

// apiPathPrefix marks the host's own routes, which a message may name.
const apiPathPrefix = "/v1/"

// ForClient answers an error message as a client may read it: without
// host paths or pids (Message), and rendered by the coordinator's rules for
// model-bound text (coordinator.TextError; c nil skips this), since a
// message may quote the client's own text (a scope, an id, a path) and a
// model reads the answer: a forged marker quoted in it comes back
// neutralised. It reports whether the message changed.
func ForClient(c *coordinator.Coordinator, msg string) (string, bool) {
	out, _ := Message(msg)
	if c != nil {
		out = c.RenderText(sdk.Identity{}, out, coordinator.TextError)
	}
	return out, out != msg
}

// Message answers msg without absolute paths (each keeps only its last
// element, after "…/") or process ids, and whether it changed.
func Message(msg string) (string, bool) {
	out := pidPattern.ReplaceAllString(msg, "$1$2[hidden]")
	out = replacePaths(unixPath, out, "/")
	out = replacePaths(windowsPath, out, `\`)
	return out, out != msg
}

// replacePaths shortens each match of re, whose first group is the
// delimiter before the path and whose second is the path.
func replacePaths(re *regexp.Regexp, s, sep string) string {
	return re.ReplaceAllStringFunc(s, func(m string) string {
		g := re.FindStringSubmatch(m)
		lead, path := g[1], m[len(g[1]):]
		if strings.HasPrefix(path, "//") || strings.HasPrefix(path, apiPathPrefix) {
			return m
		}
		return lead + shortPath(path, sep)
	})
}

// shortPath is the last element of path behind "…/".
func shortPath(path, sep string) string {
	path = strings.TrimRight(path, sep)
	if k := strings.LastIndex(path, sep); k >= 0 {
		path = path[k+len(sep):]
	}
	return "…/" + path
}
