package coordinator

import (
	"strings"
	"testing"
)

// TestStripInjected: the envelopes this host injected for the identity,
// in the named session or outside any, are cut out of a text with the
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
	cases := []struct {
		name, in, want string
	}{
		{"alone", inS1, ""},
		{"between text", "before\n" + inS1 + "after", "before\nafter"},
		{"two envelopes", inS1 + "mid\n" + noSession, "mid\n"},
		{"outside any session", "a " + noSession, "a "},
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
	if got := f.c.StripInjected(bob, "s1", inS1); got != inS1 {
		t.Errorf("another identity's strip removed alice's envelope: %q", got)
	}
}
