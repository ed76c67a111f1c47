// Command memhost-plugin-wordvec serves the wordvec embedder to a memhost
// host. It is started by the host, never by hand.
//
// This file is the plugin's only code that needs the embedder kind of the
// SDK; everything else is package wordvec.
package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/memhost/memhost/plugins/wordvec"
	"github.com/memhost/memhost/sdk"
)

// plugin adds the embedder kind's methods to wordvec.Plugin.
type plugin struct{ *wordvec.Plugin }

var _ sdk.Embedder = plugin{}

func newPlugin() plugin { return plugin{wordvec.New()} }

func (p plugin) Info() sdk.Info {
	return sdk.Info{
		Name: "wordvec", Version: wordvec.Version, Kinds: []sdk.PluginKind{sdk.KindEmbedder},
		Protocols: []int{sdk.ProtocolVersion}, ConfigSchema: json.RawMessage(wordvec.ConfigSchema),
	}
}

func (p plugin) EmbedderInfo(context.Context) (sdk.EmbedderInfo, error) {
	e, err := p.Embedder()
	if err != nil {
		return sdk.EmbedderInfo{}, err
	}
	return sdk.EmbedderInfo{
		Model: e.Model(), Dimensions: e.Dims(),
		MaxBatch: wordvec.MaxBatch, MaxInputBytes: wordvec.MaxInputBytes, Deterministic: true,
	}, nil
}

// Embed answers the same vector for either purpose: word vectors do not
// tell a question from a passage.
func (p plugin) Embed(ctx context.Context, req sdk.EmbedRequest) ([][]float32, error) {
	if !req.Purpose.Known() {
		return nil, fmt.Errorf("wordvec: purpose %q is neither %q nor %q: %w", req.Purpose, sdk.EmbedQuery, sdk.EmbedDocument, sdk.ErrInvalid)
	}
	return p.EmbedTexts(ctx, req.Texts)
}

func main() { sdk.Serve(newPlugin()) }
