package conformance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
)

// starts numbers the reference embedders made, so a defect can make each
// start differ.
var starts atomic.Int64

// refEmbedder is the smallest embedder that passes the suite: a hash of
// the text's bytes spread over a few dimensions. Each defect switches on
// one bug the suite must catch.
type refEmbedder struct {
	defect string
	start  int64
}

func newRefEmbedder(defect string) *refEmbedder {
	return &refEmbedder{defect: defect, start: starts.Add(1)}
}

func (e *refEmbedder) Info() sdk.Info {
	return sdk.Info{Name: "refembedder", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindEmbedder}, Protocols: []int{sdk.ProtocolVersion}}
}

func (e *refEmbedder) Configure(_ context.Context, raw json.RawMessage) error {
	var cfg struct{}
	return sdk.DecodeConfig(raw, &cfg)
}

func (e *refEmbedder) EmbedderInfo(context.Context) (sdk.EmbedderInfo, error) {
	info := sdk.EmbedderInfo{Model: "ref-hash-8", Dimensions: 8, MaxBatch: 16, MaxInputBytes: 512, Deterministic: true}
	if e.defect == "modelPerStart" {
		info.Model = fmt.Sprintf("ref-hash-8-%d", e.start)
	}
	return info, nil
}

func (e *refEmbedder) Embed(ctx context.Context, req sdk.EmbedRequest) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%v: %w", err, sdk.ErrDeadline)
	}
	out := make([][]float32, len(req.Texts))
	for i, t := range req.Texts {
		h := fnv.New64a()
		h.Write([]byte(t))
		r := rand.New(rand.NewPCG(h.Sum64(), 1))
		v := make([]float32, 8)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		switch e.defect {
		case "noisy":
			v[0] += float32(rand.Float64())
		case "zero":
			clear(v)
		case "constant":
			v = []float32{1, 2, 3, 4, 5, 6, 7, 8}
		}
		out[i] = v
	}
	if e.defect == "reversed" {
		slices.Reverse(out)
	}
	return out, nil
}

func TestEmbedderSuitePassesTheReference(t *testing.T) {
	conformance.RunEmbedder(t, conformance.Target{New: func() sdk.Plugin { return newRefEmbedder("") }})
}

func TestEmbedderSuiteCatchesDefects(t *testing.T) {
	cases := []struct{ defect, check string }{
		{"modelPerStart", "EmbedderInfo"},
		{"noisy", "Determinism"},
		{"zero", "Shapes"},
		{"constant", "Shapes"},
		{"reversed", "Shapes"},
	}
	for _, tc := range cases {
		t.Run(tc.defect, func(t *testing.T) {
			s, err := conformance.NewSuite(t.Context(), conformance.Target{New: func() sdk.Plugin { return newRefEmbedder(tc.defect) }})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.RunEmbedderCheck(t.Context(), tc.check, t.TempDir()); err == nil {
				t.Errorf("check %s passed an embedder with defect %s", tc.check, tc.defect)
			}
		})
	}
	s, err := conformance.NewSuite(t.Context(), conformance.Target{New: func() sdk.Plugin { return newRefEmbedder("") }})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RunEmbedderCheck(t.Context(), "NoSuchCheck", t.TempDir()); err == nil {
		t.Error("an unknown check name ran")
	}
	if got := conformance.EmbedderChecks(); len(got) == 0 || got[0] != "Info" {
		t.Errorf("EmbedderChecks() = %v", got)
	}
}
