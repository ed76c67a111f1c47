package sdk

import (
	"fmt"
	"math"
	"unicode/utf8"
)

// Embedder limits. Every declaration within them fits one plugin message
// both ways: MaxEmbedBatch texts of MaxEmbedInputBytes, or as many vectors
// of MaxEmbedDimensions float32s.
const (
	MaxEmbedBatch      = MaxBatch
	MaxEmbedInputBytes = MaxBodyBytes
	MaxEmbedDimensions = 8192
	// Deprecated: a model id is bounded by MaxVectorModelBytes, as
	// Validate checks it with ValidateVectorModel (the id is stored with
	// every vector the embedder makes).
	MaxEmbedModelBytes = 256
)

// Validate checks a declaration against the SDK's limits; the host refuses
// an embedder whose Info fails it.
func (i EmbedderInfo) Validate() error {
	// The model id is stored with every vector, so it follows the rule a
	// provider applies to a vector's model (ValidateVectorModel): an id
	// the embedder may declare but no provider stores would fail every
	// write of its vectors and every recall it embeds.
	if err := ValidateVectorModel("model", i.Model); err != nil {
		return err
	}
	switch {
	case i.Dimensions < 1 || i.Dimensions > MaxEmbedDimensions:
		return invalid("dimensions", fmt.Sprintf("%d is outside 1..%d", i.Dimensions, MaxEmbedDimensions))
	case i.MaxBatch < 1 || i.MaxBatch > MaxEmbedBatch:
		return invalid("max_batch", fmt.Sprintf("%d is outside 1..%d", i.MaxBatch, MaxEmbedBatch))
	case i.MaxInputBytes < 1 || i.MaxInputBytes > MaxEmbedInputBytes:
		return invalid("max_input_bytes", fmt.Sprintf("%d is outside 1..%d", i.MaxInputBytes, MaxEmbedInputBytes))
	}
	return nil
}

// CheckRequest checks req against the declared limits: a known purpose,
// 1..MaxBatch texts, each non-empty valid UTF-8 of at most MaxInputBytes.
// A failure wraps ErrInvalid and names the field.
func (i EmbedderInfo) CheckRequest(req EmbedRequest) error {
	if !req.Purpose.Known() {
		return invalid("purpose", fmt.Sprintf("%q is neither %q nor %q", req.Purpose, EmbedQuery, EmbedDocument))
	}
	switch n := len(req.Texts); {
	case n == 0:
		return invalid("texts", "lists no texts")
	case n > i.MaxBatch:
		return invalid("texts", fmt.Sprintf("lists %d texts, over the embedder's max batch %d", n, i.MaxBatch))
	}
	for k, t := range req.Texts {
		field := fmt.Sprintf("texts[%d]", k)
		switch {
		case t == "":
			return invalid(field, "is empty")
		case len(t) > i.MaxInputBytes:
			return invalid(field, fmt.Sprintf("is %d bytes, over the embedder's max input %d", len(t), i.MaxInputBytes))
		case !utf8.ValidString(t):
			return invalid(field, "is not valid UTF-8")
		}
	}
	return nil
}

// CheckVectors checks an answer to a request of texts texts: one vector
// per text, each of Dimensions finite values. A failure is the embedder's
// fault, so it wraps no sentinel (its code is internal).
func (i EmbedderInfo) CheckVectors(texts int, vecs [][]float32) error {
	if len(vecs) != texts {
		return fmt.Errorf("the embedder answered %d vectors for %d texts", len(vecs), texts)
	}
	for k, v := range vecs {
		if len(v) != i.Dimensions {
			return fmt.Errorf("the embedder answered vector %d with %d dimensions, not the declared %d", k, len(v), i.Dimensions)
		}
		for j, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("the embedder answered vector %d with a non-finite value at %d (%v)", k, j, x)
			}
		}
	}
	return nil
}
