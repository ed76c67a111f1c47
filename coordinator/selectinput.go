package coordinator

import (
	"context"
	"slices"

	"github.com/memhost/memhost/sdk"
)

// selectAmong asks the selector which of req's rows to inject. A selector
// may hand what it is sent to a model (the llm plugin does), so the rows'
// ids, kinds, titles and descriptions, the suppressed ids and the query
// are rendered as every text memhost hands a model is; the ids it answers
// are mapped back to the records' own.
func (c *Coordinator) selectAmong(ctx context.Context, req sdk.SelectRequest) (sdk.Selection, error) {
	own := make(map[string]string, len(req.Rows)+len(req.SuppressedIDs))
	// claim answers rid's rendering out, or "" for one that is no valid id
	// (a header phrase spelled in it) or another id's rendering: the
	// selector is not sent it, since its pick could not be told apart.
	claim := func(rid, out string) string {
		if was, taken := own[out]; (taken && was != rid) || sdk.ValidateID(out) != nil {
			return ""
		}
		own[out] = rid
		return out
	}
	rows := make([]sdk.ManifestRow, 0, len(req.Rows))
	for _, r := range req.Rows {
		// Rendered as the build index renders its rows.
		f := c.rowFields(&r)
		if r.ID = claim(r.ID, f.id); r.ID == "" {
			continue
		}
		r.Kind, r.Title, r.Description = sdk.RecordKind(f.kind), f.title, f.desc
		rows = append(rows, r)
	}
	req.Rows = rows
	if req.SuppressedIDs != nil {
		// The host drops suppressed picks itself: one left out is safe.
		// A selector may write them one next to the next with only
		// punctuation between (llm's JSON list), so they are rendered as
		// one run: two ids can spell a marker neither holds alone.
		outs := slices.Clone(req.SuppressedIDs)
		kinds := make([]TextKind, len(outs))
		for i := range kinds {
			kinds[i] = TextLabel
		}
		c.env.renderFields(outs, kinds)
		suppressed := make([]string, 0, len(req.SuppressedIDs))
		for i, rid := range req.SuppressedIDs {
			if out := claim(rid, outs[i]); out != "" {
				suppressed = append(suppressed, out)
			}
		}
		req.SuppressedIDs = suppressed
	}
	// One line already and cut to maxQueryBytes: rendered without a cut.
	req.Query, _ = c.env.render(req.Query, TextSummary)
	sel, err := c.selector.Select(ctx, req)
	for i, rid := range sel.IDs {
		if r, ok := own[rid]; ok {
			sel.IDs[i] = r
		}
	}
	return sel, err
}
