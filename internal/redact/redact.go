// Package redact takes host details out of text bound for a client.
// Errors from plugins, providers and the plugin host name files and
// processes of the machine the host runs on, and may quote the URL or
// header they sent with its credentials, which a client has no business
// learning (DESIGN 9); the HTTP API and the MCP tools pass every
// error message through ForClient, and the log keeps the full text.
package redact

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/sdk"
)

var (
	// pidPattern is a process id as Go, go-plugin and hclog write it:
	// "pid 123", "pid=123", "pid: 123". A bare "process 3" is left alone:
	// it is more often a count than a pid.
	pidPattern = regexp.MustCompile(`(?i)\b(pid)(\s*[=:]\s*|\s+)\d+`)
	// unixPath is an absolute path after a start or a delimiter (":" for
	// a file: URI); "//" (a URL's authority) is not one.
	unixPath = regexp.MustCompile(`(^|[\s"'(\[{=,<>:])(/[^\s"'()\[\]{},;:<>]+)`)
	// jsonPath is an absolute path with its slashes escaped, as some
	// JSON encoders write it ("\/var\/lib").
	jsonPath = regexp.MustCompile(`(^|[\s"'(\[{=,<>:])(\\/[^\s"'()\[\]{},;:<>]+)`)
	// windowsPath is a drive-letter path (either slash after the drive,
	// as Go writes them too) or a UNC path.
	windowsPath = regexp.MustCompile(`(?i)(^|[\s"'(\[{=,<>])((?:[a-z]:[\\/]|\\\\)[^\s"'()\[\]{},;<>]*)`)

	// urlUserinfo is the credentials of a URL ("scheme://user:pass@").
	urlUserinfo = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#@"'<>]+@`)
	// queryCredential is a URL query parameter whose name says it carries
	// a credential (?key=, &access_token=, ?sig=).
	queryCredential = regexp.MustCompile(`(?i)([?&][a-z0-9_.-]*(?:key|token|secret|passw|pwd|sig|auth|credential)[a-z0-9_.-]*=)[^&#\s"'<>]+`)
	// fieldCredential is a name=value pair anywhere (a connection
	// string's password=) whose name ends as a secret's (db_password=).
	fieldCredential = regexp.MustCompile(`(?i)((?:password|passwd|secret|api[_-]?key|apikey|access[_-]?token|auth[_-]?token)=)[^\s&#"'<>,;]+`)
	// authCredential is an HTTP credential: after a scheme (Bearer,
	// Basic) or an Authorization or API key header. It must be at least
	// 16 bytes long, as the host's own tokens are, and not words (lower
	// case letters and hyphens), so advice such as "an Authorization:
	// Bearer token is required" is kept.
	authCredential = regexp.MustCompile(`(?i)(\b(?:bearer|basic)\s+|\b(?:proxy-)?(?:authorization|x-api-key|api-key)\s*[:=]\s*)([a-z0-9._~+/=-]{16,})`)
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
	out := shortMessage(msg, maxClientMessage)
	if c != nil {
		out = c.RenderText(sdk.Identity{}, out, coordinator.TextError)
	}
	return out, out != msg
}

// ClientText answers msg, a text of the client's own (the path of its
// request), rendered as ForClient renders a message but not shortened as
// a host's path: "/api/v1/records" read as "…/records" would hide the
// very part the client got wrong.
func ClientText(c *coordinator.Coordinator, msg string) string {
	if c == nil {
		return msg
	}
	return c.RenderText(sdk.Identity{}, msg, coordinator.TextError)
}

// Message answers msg without credentials (each replaced by "[hidden]"),
// absolute paths (each keeps only its last element, after "…/") or
// process ids, and whether it changed.
func Message(msg string) (string, bool) {
	out := urlUserinfo.ReplaceAllString(msg, "$1[hidden]@")
	out = queryCredential.ReplaceAllString(out, "$1[hidden]")
	out = fieldCredential.ReplaceAllString(out, "$1[hidden]")
	out = authCredential.ReplaceAllStringFunc(out, func(m string) string {
		g := authCredential.FindStringSubmatch(m)
		if strings.Trim(g[2], "abcdefghijklmnopqrstuvwxyz-") == "" {
			return m
		}
		return g[1] + "[hidden]"
	})
	out = pidPattern.ReplaceAllString(out, "$1$2[hidden]")
	out = replacePaths(windowsPath, out, `\/`)
	out = replacePaths(unixPath, out, "/")
	out = replacePaths(jsonPath, out, `\/`)
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
		// A path of one element (/mcp, the /i of <i>x</i>) shows no more
		// than its redaction would, and is often no path at all.
		if len(strings.FieldsFunc(path, func(r rune) bool { return strings.ContainsRune(sep, r) })) <= 1 {
			return m
		}
		return lead + shortPath(path, sep)
	})
}

// shortPath is the last element of path behind "…/"; any byte of seps
// separates elements.
func shortPath(path, seps string) string {
	path = strings.TrimRight(path, seps)
	if k := strings.LastIndexAny(path, seps); k >= 0 {
		path = path[k+1:]
	}
	return "…/" + path
}

// maxClientMessage bounds an error message answered to a client, and
// tailBytes the part of its end kept past the cut: a message may quote the
// request's text whole (a scope of 900 KB came back in a 900 KB error, and
// escaping grows it further), while what the message explains follows the
// quote.
const (
	maxClientMessage = 4 << 10
	tailBytes        = 1 << 10
)

// maxLogMessage bounds an error's text in a log line: the same quote of
// the request's text would otherwise put up to the body limit (4 MiB) in
// one line for each request a client sends.
const maxLogMessage = 16 << 10

// ForLog answers msg as a log line carries it: whole, paths, pids and
// all (the operator's to read), when within maxLogMessage, else its start
// and its end as ForClient shortens a message.
func ForLog(msg string) string {
	return shorten(msg, maxLogMessage)
}

// redactMargin is the text beyond each kept part that shortMessage
// redacts with it, so a credential or path the cut runs through is still
// recognised by what precedes or follows it.
const redactMargin = 1 << 10

// maxWord bounds how far shortMessage follows a word (a run without white
// space, as every credential and path the patterns hide is) through a
// margin's edge: a word is read whole up to this, so a credential longer
// than the margin that a cut runs through is still recognised (a 2 KB
// token after "Bearer", a URL's userinfo up to its "@"). 16 KiB is
// twice the header size most HTTP servers take; a longer word costs its
// bytes in the patterns (a message of one 3 MB word: 20 ms).
const maxWord = 16 << 10

// shortMessage answers Message(msg) shortened to limit, running the
// patterns over the parts kept and a margin around each cut rather than
// the whole text: a message may quote a 4 MiB request, and the patterns
// over all of it cost seconds of CPU per request (2.7 s for 3 MB,
// BenchmarkForClientLong), which a client could send at will. A margin
// ends beyond the word at its edge, so the patterns see a credential
// the cut runs through with what names it.
func shortMessage(msg string, limit int) string {
	if len(msg) <= limit+2*redactMargin {
		out, _ := Message(msg)
		return shorten(out, limit)
	}
	headPart, _ := Message(sdk.CutText(msg, wordEnd(msg, limit+redactMargin)))
	head := sdk.CutText(headPart, headBytes(limit))
	tailCut := runeStartAt(msg, len(msg)-tailBytes)
	tailStart := runeStartAt(msg, max(wordStart(msg, tailCut)-redactMargin, 0))
	tailPart, _ := Message(msg[tailStart:])
	// The redacted part may be shorter than the tail kept (a long
	// credential or path there hidden): then it is kept whole.
	tail := tailPart[runeStartAt(tailPart, max(len(tailPart)-tailBytes, 0)):]
	// What is left out is counted in msg, as shorten counts it.
	return joinCut(head, tailCut-len(sdk.CutText(msg, headBytes(limit))), tail)
}

// wordEnd answers the end of the word at i in s (the first white space
// from i), at most maxWord past i.
func wordEnd(s string, i int) int {
	end := min(len(s), i+maxWord)
	for j := i; j < end; j++ {
		if isSpace(s[j]) {
			return j
		}
	}
	return end
}

// wordStart answers the start of the word before i in s (just past the
// last white space before i), at most maxWord before i.
func wordStart(s string, i int) int {
	stop := max(i-maxWord, 0)
	for j := i; j > stop; j-- {
		if isSpace(s[j-1]) {
			return j
		}
	}
	return stop
}

// isSpace reports whether c is white space as the patterns' \s is.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

// runeStartAt answers i, or the first character start after it.
func runeStartAt(s string, i int) int {
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}

// shorten answers msg whole when it is within limit, else its start and
// its last tailBytes (both cut on character boundaries) with the number
// of bytes left out between them.
func shorten(msg string, limit int) string {
	if len(msg) <= limit {
		return msg
	}
	tail := runeStartAt(msg, len(msg)-tailBytes)
	head := sdk.CutText(msg, headBytes(limit))
	return joinCut(head, tail-len(head), msg[tail:])
}

// headBytes is the most of a message's start kept within limit, beside
// its tail and the count between them.
func headBytes(limit int) int { return limit - tailBytes - 64 }

// joinCut writes a shortened message: its start, the bytes left out, its
// end.
func joinCut(head string, left int, tail string) string {
	return fmt.Sprintf("%s … (%d bytes left out) … %s", head, left, tail)
}
