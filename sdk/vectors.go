package sdk

import (
	"crypto/sha256"
	"fmt"
	"math"
)

// The shape rules of the vectors capability, checked by the server adapter
// before a plugin sees a request and callable by the host on its side.

// MaxVectorModelBytes bounds a model id.
const MaxVectorModelBytes = 200

// ValidateVectorModel checks a model id: non-empty printable ASCII with no
// space ("text-embedding-3-small", "BAAI/bge-small-en-v1.5").
func ValidateVectorModel(field, model string) error {
	if model == "" {
		return invalid(field, "must not be empty")
	}
	if len(model) > MaxVectorModelBytes {
		return invalid(field, fmt.Sprintf("is %d bytes, the limit is %d", len(model), MaxVectorModelBytes))
	}
	for i := 0; i < len(model); i++ {
		if c := model[i]; c <= ' ' || c > '~' {
			return invalid(field, fmt.Sprintf("%q may hold only printable ASCII without spaces", model))
		}
	}
	return nil
}

// ValidateVector checks an embedding: 1 to MaxVectorDimensions finite
// numbers, not all zero (a zero vector has no direction to compare).
func ValidateVector(field string, v []float32) error {
	if len(v) == 0 {
		return invalid(field, "must not be empty")
	}
	if len(v) > MaxVectorDimensions {
		return invalid(field, fmt.Sprintf("has %d dimensions, the limit is %d", len(v), MaxVectorDimensions))
	}
	nonzero := false
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return invalid(fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("%v is not a finite number", x))
		}
		nonzero = nonzero || x != 0
	}
	if !nonzero {
		return invalid(field, "is all zero")
	}
	return nil
}

// ValidateFusion checks fusion weights: finite and not negative. Both zero
// is the zero value, the provider's default.
func ValidateFusion(f Fusion) error {
	for _, w := range []struct {
		field string
		v     float64
	}{{"fusion.lexical", f.Lexical}, {"fusion.semantic", f.Semantic}} {
		if math.IsNaN(w.v) || math.IsInf(w.v, 0) || w.v < 0 {
			return invalid(w.field, fmt.Sprintf("%v is not a finite number at least 0", w.v))
		}
	}
	return nil
}

// checkRecallVector validates recall's semantic half: a query vector comes
// with its model.
func checkRecallVector(q RecallQuery) error {
	if err := ValidateFusion(q.Fusion); err != nil {
		return err
	}
	if q.QueryVector == nil {
		if q.VectorModel != "" {
			return invalid("vector_model", "is set without a query vector")
		}
		return nil
	}
	if err := ValidateVector("query_vector", q.QueryVector); err != nil {
		return err
	}
	return ValidateVectorModel("vector_model", q.VectorModel)
}

// checkPutVectors validates a PutVectors batch: each id once, each vector
// valid with its model.
func checkPutVectors(realm string, vecs []RecordVector) error {
	if err := checkRealm(realm); err != nil {
		return err
	}
	if len(vecs) > MaxBatch {
		return tooLarge("vectors", fmt.Sprintf("%d vectors in one call, the limit is %d", len(vecs), MaxBatch))
	}
	seen := make(map[string]bool, len(vecs))
	for i, v := range vecs {
		field := fmt.Sprintf("vectors[%d]", i)
		if err := ValidateID(v.ID); err != nil {
			return invalid(field+".id", problemOf(err))
		}
		if seen[v.ID] {
			return invalid(field+".id", fmt.Sprintf("%q appears twice in the batch", v.ID))
		}
		seen[v.ID] = true
		if err := ValidateVectorModel(field+".model", v.Model); err != nil {
			return err
		}
		if err := ValidateVector(field+".vector", v.Vector); err != nil {
			return err
		}
		if v.ContentHash != "" && !isContentHash(v.ContentHash) {
			return invalid(field+".content_hash", "is not a content hash (64 lowercase hex digits)")
		}
	}
	return nil
}

// isContentHash reports whether s has ContentHash's form.
func isContentHash(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// checkMissingVectors validates a backlog page request and answers its
// limit (0 or above MaxExportPage means MaxExportPage).
func checkMissingVectors(realm, model, after string, limit int) (int, error) {
	if err := ValidateVectorModel("model", model); err != nil {
		return 0, err
	}
	return checkExport(realm, after, limit)
}
