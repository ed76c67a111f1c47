package proposal

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/memhost/memhost/sdk"
)

// DiffLine is one line of a proposal's difference from the record it
// would supersede: Op is "=" (both), "-" (only the old) or "+" (only the
// proposal).
type DiffLine struct {
	Field string `json:"field"`
	Op    string `json:"op"`
	Text  string `json:"text"`
}

// maxDiffLines bounds the lines compared per field: bodies are capped by
// the SDK, but a quadratic table over every line is not needed to review.
const maxDiffLines = 400

// Diff compares old and proposed field by field, bodies line by line,
// over every field approval writes into the active copy (approvedCopy);
// unchanged fields other than the body are left out. Scope is the same
// by construction (Target looks in the proposal's scope).
func Diff(old, proposed *sdk.Record) []DiffLine {
	var out []DiffLine
	field := func(name, a, b string) {
		if a == b {
			return
		}
		out = append(out, DiffLine{Field: name, Op: "-", Text: a}, DiffLine{Field: name, Op: "+", Text: b})
	}
	field("title", old.Title, proposed.Title)
	field("kind", string(old.Kind), string(proposed.Kind))
	field("trust", string(old.Trust), string(proposed.Trust))
	field("description", old.Description, proposed.Description)
	tags := func(r *sdk.Record) string {
		t := slices.DeleteFunc(slices.Clone(r.Tags), func(s string) bool { return s == Tag })
		slices.Sort(t)
		return strings.Join(t, ", ")
	}
	field("tags", tags(old), tags(proposed))
	// Approval carries these into the active copy too (approvedCopy): an
	// expiry set here ends the record it replaces, unseen if not shown.
	field("expires_at", when(old.ExpiresAt), when(proposed.ExpiresAt))
	field("occurred_at", when(old.OccurredAt), when(proposed.OccurredAt))
	field("thread", thread(old.Thread), thread(proposed.Thread))
	return append(out, lineDiff("body", old.Body, proposed.Body)...)
}

// when is t as the API writes it; "" for none.
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// thread is a record's place in its thread, "ID #seq"; "" for none.
func thread(t *sdk.Thread) string {
	if t == nil {
		return ""
	}
	return fmt.Sprintf("%s #%d", t.ID, t.Seq)
}

// lineDiff is a longest-common-subsequence diff of a's and b's lines.
func lineDiff(name, a, b string) []DiffLine {
	al, bl := splitLines(a), splitLines(b)
	n, m := len(al), len(bl)
	// lcs[i][j] is the LCS length of al[i:] and bl[j:].
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if al[i] == bl[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []DiffLine
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && al[i] == bl[j]:
			out = append(out, DiffLine{Field: name, Op: "=", Text: al[i]})
			i, j = i+1, j+1
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			// Removals before additions, as diff tools show them.
			out = append(out, DiffLine{Field: name, Op: "-", Text: al[i]})
			i++
		default:
			out = append(out, DiffLine{Field: name, Op: "+", Text: bl[j]})
			j++
		}
	}
	return out
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	l := strings.Split(s, "\n")
	if len(l) > maxDiffLines {
		// The rest is one line: still compared, never expanded.
		l = append(l[:maxDiffLines-1:maxDiffLines-1], strings.Join(l[maxDiffLines-1:], "\n"))
	}
	return l
}
