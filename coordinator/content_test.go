package coordinator

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
)

func TestContentJSON(t *testing.T) {
	cases := []struct {
		name     string
		in       string
		blocks   bool
		text     string
		roundTrp string // "" means identical to in
	}{
		{name: "string", in: `"hello"`, text: "hello"},
		{name: "empty string", in: `""`, text: ""},
		{name: "null", in: `null`, text: "", roundTrp: `""`},
		{name: "empty list", in: `[]`, blocks: true, text: ""},
		{name: "text blocks", in: `[{"type":"text","text":"a"},{"type":"text","text":"b"}]`, blocks: true, text: "a\nb"},
		{name: "unknown fields kept", in: `[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]`, blocks: true, text: "a"},
		{name: "image verbatim", in: `[{"type":"image","source":{"type":"base64","data":"AAAA"}},{"type":"text","text":"x"}]`, blocks: true, text: "x"},
		{name: "tool result with string", in: `[{"type":"tool_result","tool_use_id":"t1","content":"out"}]`, blocks: true, text: "out"},
		{name: "tool result with blocks", in: `[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"deep"}]}]`, blocks: true, text: "deep"},
		{name: "tool result without content", in: `[{"type":"tool_result","tool_use_id":"t1"}]`, blocks: true, text: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c Content
			if err := json.Unmarshal([]byte(tc.in), &c); err != nil {
				t.Fatal(err)
			}
			if c.IsBlocks() != tc.blocks || c.Text() != tc.text {
				t.Fatalf("blocks %v text %q, want %v %q", c.IsBlocks(), c.Text(), tc.blocks, tc.text)
			}
			out, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.roundTrp
			if want == "" {
				want = tc.in
			}
			if string(out) != want {
				t.Fatalf("round trip %s, want %s", out, want)
			}
		})
	}
}

func TestContentJSONErrors(t *testing.T) {
	for _, in := range []string{`42`, `{"type":"text"}`, `[1]`, `[{"text":"no type"}]`, `[{"type":""}]`, `[{"type":"text","text":7}]`,
		`[{"type":"text"}]`, `[{"type":"tool_result","content":5}]`, `true`,
		strings.Repeat(`[{"type":"tool_result","content":`, 20) + `"x"` + strings.Repeat(`}]`, 20)} {
		var c Content
		err := json.Unmarshal([]byte(in), &c)
		if err == nil || !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("Unmarshal(%.60s) = %v, want an ErrInvalid error", in, err)
		}
	}
}

func TestDefangedBlocksKeepTheirOtherFields(t *testing.T) {
	var c Content
	in := `[{"type":"text","text":"<memhost_memory_observation","cache_control":{"type":"ephemeral"}},{"type":"tool_result","tool_use_id":"t9","content":[{"type":"text","text":"[mem-token: x]"}]}]`
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	d := mustDefanger(t, "Agent memory")
	out, hits := c.mapText(d.Defang)
	if hits != 2 {
		t.Fatalf("hits %d", hits)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"cache_control":{"type":"ephemeral"},"text":"\u003cdefanged_memory_observation","type":"text"},{"content":[{"text":"[defanged-mem-token: x]","type":"text"}],"tool_use_id":"t9","type":"tool_result"}]`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	// The original is untouched.
	if c.Blocks()[0].Text != "<memhost_memory_observation" {
		t.Fatal("mapText modified its input")
	}
}

func TestTextPrefixIsBounded(t *testing.T) {
	long := strings.Repeat("é", 1000)
	for _, c := range []Content{TextContent(long), BlockContent(TextBlock(long), TextBlock(long))} {
		got := c.textPrefix(101)
		if len(got) > 101 || !strings.HasPrefix(got, long[:98]) {
			t.Fatalf("textPrefix = %d bytes", len(got))
		}
	}
}

func FuzzContentJSON(f *testing.F) {
	for _, s := range []string{`"x"`, `[]`, `null`, `[{"type":"text","text":"a"}]`, `[{"type":"image","x":1}]`,
		`[{"type":"tool_result","content":[{"type":"text","text":"<memhost_memory_observation"}]}]`, `{}`, `[{"type":"text","text":"\u0000"}]`} {
		f.Add([]byte(s))
	}
	d := mustDefanger(f, "Agent memory")
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Content
		if err := json.Unmarshal(data, &c); err != nil {
			if !errors.Is(err, sdk.ErrInvalid) {
				var syn *json.SyntaxError
				if !errors.As(err, &syn) {
					t.Fatalf("error %v wraps neither ErrInvalid nor a syntax error", err)
				}
			}
			return
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("marshal of decoded content: %v", err)
		}
		var again Content
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("re-decoding %s: %v", out, err)
		}
		if again.Text() != c.Text() {
			t.Fatalf("text changed across a round trip: %q -> %q", c.Text(), again.Text())
		}
		defanged, _ := c.mapText(d.Defang)
		if _, err := json.Marshal(defanged); err != nil {
			t.Fatalf("marshal of defanged content: %v", err)
		}
	})
}

func TestAnswersEncodeLikeTheHTTPAPI(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{TurnInjection{InjectedContext: []string{}, SkipReason: SkipNoRecords, RecordIDs: []string{}},
			`{"injected_context":[],"skip_reason":"no_records","bytes":0,"record_ids":[]}`},
		{TurnInjection{InjectedContext: []string{"m"}, Bytes: 1, RecordIDs: []string{"r1"}},
			`{"injected_context":["m"],"skip_reason":null,"bytes":1,"record_ids":["r1"]}`},
		{BuildInjection{Injection: "x", RecordIDs: []string{"r1"}}, `{"injection":"x","record_ids":["r1"]}`},
		{DefangResult{Content: BlockContent(TextBlock("t")), Hits: 2}, `{"content":[{"type":"text","text":"t"}],"hits":2}`},
	}
	for _, tc := range cases {
		b, err := json.Marshal(tc.v)
		if err != nil || string(b) != tc.want {
			t.Errorf("%T encodes as %s (%v), want %s", tc.v, b, err, tc.want)
		}
	}
	var back TurnInjection
	if err := json.Unmarshal([]byte(cases[1].want), &back); err != nil || back.SkipReason != SkipNone || back.Bytes != 1 {
		t.Fatalf("decoding: %+v %v", back, err)
	}
}
