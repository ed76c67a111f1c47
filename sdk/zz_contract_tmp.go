package sdk

import "context"

// TEMPORARY (removed at merge): the #23 contract's types, so the host's
// hybrid recall compiles before the embedder and vectors branches land.

const KindEmbedder PluginKind = "embedder"

type EmbedPurpose string

const (
	EmbedQuery    EmbedPurpose = "query"
	EmbedDocument EmbedPurpose = "document"
)

type EmbedderInfo struct {
	Model         string
	Dimensions    int
	MaxBatch      int
	MaxInputBytes int
	Deterministic bool
}

type EmbedRequest struct {
	Purpose EmbedPurpose
	Texts   []string
}

type Embedder interface {
	EmbedderInfo(ctx context.Context) (EmbedderInfo, error)
	Embed(ctx context.Context, req EmbedRequest) ([][]float32, error)
}

const CapVectors Capability = "vectors"

type RecordVector struct {
	ID     string
	Model  string
	Vector []float32
}

type VectorStore interface {
	PutVectors(ctx context.Context, realm string, vecs []RecordVector) error
	MissingVectors(ctx context.Context, realm, model, after string, limit int) ([]string, error)
}

type Fusion struct{ Lexical, Semantic float64 }

