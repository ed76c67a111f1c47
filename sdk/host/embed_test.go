package host

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
	pb "github.com/memhost/memhost/sdk/internal/pluginpb"
	"google.golang.org/grpc"
)

// shapeEmbedder answers vecs whatever it is asked, and counts its calls.
type shapeEmbedder struct {
	info  sdk.EmbedderInfo
	vecs  [][]float32
	calls int
	got   sdk.EmbedRequest
}

func (e *shapeEmbedder) Info() sdk.Info {
	return sdk.Info{Name: "shape", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindEmbedder}, Protocols: []int{sdk.ProtocolVersion}}
}
func (e *shapeEmbedder) Configure(context.Context, json.RawMessage) error { return nil }
func (e *shapeEmbedder) EmbedderInfo(context.Context) (sdk.EmbedderInfo, error) {
	return e.info, nil
}
func (e *shapeEmbedder) Embed(_ context.Context, req sdk.EmbedRequest) ([][]float32, error) {
	e.calls++
	e.got = req
	return e.vecs, nil
}

var goodInfo = sdk.EmbedderInfo{Model: "shape-2", Dimensions: 2, MaxBatch: 4, MaxInputBytes: 16, Deterministic: true}

// TestEmbedThroughTheSDK: through the Go SDK's server, a request passes
// whole, a bad one is refused before the plugin sees it, and a plugin's
// malformed answer or Info never reaches the host as vectors.
func TestEmbedThroughTheSDK(t *testing.T) {
	ctx := t.Context()
	open := func(t *testing.T, p *shapeEmbedder) sdk.Embedder {
		conn, err := ServeInProcess(ctx, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		emb, err := conn.Embedder()
		if err != nil {
			t.Fatal(err)
		}
		return emb
	}
	t.Run("round trip", func(t *testing.T) {
		p := &shapeEmbedder{info: goodInfo, vecs: [][]float32{{1, 2}, {3, -4}}}
		emb := open(t, p)
		info, err := emb.EmbedderInfo(ctx)
		if err != nil || info != goodInfo {
			t.Fatalf("EmbedderInfo = %+v, %v; want %+v", info, err, goodInfo)
		}
		vecs, err := emb.Embed(ctx, sdk.EmbedRequest{Purpose: sdk.EmbedQuery, Texts: []string{"a", "b"}})
		if err != nil || len(vecs) != 2 || vecs[1][1] != -4 {
			t.Fatalf("Embed = %v, %v", vecs, err)
		}
		if p.got.Purpose != sdk.EmbedQuery || strings.Join(p.got.Texts, ",") != "a,b" {
			t.Fatalf("the plugin was asked %+v", p.got)
		}
	})
	t.Run("bad requests never reach the plugin", func(t *testing.T) {
		p := &shapeEmbedder{info: goodInfo, vecs: [][]float32{{1, 2}}}
		emb := open(t, p)
		for _, req := range []sdk.EmbedRequest{
			{Purpose: "summary", Texts: []string{"a"}},
			{Purpose: sdk.EmbedDocument},
			{Purpose: sdk.EmbedDocument, Texts: []string{"a", "b", "c", "d", "e"}},
			{Purpose: sdk.EmbedDocument, Texts: []string{strings.Repeat("x", 17)}},
			{Purpose: sdk.EmbedDocument, Texts: []string{"\xff"}},
		} {
			if _, err := emb.Embed(ctx, req); !errors.Is(err, sdk.ErrInvalid) {
				t.Errorf("Embed(%+v): %v, want invalid", req, err)
			}
		}
		if p.calls != 0 {
			t.Fatalf("the plugin was called %d times with bad requests", p.calls)
		}
	})
	t.Run("malformed answers", func(t *testing.T) {
		for _, vecs := range [][][]float32{
			{{1, 2}, {3, 4}},
			{{1, 2, 3}},
			{{float32(math.NaN()), 1}},
			nil,
		} {
			emb := open(t, &shapeEmbedder{info: goodInfo, vecs: vecs})
			_, err := emb.Embed(ctx, sdk.EmbedRequest{Purpose: sdk.EmbedDocument, Texts: []string{"a"}})
			if err == nil || sdk.CodeOf(err) != sdk.CodeInternal || !strings.Contains(err.Error(), "the embedder answered") {
				t.Errorf("answer %v: error %v, want an internal error naming the answer", vecs, err)
			}
		}
	})
	t.Run("malformed info", func(t *testing.T) {
		bad := goodInfo
		bad.MaxBatch = 0
		emb := open(t, &shapeEmbedder{info: bad, vecs: [][]float32{{1, 2}}})
		if _, err := emb.EmbedderInfo(ctx); err == nil || !strings.Contains(err.Error(), "max_batch") || errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("EmbedderInfo with max batch 0: %v, want an error naming max_batch that blames no request", err)
		}
		if _, err := emb.Embed(ctx, sdk.EmbedRequest{Purpose: sdk.EmbedDocument, Texts: []string{"a"}}); err == nil {
			t.Error("Embed of an embedder with a malformed info succeeded")
		}
	})
}

// rawEmbedder is a plugin whose SDK checks nothing (another language's):
// the host client must catch what it answers.
type rawEmbedder struct {
	info  *pb.EmbedderInfoResponse
	vecs  []*pb.Embedding
	infos int
}

func (r *rawEmbedder) Info(context.Context, *pb.EmbedderInfoRequest, ...grpc.CallOption) (*pb.EmbedderInfoResponse, error) {
	r.infos++
	return r.info, nil
}

func (r *rawEmbedder) Embed(context.Context, *pb.EmbedRequest, ...grpc.CallOption) (*pb.EmbedResponse, error) {
	return &pb.EmbedResponse{Vectors: r.vecs}, nil
}

func TestEmbedClientChecksTheAnswer(t *testing.T) {
	ctx := t.Context()
	info := &pb.EmbedderInfoResponse{Model: "raw", Dimensions: 2, MaxBatch: 8, MaxInputBytes: 64}
	req := sdk.EmbedRequest{Purpose: sdk.EmbedDocument, Texts: []string{"a", "b"}}
	for _, tc := range []struct {
		name string
		vecs []*pb.Embedding
		want string
	}{
		{"good", []*pb.Embedding{{Values: []float32{1, 0}}, {Values: []float32{0, 1}}}, ""},
		{"missing", []*pb.Embedding{{Values: []float32{1, 0}}}, "1 vectors for 2 texts"},
		{"short", []*pb.Embedding{{Values: []float32{1, 0}}, {Values: []float32{0}}}, "vector 1 with 1 dimensions"},
		{"infinite", []*pb.Embedding{{Values: []float32{1, 0}}, {Values: []float32{float32(math.Inf(1)), 0}}}, "non-finite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := &rawEmbedder{info: info, vecs: tc.vecs}
			c := &embedderClient{rpc: raw}
			for range 2 {
				_, err := c.Embed(ctx, req)
				if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
					t.Fatalf("Embed: %v, want %q", err, tc.want)
				}
			}
			if raw.infos != 1 {
				t.Fatalf("the client asked EmbedderInfo %d times for two calls, want once", raw.infos)
			}
		})
	}
	c := &embedderClient{rpc: &rawEmbedder{info: &pb.EmbedderInfoResponse{Model: "raw", Dimensions: 0, MaxBatch: 8, MaxInputBytes: 64}}}
	if _, err := c.Embed(ctx, req); err == nil || !strings.Contains(err.Error(), "dimensions") {
		t.Fatalf("Embed from a plugin declaring 0 dimensions: %v", err)
	}
}
