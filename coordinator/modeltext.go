package coordinator

import (
	"strings"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk"
)

// DefangText prepares text the host hands a model outside the envelope (a
// compaction summary, the MCP index's titles and descriptions): forged
// envelope markers are neutralised exactly as in inbound content, and
// controls other than line feed and tab become U+FFFD as in the envelope
// (a carriage return, or a CR LF pair, one line feed). Such text is not
// XML: it is not escaped, since nothing around it is markup. It answers
// the text and the number of markers neutralised; id names who the hits
// are counted and logged for. Like every defanging it is idempotent, and
// defang_inbound = false turns the marker part off.
func (c *Coordinator) DefangText(id sdk.Identity, s string) (string, int) {
	// Line feeds first, so a header hidden behind a lone CR starts a line
	// when the defanger looks; controls last, since the defanger skips
	// them inside a marker and U+FFFD would hide the marker from it.
	s = normalizeNewlines(s)
	hits := 0
	if c.defang != nil {
		s, hits = c.defang.Defang(s)
		if hits > 0 {
			if id, err := c.identity(id); err == nil {
				c.metrics.Defanged(id.Realm, hits)
				c.defangLog.record(c.logger, c.now(), id, hits)
			}
		}
	}
	return replaceControls(s), hits
}

// normalizeNewlines turns CR LF and lone CR into LF.
func normalizeNewlines(s string) string {
	if strings.IndexByte(s, '\r') < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
}

// replaceControls turns every rune the envelope would not carry (controls
// but LF and tab, invalid bytes, U+FFFE, U+FFFF) into U+FFFD.
func replaceControls(s string) string {
	clean := true
	for _, r := range s {
		if r != '\n' && r != '\t' && notXMLText(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != '\n' && r != '\t' && notXMLText(r) {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
