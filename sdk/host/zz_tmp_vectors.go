package host

import "github.com/memhost/memhost/sdk"

// TEMPORARY (the vectors branch brings the real accessor).
func (p *Provider) Vectors() (sdk.VectorStore, bool) {
	return capability[sdk.VectorStore](p, sdk.CapVectors)
}
