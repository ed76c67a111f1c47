package conformance_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
)

// refCompactor is the smallest compactor that passes the suite; each
// defect switches on one bug the suite must catch.
type refCompactor struct {
	defect string
	// invisible, when set, is every artifact's content: text memhost
	// refuses as empty though it is not blank to strings.TrimSpace.
	invisible string
}

func (c *refCompactor) Info() sdk.Info {
	return sdk.Info{Name: "refcompactor", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindCompactor}, Protocols: []int{sdk.ProtocolVersion}}
}

func (c *refCompactor) Configure(_ context.Context, raw json.RawMessage) error {
	var cfg struct{}
	if c.defect == "looseConfig" {
		return nil
	}
	return sdk.DecodeConfig(raw, &cfg)
}

func (c *refCompactor) Compact(ctx context.Context, req sdk.CompactRequest) (sdk.Message, error) {
	if err := ctx.Err(); err != nil {
		return sdk.Message{}, fmt.Errorf("%v: %w", err, sdk.ErrDeadline)
	}
	if c.defect == "emptyArtifact" {
		return sdk.Message{Role: "system"}, nil
	}
	if c.invisible != "" {
		return sdk.Message{Role: "system", Content: c.invisible}, nil
	}
	var b strings.Builder
	if req.CarryOver != nil {
		b.WriteString(req.CarryOver.Content + "\n")
	}
	for _, m := range req.Evicted {
		b.WriteString(m.Role + ": " + m.Content + "\n")
	}
	out := b.String()
	if c.defect != "ignoreCap" && req.MaxBytes > 0 && len(out) > req.MaxBytes {
		out = out[len(out)-req.MaxBytes:]
	}
	return sdk.Message{Role: "system", Content: out}, nil
}

func TestCompactorSuitePassesTheReference(t *testing.T) {
	conformance.RunCompactor(t, conformance.Target{New: func() sdk.Plugin { return &refCompactor{} }})
}

func TestCompactorSuiteCatchesDefects(t *testing.T) {
	cases := []struct{ defect, check string }{
		{"looseConfig", "Config"},
		{"emptyArtifact", "Compact"},
		{"ignoreCap", "ByteCap"},
	}
	for _, tc := range cases {
		t.Run(tc.defect, func(t *testing.T) {
			s, err := conformance.NewSuite(t.Context(), conformance.Target{New: func() sdk.Plugin { return &refCompactor{defect: tc.defect} }})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.RunCompactorCheck(t.Context(), tc.check, t.TempDir()); err == nil {
				t.Errorf("check %s passed a compactor with defect %s", tc.check, tc.defect)
			}
		})
	}
	// Each artifact memhost refuses as empty (sdk.HasVisibleText) fails
	// every check that judges an answer.
	for name, content := range map[string]string{
		"zero-width spaces":      "\u200b\u200b",
		"byte-order mark":        "\ufeff\u2060\u200d \n",
		"controls":               "\x00\x07\x1b",
		"replacement characters": "\ufffd\ufffd",
		"unicode spaces":         "\u00a0\u3000",
	} {
		t.Run(name, func(t *testing.T) {
			s, err := conformance.NewSuite(t.Context(), conformance.Target{New: func() sdk.Plugin { return &refCompactor{invisible: content} }})
			if err != nil {
				t.Fatal(err)
			}
			for _, check := range []string{"Compact", "CarryOver", "ByteCap", "Concurrent"} {
				if err := s.RunCompactorCheck(t.Context(), check, t.TempDir()); err == nil {
					t.Errorf("check %s passed a compactor answering %q", check, content)
				}
			}
		})
	}
	s, err := conformance.NewSuite(t.Context(), conformance.Target{New: func() sdk.Plugin { return &refCompactor{} }})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RunCompactorCheck(t.Context(), "NoSuchCheck", t.TempDir()); err == nil || errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("unknown check: %v", err)
	}
}
