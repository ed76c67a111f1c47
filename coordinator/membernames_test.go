package coordinator

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// spellings answers n member names that each defang to "[defanged
// im_start]": the token with its letters' case and the spaces before it
// varied.
func spellings(n int) []string {
	const word = "im_start"
	var out []string
	for spaces := 0; len(out) < n; spaces++ {
		for mask := 0; mask < 1<<len(word) && len(out) < n; mask++ {
			if mask&(1<<2) != 0 {
				continue // the underscore has no case
			}
			var b strings.Builder
			for j, r := range word {
				if mask&(1<<j) != 0 {
					r -= 'a' - 'A'
				}
				b.WriteRune(r)
			}
			out = append(out, "<|"+strings.Repeat(" ", spaces)+b.String()+"|>")
		}
	}
	return out
}

// toolInput is a tool_use block whose input has the given member names,
// each valued by its place.
func toolInput(names []string) []byte {
	var b strings.Builder
	b.WriteString(`[{"type":"tool_use","id":"t","name":"n","input":{`)
	for i, k := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		q, _ := json.Marshal(k)
		fmt.Fprintf(&b, "%s:%d", q, i)
	}
	b.WriteString(`}}]`)
	return []byte(b.String())
}

// TestRenamedMembersStayUnique checks that members of a tool call's input
// defanged to one name keep distinct names, each a short suffix from the
// defanged name, and keep their values in their order.
func TestRenamedMembersStayUnique(t *testing.T) {
	d := mustDefanger(t, "Agent memory")
	const base = "[defanged im_start]"
	for _, tc := range []struct {
		name  string
		keys  []string
		want  []string // the first names answered, in order
		count int
	}{
		{name: "one", keys: spellings(1), want: []string{base}, count: 1},
		{name: "two", keys: spellings(2), want: []string{base, base + "_"}, count: 2},
		{name: "four", keys: spellings(4), want: []string{base, base + "_", base + "_2", base + "_3"}, count: 4},
		{name: "a name already taken by a later member",
			keys: []string{"<|im_start|>", "<|IM_START|>", base + "_2", base + "_"},
			want: []string{base, base + "_3", base + "_2", base + "_"}, count: 4},
		{name: "many", keys: spellings(3000), want: []string{base, base + "_", base + "_2"}, count: 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Content
			if err := c.UnmarshalJSON(toolInput(tc.keys)); err != nil {
				t.Fatal(err)
			}
			out, hits := d.DefangContent(c)
			if hits == 0 {
				t.Fatal("no hits")
			}
			tree, err := parseJSON(out.Blocks()[0].Raw)
			if err != nil {
				t.Fatal(err)
			}
			input := tree.member("input")
			if len(input.keys) != tc.count {
				t.Fatalf("%d members, want %d", len(input.keys), tc.count)
			}
			seen := map[string]bool{}
			for i, k := range input.keys {
				if seen[k] {
					t.Fatalf("member %d repeats the name %q", i, k)
				}
				seen[k] = true
				if len(k) > len(base)+8 {
					t.Fatalf("member %d is named %q, %d bytes", i, k, len(k))
				}
				if v := string(input.vals[i].raw); v != fmt.Sprint(i) {
					t.Fatalf("member %d has the value %s", i, v)
				}
			}
			for i, w := range tc.want {
				if input.keys[i] != w {
					t.Fatalf("member %d is named %q, want %q", i, input.keys[i], w)
				}
			}
			if again, more := d.DefangContent(out); more != 0 || again.Text() != out.Text() {
				t.Fatalf("second pass hit %d times", more)
			}
		})
	}
}

// BenchmarkRenamedMembers defangs a tool call whose 4,000 input member
// names all defang to one name (52 KB): before members were renamed
// through a set, 4.5 s of CPU on the server (cubic in the names).
func BenchmarkRenamedMembers(b *testing.B) {
	d := mustDefanger(b, "Agent memory")
	var c Content
	raw := toolInput(spellings(4000))
	if err := c.UnmarshalJSON(raw); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		d.DefangContent(c)
	}
}
