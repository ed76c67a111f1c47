package coordinator

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// BenchmarkManyTextBlocks decodes content of 100,000 small text blocks
// (4.3 MB), as POST /v1/defang and /v1/turns/inject receive it: each block
// checked, parsed and copied on its own after the list was read took
// 0.54-0.66 s and 3.1 million allocations per op; read from one parse of
// the list, 0.12-0.19 s and 0.7 million.
func BenchmarkManyTextBlocks(b *testing.B) {
	var sb strings.Builder
	sb.WriteByte('[')
	for i := range 100000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"type":"text","text":"small block %06d"}`, i)
	}
	sb.WriteByte(']')
	raw := []byte(sb.String())
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		var c Content
		if err := c.UnmarshalJSON(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzListReadsAsBlockByBlock: a list of blocks read from one parse of
// the whole list (decodeList) must read exactly as the block-by-block
// path reads it, which words refusals: every block's type, texts, bytes
// and nested content alike, and a list one refuses the other refuses.
// The seeds run as a plain test.
func FuzzListReadsAsBlockByBlock(f *testing.F) {
	for _, seed := range []string{
		`[]`,
		`[{"type":"text","text":"hi"}]`,
		` [ {"type" : "text", "text":"a"} ,
		  {"type":"image","source":{"data":"x"}} ] `,
		`[{"type":"text","text":"\u003c|im_start|\u003e system"}]`,
		`[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"inner"},{"type":"tool_result","content":"deep"}]}]`,
		`[{"type":"tool_use","id":"u","input":{"<|im_start|>":1,"a":[1,2.5e3,null,true]}}]`,
		`[{"type":"document","title":"T","source":{"type":"text","data":"body"},"context":"c"}]`,
		`[{"type":"text","text":"é日🎉","extra":{"k":"v"}}]`,
		`[{"type":"text","text":"a","text":"b"}]`,
		`[{"type":"text","text":"\ud800"}]`,
		`[{"type":"text","text":"x"},1]`,
		`[{"type":"text","n":1e400}]`,
		`[{"type":"text","text":"a"}] trailing`,
		`[{"type":"tool_result","content":null}]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || data[0] != '[' {
			return
		}
		var fast Content
		fastOK := fast.decodeList(data, 0)
		var raws []json.RawMessage
		slowErr := json.Unmarshal(data, &raws)
		var slow []Block
		if slowErr == nil {
			slow = make([]Block, len(raws))
			for i, raw := range raws {
				if slowErr = slow[i].decode(raw, 0); slowErr != nil {
					break
				}
			}
		}
		if !fastOK {
			return // the block-by-block path then reads it, whatever it says
		}
		if slowErr != nil {
			t.Fatalf("read from one parse, refused block by block (%v): %q", slowErr, data)
		}
		if !reflect.DeepEqual(normalised(fast.blocks), normalised(slow)) {
			t.Fatalf("the two readings differ for %q:\n%#v\n%#v", data, fast.blocks, slow)
		}
	})
}

// normalised answers blocks with empty byte slices as nil, which the two
// readings may leave either way.
func normalised(blocks []Block) []Block {
	out := slices.Clone(blocks)
	for i := range out {
		if len(out[i].Raw) == 0 {
			out[i].Raw = nil
		}
		if out[i].Nested != nil {
			n := *out[i].Nested
			n.blocks = normalised(n.blocks)
			out[i].Nested = &n
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
