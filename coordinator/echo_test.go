package coordinator

import (
	"context"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestStripInjected: the envelopes this host injected for the identity,
// in the named session, outside any, or as an MCP memory_recall result
// (which an MCP agent's transcript holds as a tool result), are cut out of a text with the
// observations they carry; the text around them stays, and an envelope
// whose nonce is not the session's (forged, or another session's) is not
// recognised.
func TestStripInjected(t *testing.T) {
	f := newFixture(t, nil)
	f.add(rec("Coffee order", "Alice drinks flat whites\n</not a tag>", "drinks"))
	inS1 := f.turn(alice, "s1", "what coffee should I order").InjectedContext[0]
	noSession := f.turn(alice, "", "what coffee should I order").InjectedContext[0]
	inS2 := f.turn(alice, "s2", "what coffee should I order").InjectedContext[0]
	forged := strings.Replace(inS1, "[mem-token: ", "[mem-token: 0", 1)
	hits, err := f.c.Recall(context.Background(), alice, "coffee order", 5)
	if err != nil || len(hits) == 0 {
		t.Fatalf("recall: %v, %d hits", err, len(hits))
	}
	// As internal/mcpserver's memory_recall renders it.
	mcp, err := f.c.RenderEnvelope(context.Background(), alice, MCPRecallSession, []sdk.Record{hits[0].Record}, 0)
	if err != nil || mcp.Text == "" {
		t.Fatalf("render: %v", err)
	}
	cases := []struct {
		name, in, want string
	}{
		{"alone", inS1, ""},
		{"between text", "before\n" + inS1 + "after", "before\nafter"},
		{"two envelopes", inS1 + "mid\n" + noSession, "mid\n"},
		{"outside any session", "a " + noSession, "a "},
		{"MCP memory_recall result", "[tool result] " + mcp.Text, "[tool result] "},
		// As the compaction API flattens a tool result: one quoted run,
		// its further lines indented (twice when nested).
		{"indented in a tool result", "[tool result] " + indented(inS1, "  ") + "\n  more", "[tool result] more"},
		{"indented twice", "[tool result] [document] " + indented(mcp.Text, "    "), "[tool result] [document] "},
		{"indented, another session's", "[tool result] " + indented(inS2, "  "), "[tool result] " + indented(inS2, "  ")},
		{"cut short by the runtime", "a " + inS1[:len(inS1)-20], "a "},
		{"CR LF line breaks", "x\r\n" + strings.ReplaceAll(inS1, "\n", "\r\n"), "x\n"},
		{"another session's", inS2, inS2},
		{"forged nonce", forged, forged},
		{"no envelope", "hello [mem-token: x]", "hello [mem-token: x]"},
		{"no envelope, CR LF kept", "a\r\nb [mem-token: x]", "a\r\nb [mem-token: x]"},
	}
	for _, c := range cases {
		if got := f.c.StripInjected(alice, "s1", c.in); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	// Stripped, nothing of this host's own envelope is left for the
	// defanger to count and log as a forgery before compaction.
	for _, session := range []string{"", "s1", MCPRecallSession} {
		stripped := f.c.StripInjected(alice, session, "[tool result] "+mcp.Text)
		if out := f.c.RenderText(alice, stripped, TextSummary); strings.Contains(out, "defanged") {
			t.Errorf("session %q: the MCP recall envelope was defanged as a forgery: %q", session, out)
		}
	}
	if got := f.c.StripInjected(bob, "s1", inS1); got != inS1 {
		t.Errorf("another identity's strip removed alice's envelope: %q", got)
	}
}

// indented is s as a quoted block holds it: trailing line breaks trimmed,
// every further line starting with indent.
func indented(s, indent string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n"+indent)
}
