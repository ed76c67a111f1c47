package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestClientKindsCoverSDK holds the host's client table to the SDK's kind
// table: a kind added on one side only fails here.
func TestClientKindsCoverSDK(t *testing.T) {
	var host []sdk.PluginKind
	for k := range clientKinds {
		host = append(host, k)
	}
	slices.Sort(host)
	want := slices.Sorted(slices.Values(sdk.Kinds()))
	if !slices.Equal(host, want) {
		t.Fatalf("host client kinds %v, SDK kinds %v", host, want)
	}
}

// rowsPlugin is a provider with a large manifest and a selector that
// answers the middle and the last of the candidate rows it was given, so
// a test sees how many arrived.
type rowsPlugin struct{ rows int }

func (p *rowsPlugin) Info() sdk.Info {
	return sdk.Info{Name: "rows", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindProvider, sdk.KindSelector},
		Protocols: []int{sdk.ProtocolVersion}, Capabilities: sdk.Capabilities{sdk.CapManifest}}
}
func (p *rowsPlugin) Configure(context.Context, json.RawMessage) error           { return nil }
func (p *rowsPlugin) Recall(context.Context, sdk.RecallQuery) ([]sdk.Hit, error) { return nil, nil }
func (p *rowsPlugin) Manifest(_ context.Context, q sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	out := make([]sdk.ManifestRow, p.rows)
	for i := range out {
		out[i] = sdk.ManifestRow{ID: fmt.Sprintf("r%d", i), Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "t"}
	}
	return out, nil
}
func (p *rowsPlugin) Select(_ context.Context, req sdk.SelectRequest) (sdk.Selection, error) {
	ids := []string{req.Rows[len(req.Rows)/2].ID}
	if len(req.Rows) > 1 {
		ids = append(ids, req.Rows[len(req.Rows)-1].ID)
	}
	return sdk.Selection{IDs: ids, Coverage: sdk.CoverageSufficient}, nil
}

// TestRowsStreamInChunks: a manifest and a selection larger than one chunk
// arrive whole and in order (rows travel in chunks of wire.ChunkRows).
func TestRowsStreamInChunks(t *testing.T) {
	for _, n := range []int{0, 1, 500, 501, 1234} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx := context.Background()
			conn, err := ServeInProcess(ctx, &rowsPlugin{rows: n}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			p, err := conn.Provider()
			if err != nil {
				t.Fatal(err)
			}
			lister, ok := p.Lister()
			if !ok {
				t.Fatal("the provider declares manifest, but Lister answers false")
			}
			rows, err := lister.Manifest(ctx, sdk.ManifestQuery{Realm: "default", Tier: sdk.TierFull})
			if err != nil || len(rows) != n || (n > 0 && rows[n-1].ID != fmt.Sprintf("r%d", n-1)) {
				t.Fatalf("Manifest = %d rows, %v; want %d in order", len(rows), err, n)
			}
			if n == 0 {
				return
			}
			sel, err := conn.Selector()
			if err != nil {
				t.Fatal(err)
			}
			got, err := sel.Select(ctx, sdk.SelectRequest{Identity: sdk.Identity{Realm: "default", ID: "alice"}, Rows: rows, Max: 3})
			want := []string{fmt.Sprintf("r%d", n/2)}
			if n > 1 {
				want = append(want, rows[n-1].ID)
			}
			if err != nil || !slices.Equal(got.IDs, want) {
				t.Fatalf("Select = %+v, %v; want it to see all %d rows", got, err, n)
			}
		})
	}
}

// countingCompactor counts the requests that reach it.
type countingCompactor struct{ calls int }

func (c *countingCompactor) Info() sdk.Info {
	return sdk.Info{Name: "counting", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindCompactor}, Protocols: []int{sdk.ProtocolVersion}}
}
func (c *countingCompactor) Configure(context.Context, json.RawMessage) error { return nil }
func (c *countingCompactor) Compact(context.Context, sdk.CompactRequest) (sdk.Message, error) {
	c.calls++
	return sdk.Message{Role: "system", Content: "summary"}, nil
}

// The SDK server refuses a compact request no compactor could summarise,
// naming the field, before the plugin sees it.
func TestCompactRequestsAreCheckedBeforeThePlugin(t *testing.T) {
	ctx := context.Background()
	impl := &countingCompactor{}
	conn, err := ServeInProcess(ctx, impl, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c, err := conn.Compactor()
	if err != nil {
		t.Fatal(err)
	}
	msg := sdk.Message{Role: "user", Content: "hi"}
	for _, tc := range []struct {
		name  string
		req   sdk.CompactRequest
		field string // "" when the request is valid
	}{
		{"no messages", sdk.CompactRequest{}, "evicted"},
		{"negative cap", sdk.CompactRequest{Evicted: []sdk.Message{msg}, MaxBytes: -1}, "max_bytes"},
		{"blank role", sdk.CompactRequest{Evicted: []sdk.Message{msg, {Role: " ", Content: "x"}}}, "evicted[1].role"},
		{"valid", sdk.CompactRequest{Evicted: []sdk.Message{msg}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := impl.calls
			_, err := c.Compact(ctx, tc.req)
			if tc.field == "" {
				if err != nil || impl.calls != before+1 {
					t.Fatalf("Compact = %v after %d calls; want it to reach the plugin", err, impl.calls-before)
				}
				return
			}
			var fe *sdk.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, sdk.ErrInvalid) {
				t.Fatalf("Compact = %v, want an invalid-argument error on %s", err, tc.field)
			}
			if impl.calls != before {
				t.Fatal("the plugin saw a request the SDK should have refused")
			}
		})
	}
}

// countingSelector counts the requests that reach it and selects nothing.
type countingSelector struct{ calls int }

func (c *countingSelector) Info() sdk.Info {
	return sdk.Info{Name: "counting", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindSelector}, Protocols: []int{sdk.ProtocolVersion}}
}
func (c *countingSelector) Configure(context.Context, json.RawMessage) error { return nil }
func (c *countingSelector) Select(context.Context, sdk.SelectRequest) (sdk.Selection, error) {
	c.calls++
	return sdk.Selection{Coverage: sdk.CoverageSufficient}, nil
}

// The SDK server refuses a select request the selector could not answer,
// a row it could not name among them, naming the field, before the plugin
// sees it (the conformance kit's BadRequests requires each refusal).
func TestSelectRequestsAreCheckedBeforeThePlugin(t *testing.T) {
	ctx := context.Background()
	impl := &countingSelector{}
	conn, err := ServeInProcess(ctx, impl, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sel, err := conn.Selector()
	if err != nil {
		t.Fatal(err)
	}
	alice := sdk.Identity{Realm: "default", ID: "alice"}
	row := sdk.ManifestRow{ID: "r1", Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "deploy"}
	for _, tc := range []struct {
		name  string
		req   sdk.SelectRequest
		field string // "" when the request is valid
	}{
		{"a row without id", sdk.SelectRequest{Identity: alice, Rows: []sdk.ManifestRow{row, {Title: "deploy"}}}, "rows[1].id"},
		{"a row with an unsafe id", sdk.SelectRequest{Identity: alice, Rows: []sdk.ManifestRow{{ID: "../x", Title: "deploy"}}}, "rows[0].id"},
		{"a bad suppressed id", sdk.SelectRequest{Identity: alice, Rows: []sdk.ManifestRow{row}, SuppressedIDs: []string{""}}, "suppressed_ids[0]"},
		{"a negative max", sdk.SelectRequest{Identity: alice, Rows: []sdk.ManifestRow{row}, Max: -1}, "max"},
		{"valid", sdk.SelectRequest{Identity: alice, Rows: []sdk.ManifestRow{row}, Max: 1}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := impl.calls
			_, err := sel.Select(ctx, tc.req)
			if tc.field == "" {
				if err != nil || impl.calls != before+1 {
					t.Fatalf("Select = %v after %d calls; want it to reach the plugin", err, impl.calls-before)
				}
				return
			}
			var fe *sdk.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, sdk.ErrInvalid) {
				t.Fatalf("Select = %v, want an invalid-argument error on %s", err, tc.field)
			}
			if impl.calls != before {
				t.Fatal("the plugin saw a request the SDK should have refused")
			}
		})
	}
}
