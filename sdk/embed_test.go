package sdk

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk/internal/wire"
)

var embedInfo = EmbedderInfo{Model: "m", Dimensions: 3, MaxBatch: 2, MaxInputBytes: 8}

func TestEmbedderInfoValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		info  EmbedderInfo
		field string // "" = valid
	}{
		{"valid", embedInfo, ""},
		{"at every limit", EmbedderInfo{Model: strings.Repeat("m", MaxVectorModelBytes), Dimensions: MaxEmbedDimensions, MaxBatch: MaxEmbedBatch, MaxInputBytes: MaxEmbedInputBytes}, ""},
		{"no model", EmbedderInfo{Model: " ", Dimensions: 3, MaxBatch: 1, MaxInputBytes: 1}, "model"},
		{"long model", EmbedderInfo{Model: strings.Repeat("m", MaxVectorModelBytes+1), Dimensions: 3, MaxBatch: 1, MaxInputBytes: 1}, "model"},
		{"control in model", EmbedderInfo{Model: "a\nb", Dimensions: 3, MaxBatch: 1, MaxInputBytes: 1}, "model"},
		{"invalid UTF-8 model", EmbedderInfo{Model: "a\xff", Dimensions: 3, MaxBatch: 1, MaxInputBytes: 1}, "model"},
		// The id is stored with every vector: a provider takes printable
		// ASCII without spaces only (ValidateVectorModel).
		{"space in model", EmbedderInfo{Model: "my model", Dimensions: 3, MaxBatch: 1, MaxInputBytes: 1}, "model"},
		{"non-ASCII model", EmbedderInfo{Model: "modèle", Dimensions: 3, MaxBatch: 1, MaxInputBytes: 1}, "model"},
		{"zero dimensions", EmbedderInfo{Model: "m", MaxBatch: 1, MaxInputBytes: 1}, "dimensions"},
		{"too many dimensions", EmbedderInfo{Model: "m", Dimensions: MaxEmbedDimensions + 1, MaxBatch: 1, MaxInputBytes: 1}, "dimensions"},
		{"zero batch", EmbedderInfo{Model: "m", Dimensions: 3, MaxInputBytes: 1}, "max_batch"},
		{"batch over the SDK's", EmbedderInfo{Model: "m", Dimensions: 3, MaxBatch: MaxEmbedBatch + 1, MaxInputBytes: 1}, "max_batch"},
		{"zero input", EmbedderInfo{Model: "m", Dimensions: 3, MaxBatch: 1}, "max_input_bytes"},
		{"input over the SDK's", EmbedderInfo{Model: "m", Dimensions: 3, MaxBatch: 1, MaxInputBytes: MaxEmbedInputBytes + 1}, "max_input_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkField(t, tc.info.Validate(), tc.field)
		})
	}
}

func TestEmbedderInfoCheckRequest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		req   EmbedRequest
		field string
	}{
		{"query", EmbedRequest{Purpose: EmbedQuery, Texts: []string{"a", "b"}}, ""},
		{"document at the input limit", EmbedRequest{Purpose: EmbedDocument, Texts: []string{"12345678"}}, ""},
		{"unknown purpose", EmbedRequest{Purpose: "summary", Texts: []string{"a"}}, "purpose"},
		{"no purpose", EmbedRequest{Texts: []string{"a"}}, "purpose"},
		{"no texts", EmbedRequest{Purpose: EmbedQuery}, "texts"},
		{"over the batch", EmbedRequest{Purpose: EmbedQuery, Texts: []string{"a", "b", "c"}}, "texts"},
		{"empty text", EmbedRequest{Purpose: EmbedQuery, Texts: []string{"a", ""}}, "texts[1]"},
		{"over the input", EmbedRequest{Purpose: EmbedQuery, Texts: []string{"123456789"}}, "texts[0]"},
		{"invalid UTF-8", EmbedRequest{Purpose: EmbedQuery, Texts: []string{"a", "\xff"}}, "texts[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkField(t, embedInfo.CheckRequest(tc.req), tc.field)
		})
	}
}

func checkField(t *testing.T, err error, field string) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != field || !errors.Is(err, ErrInvalid) {
		t.Fatalf("error %v, want an invalid %s", err, field)
	}
}

func TestEmbedderInfoCheckVectors(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(-1))
	for _, tc := range []struct {
		name  string
		vecs  [][]float32
		texts int
		want  string // "" = valid, else a part of the message
	}{
		{"valid", [][]float32{{1, 2, 3}, {0, 0, 1}}, 2, ""},
		{"one short", [][]float32{{1, 2, 3}}, 2, "1 vectors for 2 texts"},
		{"one over", [][]float32{{1, 2, 3}, {1, 2, 3}}, 1, "2 vectors for 1 texts"},
		{"wrong dimensions", [][]float32{{1, 2, 3}, {1, 2}}, 2, "vector 1 with 2 dimensions"},
		{"NaN", [][]float32{{1, nan, 3}}, 1, "non-finite value at 1"},
		{"infinity", [][]float32{{1, 2, inf}}, 1, "non-finite value at 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := embedInfo.CheckVectors(tc.texts, tc.vecs)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			case err != nil && CodeOf(err) != CodeInternal:
				t.Fatalf("a bad answer is the embedder's fault, code %s, want internal", CodeOf(err))
			}
		})
	}
}

// TestEmbedLimitsFitOneMessage: the largest request and the largest
// answer the limits allow travel in one plugin message.
func TestEmbedLimitsFitOneMessage(t *testing.T) {
	const perItem = 16 // field tag, length prefix and framing, with room
	if req := MaxEmbedBatch * (MaxEmbedInputBytes + perItem); req > wire.MaxMessageBytes {
		t.Errorf("the largest Embed request is %d bytes, over the message limit %d", req, wire.MaxMessageBytes)
	}
	if answer := MaxEmbedBatch * (MaxEmbedDimensions*4 + perItem); answer > wire.MaxMessageBytes {
		t.Errorf("the largest Embed answer is %d bytes, over the message limit %d", answer, wire.MaxMessageBytes)
	}
}
