// Package redact takes host details out of text bound for a client.
// Errors from plugins, providers and the plugin host name files and
// processes of the machine the host runs on, which a client has no
// business learning (DESIGN 9); the HTTP API and the MCP tools pass every
// error message through Message, and the log keeps the full text.
package redact

import (
	"regexp"
	"strings"
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
