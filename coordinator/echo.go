package coordinator

import (
	"strings"

	"github.com/memhost/memhost/sdk"
)

// MCPRecallSession is the session whose nonce MCP memory_recall renders
// its envelope with: a recall through MCP belongs to no agent session of
// the turn API. StripInjected tries it for every session, since an MCP
// agent's transcript holds those tool results.
const MCPRecallSession = "mcp"

// StripInjected answers s without the memory envelopes this host rendered
// for the identity in session, outside any session, or for MCP recall
// (MCPRecallSession): the header line with one of those nonces, the
// preamble and the observations that follow it. Injected context is never
// compacted back in (DESIGN 5.1), so a runtime that evicts an injected
// body with the messages around it does not get its memory summarised or
// archived a second time. Only the genuine header (its nonce is secret to
// this host and the runtime) is recognised; a forged one is left for the
// defanger.
func (c *Coordinator) StripInjected(id sdk.Identity, session, s string) string {
	id, err := c.identity(id)
	if err != nil || !strings.Contains(s, tokenLabel) {
		return s
	}
	sessions := []string{"", MCPRecallSession}
	if session != "" && session != MCPRecallSession {
		sessions = append(sessions, session)
	}
	// Line breaks are normalised as the envelope wrote them, but only a
	// text that held an envelope comes back changed.
	norm := normalizeNewlines(s)
	text := norm
	for _, sess := range sessions {
		header := c.env.Header(id, DeriveNonce(c.hostKey, SessionKey{Realm: id.Realm, Identity: id.ID, Session: sess}))
		text = stripEnvelopes(text, header)
	}
	if text == norm {
		return s
	}
	return text
}

// stripEnvelopes removes every header and the observations right after it.
// An observation's body is escaped, so its closing tag cannot occur inside
// it. The envelope's lines after the header's first may all be indented
// alike: a client echoes an envelope inside a tool result or another
// non-text block, which the compaction API flattens to one quoted run with
// its further lines indented.
func stripEnvelopes(s, header string) string {
	const open, closing = "<" + tagName + " ", "</" + tagName + ">"
	first, rest, _ := strings.Cut(header, "\n")
	for from := 0; ; {
		at := strings.Index(s[from:], first+"\n")
		if at < 0 {
			return s
		}
		at += from
		end := at + len(first)
		nl := "\n" + s[end+1:end+1+indentOf(s[end+1:])]
		if !strings.HasPrefix(s[end:], nl+strings.ReplaceAll(rest, "\n", nl)) {
			from = end // not this host's envelope as it wrote it: left for the defanger
			continue
		}
		end += len(nl) + len(strings.ReplaceAll(rest, "\n", nl))
		end -= len(nl) // the preamble's last line break is the one before its first observation
		for strings.HasPrefix(s[end:], nl+open) {
			end += len(nl)
			n := strings.Index(s[end:], closing)
			if n < 0 {
				end = len(s) // cut short by the runtime: the rest is the envelope's
				break
			}
			end += n + len(closing)
		}
		end += len(s[end:]) - len(strings.TrimPrefix(s[end:], nl))
		s = s[:at] + s[end:]
		from = at
	}
}

// indentOf answers the spaces s starts with.
func indentOf(s string) int {
	return len(s) - len(strings.TrimLeft(s, " "))
}
