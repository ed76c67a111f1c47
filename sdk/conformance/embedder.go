package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk"
)

// RunEmbedder runs the embedder suite as subtests of t, each check on a
// fresh plugin:
//
//	conformance.RunEmbedder(t, conformance.Target{New: func() sdk.Plugin { return myembedder.New() }})
//
// It checks Info (and the manifest when given), config validation, a
// well-formed EmbedderInfo stable across starts, the shape of answers
// (one vector of the declared dimensions per text, in order, finite and
// not zero, different texts answered differently), determinism when
// declared, the batch and input limits refused as invalid, bad input,
// and concurrent calls. It does not judge vector quality.
//
// It has no deadline check: the caller's gRPC client answers a deadline
// error when the deadline passes whatever the plugin does, and a call to Embed
// changes nothing, so a plugin that ignores its deadline looks, from
// outside, like one that honours it. Honour ctx anyway: an abandoned call
// holds a core until it ends.
func RunEmbedder(t *testing.T, target Target) {
	t.Helper()
	runKind(t, target, sdk.KindEmbedder, nil, embedderChecks)
}

// EmbedderChecks names the embedder suite's checks, in run order.
func EmbedderChecks() []string {
	out := make([]string, len(embedderChecks))
	for i, c := range embedderChecks {
		out[i] = c.name
	}
	return out
}

// RunEmbedderCheck runs the named embedder check against a fresh plugin
// on dataDir (an empty directory) and answers every problem it found.
func (s *Suite) RunEmbedderCheck(ctx context.Context, name, dataDir string) error {
	for _, c := range embedderChecks {
		if c.name == name {
			return (&kindSuite{Suite: s, kind: sdk.KindEmbedder}).run(ctx, c, dataDir)
		}
	}
	return fmt.Errorf("conformance: no embedder check named %q", name)
}

var embedderChecks = kindChecks([]kindCheck{
	{name: "EmbedderInfo", run: checkEmbedderInfo},
	{name: "Shapes", run: checkEmbedShapes},
	{name: "Determinism", run: checkEmbedDeterminism},
	{name: "Limits", run: checkEmbedLimits},
	{name: "BadInput", run: checkEmbedBadInput},
	{name: "Concurrency", run: checkEmbedConcurrency},
})

// EmbedderTexts answers the texts whose vectors the embedder suite checks
// (not zero, different texts different): an embedder bound to a
// vocabulary, tested with a small one, must know their words. Every other
// text the suite sends (longer copies, fillers) only needs an answer of the
// right shape.
func EmbedderTexts() []string { return slices.Clone(embedTexts) }

// embedTexts are short texts on unrelated topics, so any embedder answers
// them with different vectors.
var embedTexts = []string{
	"how do we deploy the production database?",
	"I usually read a novel before bed",
	"the lunch order is two cheese sandwiches",
	"Grüße aus München: das Wetter ist schön",
	"conformance release notes for version 2",
}

// openEmbedder starts and configures the plugin and answers its embedder
// with the EmbedderInfo it declares.
func (e *kindEnv) openEmbedder(ctx context.Context) (sdk.Embedder, sdk.EmbedderInfo, error) {
	if err := e.open(ctx, e.s.config(e.dir)); err != nil {
		return nil, sdk.EmbedderInfo{}, err
	}
	emb, err := e.inst.conn.Embedder()
	if err != nil {
		return nil, sdk.EmbedderInfo{}, err
	}
	info, err := emb.EmbedderInfo(ctx)
	if err != nil {
		return nil, sdk.EmbedderInfo{}, fmt.Errorf("EmbedderInfo: %w", err)
	}
	return emb, info, nil
}

// checkEmbeddings checks an answer to texts: the declared shape, no zero
// vector, and different texts answered differently.
func checkEmbeddings(what string, info sdk.EmbedderInfo, texts []string, vecs [][]float32) error {
	if err := info.CheckVectors(len(texts), vecs); err != nil {
		return fmt.Errorf("%s: %v", what, err)
	}
	var p problems
	for i, v := range vecs {
		if norm(v) == 0 {
			p.addf("%s: text %d (%.40q) answered a zero vector, which no similarity can rank", what, i, texts[i])
		}
		for j := range i {
			if texts[j] != texts[i] && equalVectors(vecs[j], v) {
				p.addf("%s: texts %d and %d differ but answered the same vector", what, j, i)
			}
		}
	}
	return p.err()
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func equalVectors(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// cosine of two vectors of one length (0 when one is zero).
func cosine(a, b []float32) float64 {
	var dot float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
	}
	if na, nb := norm(a), norm(b); na > 0 && nb > 0 {
		return dot / (na * nb)
	}
	return 0
}

// sameText is how close two answers for one text must be when they came
// in different batches or orders: a model served on a GPU may differ in
// the last bits with the batch, never in direction.
const sameText = 0.999

// checkEmbedderInfo: EmbedderInfo is within the SDK's limits and the same
// on a second call and after a restart (a changed model id would make
// every stored vector stale).
func checkEmbedderInfo(ctx context.Context, e *kindEnv) error {
	emb, first, err := e.openEmbedder(ctx)
	if err != nil {
		return err
	}
	var p problems
	if err := first.Validate(); err != nil {
		p.addf("EmbedderInfo %+v: %v", first, err)
	}
	if again, err := emb.EmbedderInfo(ctx); err != nil {
		p.addf("EmbedderInfo, asked again: %v", err)
	} else if again != first {
		p.addf("EmbedderInfo changed between two calls: %+v, then %+v", first, again)
	}
	if err := e.close(); err != nil {
		return errors.Join(append(p, err)...)
	}
	if _, restarted, err := e.openEmbedder(ctx); err != nil {
		p.addf("after a restart: %v", err)
	} else if restarted != first {
		p.addf("EmbedderInfo changed across a restart: %+v, then %+v", first, restarted)
	}
	return p.err()
}

// checkEmbedShapes: single texts and batches for both purposes answer
// one vector per text, in order; a text of exactly MaxInputBytes and a
// batch of MaxBatch texts are taken.
func checkEmbedShapes(ctx context.Context, e *kindEnv) error {
	emb, info, err := e.openEmbedder(ctx)
	if err != nil {
		return err
	}
	var p problems
	batch := embedTexts[:min(len(embedTexts), info.MaxBatch)]
	for _, purpose := range []sdk.EmbedPurpose{sdk.EmbedDocument, sdk.EmbedQuery} {
		vecs, err := emb.Embed(ctx, sdk.EmbedRequest{Purpose: purpose, Texts: batch})
		if err != nil {
			p.addf("Embed of %d %s texts: %v", len(batch), purpose, err)
			continue
		}
		p.add(checkEmbeddings(fmt.Sprintf("Embed of %d %s texts", len(batch), purpose), info, batch, vecs))
		// Each text alone points where it pointed in the batch: the
		// answer is in the request's order.
		for i, text := range batch {
			one, err := emb.Embed(ctx, sdk.EmbedRequest{Purpose: purpose, Texts: []string{text}})
			if err != nil {
				p.addf("Embed of text %d alone (%s): %v", i, purpose, err)
				continue
			}
			if err := checkEmbeddings("Embed of one text", info, []string{text}, one); err != nil {
				p.add(err)
				continue
			}
			if c := cosine(one[0], vecs[i]); c < sameText {
				p.addf("Embed (%s): text %d alone and in a batch answered vectors of cosine %.4f: the batch's answer is out of order", purpose, i, c)
			}
		}
	}
	// Made of a multi-byte text's words, cut at a rune boundary.
	longest := fillRunes(embedTexts[3]+" ", info.MaxInputBytes)
	if vecs, err := emb.Embed(ctx, sdk.EmbedRequest{Purpose: sdk.EmbedDocument, Texts: []string{longest}}); err != nil {
		p.addf("Embed of a text of %d bytes, the declared MaxInputBytes: %v", len(longest), err)
	} else {
		p.add(checkEmbeddings("Embed of a text of MaxInputBytes", info, []string{longest}, vecs))
	}
	full := make([]string, info.MaxBatch)
	for i := range full {
		full[i] = fmt.Sprintf("%s (copy %d)", embedTexts[i%len(embedTexts)], i)
	}
	if vecs, err := emb.Embed(ctx, sdk.EmbedRequest{Purpose: sdk.EmbedDocument, Texts: full}); err != nil {
		p.addf("Embed of MaxBatch (%d) texts: %v", len(full), err)
	} else if err := info.CheckVectors(len(full), vecs); err != nil {
		p.addf("Embed of MaxBatch texts: %v", err)
	}
	return p.err()
}

// fillRunes answers the longest repetition of word of at most n bytes,
// cut at a rune boundary: a multi-byte text at the limit.
func fillRunes(word string, n int) string {
	s := strings.Repeat(word, n/len(word)+1)[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// checkEmbedDeterminism: an embedder that declares Deterministic answers
// the same texts with the same vectors, call after call and after a
// restart.
func checkEmbedDeterminism(ctx context.Context, e *kindEnv) error {
	emb, info, err := e.openEmbedder(ctx)
	if err != nil {
		return err
	}
	if !info.Deterministic {
		return nil
	}
	batch := embedTexts[:min(len(embedTexts), info.MaxBatch)]
	req := sdk.EmbedRequest{Purpose: sdk.EmbedDocument, Texts: batch}
	first, err := emb.Embed(ctx, req)
	if err != nil {
		return fmt.Errorf("embedding: %w", err)
	}
	var p problems
	compare := func(what string, got [][]float32) {
		for i := range got {
			if i < len(first) && !equalVectors(first[i], got[i]) {
				p.addf("the embedder declares Deterministic, but %s answered text %d differently", what, i)
			}
		}
	}
	if again, err := emb.Embed(ctx, req); err != nil {
		p.addf("Embed, asked again: %v", err)
	} else {
		compare("a second call", again)
	}
	if err := e.close(); err != nil {
		return errors.Join(append(p, err)...)
	}
	emb, _, err = e.openEmbedder(ctx)
	if err != nil {
		return errors.Join(append(p, fmt.Errorf("after a restart: %w", err))...)
	}
	if restarted, err := emb.Embed(ctx, req); err != nil {
		p.addf("Embed after a restart: %v", err)
	} else {
		compare("a restarted plugin", restarted)
	}
	return p.err()
}

// checkEmbedLimits: a batch over MaxBatch and a text over MaxInputBytes
// are refused as invalid, and the embedder answers after them.
func checkEmbedLimits(ctx context.Context, e *kindEnv) error {
	emb, info, err := e.openEmbedder(ctx)
	if err != nil {
		return err
	}
	var p problems
	over := make([]string, info.MaxBatch+1)
	for i := range over {
		over[i] = fmt.Sprintf("text %d", i)
	}
	_, err = emb.Embed(ctx, sdk.EmbedRequest{Purpose: sdk.EmbedDocument, Texts: over})
	p.add(wantErr(fmt.Sprintf("Embed of %d texts, over MaxBatch %d", len(over), info.MaxBatch), err, sdk.ErrInvalid))
	long := fill("conformance", info.MaxInputBytes+1)
	_, err = emb.Embed(ctx, sdk.EmbedRequest{Purpose: sdk.EmbedDocument, Texts: []string{"short", long}})
	p.add(wantErr(fmt.Sprintf("Embed of a text of %d bytes, over MaxInputBytes %d", len(long), info.MaxInputBytes), err, sdk.ErrInvalid))
	p.add(embedsAfter(ctx, emb, info, "refused limits"))
	return p.err()
}

// embedsAfter checks that the embedder still answers a good request.
func embedsAfter(ctx context.Context, emb sdk.Embedder, info sdk.EmbedderInfo, what string) error {
	texts := embedTexts[:1]
	vecs, err := emb.Embed(ctx, sdk.EmbedRequest{Purpose: sdk.EmbedQuery, Texts: texts})
	if err != nil {
		return fmt.Errorf("embedding after %s: %v", what, err)
	}
	return checkEmbeddings("Embed after "+what, info, texts, vecs)
}

// checkEmbedBadInput: an empty list, an empty text, invalid UTF-8 and an
// unknown purpose are refused as invalid.
func checkEmbedBadInput(ctx context.Context, e *kindEnv) error {
	emb, info, err := e.openEmbedder(ctx)
	if err != nil {
		return err
	}
	var p problems
	for _, c := range []struct {
		what string
		req  sdk.EmbedRequest
	}{
		{"no texts", sdk.EmbedRequest{Purpose: sdk.EmbedDocument}},
		{"an empty text", sdk.EmbedRequest{Purpose: sdk.EmbedDocument, Texts: []string{"fine", ""}}},
		{"invalid UTF-8", sdk.EmbedRequest{Purpose: sdk.EmbedDocument, Texts: []string{"fine", "bad \xff\xfe text"}}},
		{"an unknown purpose", sdk.EmbedRequest{Purpose: "summary", Texts: []string{"fine"}}},
		{"no purpose", sdk.EmbedRequest{Texts: []string{"fine"}}},
	} {
		_, err := emb.Embed(ctx, c.req)
		p.add(wantErr("Embed with "+c.what, err, sdk.ErrInvalid))
	}
	p.add(embedsAfter(ctx, emb, info, "bad input"))
	return p.err()
}

// checkEmbedConcurrency: concurrent calls each answer their own texts.
func checkEmbedConcurrency(ctx context.Context, e *kindEnv) error {
	emb, info, err := e.openEmbedder(ctx)
	if err != nil {
		return err
	}
	want := make([][]float32, len(embedTexts))
	for i, text := range embedTexts {
		v, err := emb.Embed(ctx, sdk.EmbedRequest{Purpose: sdk.EmbedDocument, Texts: []string{text}})
		if err != nil {
			return fmt.Errorf("embedding one text: %w", err)
		}
		if err := checkEmbeddings("Embed", info, []string{text}, v); err != nil {
			return err
		}
		want[i] = v[0]
	}
	const workers, calls = 8, 5
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var p problems
			for i := range calls {
				k := (w + i) % len(embedTexts)
				got, err := emb.Embed(ctx, sdk.EmbedRequest{Purpose: sdk.EmbedDocument, Texts: []string{embedTexts[k]}})
				if err != nil {
					p.addf("worker %d call %d: %v", w, i, err)
				} else if err := info.CheckVectors(1, got); err != nil {
					p.addf("worker %d call %d: %v", w, i, err)
				} else if c := cosine(got[0], want[k]); c < sameText {
					p.addf("worker %d call %d: text %d answered a vector of cosine %.4f to its answer alone: calls mixed up", w, i, k, c)
				}
			}
			errs[w] = p.err()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
