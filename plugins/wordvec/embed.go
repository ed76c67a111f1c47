package wordvec

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// Embedding is smooth inverse frequency (SIF, Arora, Liang and Ma 2017): a
// text's vector is the mean of its known words' vectors, each weighted
// a/(a+p(w)) so frequent words count little; the table's common component
// (the first principal component of many such means, see
// CommonComponent) is then removed and the result scaled to unit length.
// Unknown words are skipped.
//
// A text with no word in the table (a name, a code, another language) is
// not answered the zero vector, which no similarity can rank and which
// an index cannot normalise: it is the mean of a pseudo-random direction
// per token, drawn from the token's hash, so it matches texts sharing its
// tokens and is near-orthogonal to everything else. A text with no token
// at all (punctuation, emoji) hashes its whitespace-separated fields.
// Every text but whitespace gets a unit vector.

// Every product below that is summed is converted explicitly: Go may
// otherwise fuse multiply and add on some processors, and the vectors
// must be the same bits everywhere (a model id promises it).

// Embedder embeds texts with one table. It is safe for concurrent use.
type Embedder struct {
	t    *Table
	coef []float32 // per word: SIF weight x quantisation scale
}

// ModelPrefix starts every model id this package makes; the algorithm's
// version is in it, so a change of the maths is a change of model.
const ModelPrefix = "wordvec-sif1-"

// NewEmbedder answers an embedder over t.
func NewEmbedder(t *Table) *Embedder {
	e := &Embedder{t: t, coef: make([]float32, t.Len())}
	a := float64(t.sifA)
	for i := range e.coef {
		e.coef[i] = float32(a / (a + float64(t.freq[i])) * float64(t.scale[i]))
	}
	return e
}

// Model answers the model id: the algorithm and the table's content hash,
// so vectors made with another table are stale.
func (e *Embedder) Model() string { return ModelPrefix + e.t.hash[:16] }

// Dims answers the vectors' dimensions.
func (e *Embedder) Dims() int { return e.t.dims }

// Embed answers text's vector: unit length, or all zero for a text of
// whitespace only.
func (e *Embedder) Embed(text string) []float32 {
	out := make([]float32, e.t.dims)
	var buf [64]byte
	known := e.sum(out, text, buf[:0]) > 0
	e.removePC(out)
	if !known || allZero(out) {
		// Known words that add up to no direction (all-zero vectors, or
		// along the common component) count as unknown ones.
		clear(out)
		hashedMean(out, text, buf[:0])
		e.removePC(out)
	}
	normalise(out)
	return out
}

// removePC removes the table's common component from v, if it has one.
func (e *Embedder) removePC(v []float32) {
	if e.t.hasPC {
		project(v, e.t.pc)
	}
}

func allZero(v []float32) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

// sum adds the SIF-weighted mean of text's known words to acc and answers
// how many there were.
func (e *Embedder) sum(acc []float32, text string, buf []byte) int {
	n := 0
	add := func(i int) {
		e.addWord(acc, i)
		n++
	}
	eachToken(text, buf, func(tok []byte) { e.t.lookupToken(tok, add) })
	scaleBy(acc, n)
	return n
}

// hashedMean sets acc to the mean of text's tokens' hashed directions
// (of its fields when it has no token).
func hashedMean(acc []float32, text string, buf []byte) {
	n := 0
	add := func(unit []byte) {
		addHashed(acc, unit)
		n++
	}
	eachToken(text, buf, add)
	if n == 0 {
		for f := range strings.FieldsSeq(text) {
			add([]byte(f))
		}
	}
	scaleBy(acc, n)
}

// addHashed adds a pseudo-random vector with coordinates in [-1, 1), a
// function of unit alone: splitmix64 seeded with unit's hash, written out
// so no library change can move it.
func addHashed(acc []float32, unit []byte) {
	x := hashWord(unit)
	for d := range acc {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		acc[d] += float32(float64(z>>11)/(1<<52) - 1)
	}
}

// scaleBy divides acc by n, when n is not zero.
func scaleBy(acc []float32, n int) {
	if n == 0 {
		return
	}
	inv := 1 / float32(n)
	for d := range acc {
		acc[d] *= inv
	}
}

// project removes v's component along the unit vector u.
func project(v, u []float32) {
	var dot float32
	for d := range v {
		dot += float32(v[d] * u[d])
	}
	for d := range v {
		v[d] -= float32(dot * u[d])
	}
}

// normalise scales v to unit length; a zero v stays zero.
func normalise(v []float32) {
	var ss float64
	for _, x := range v {
		ss += float64(float64(x) * float64(x))
	}
	if ss == 0 {
		return
	}
	inv := 1 / math.Sqrt(ss)
	if inv > math.MaxFloat32 {
		// A tiny v (cancelling words of small scales): its inverse length
		// overflows float32, so divide in float64.
		norm := math.Sqrt(ss)
		for d := range v {
			v[d] = float32(float64(v[d]) / norm)
		}
		return
	}
	f := float32(inv)
	for d := range v {
		v[d] *= f
	}
}

// Sampling for the common component. SIF takes it from the embeddings of
// a corpus; a table carries no corpus, so the converter samples sentences
// from the table's own unigram estimate instead: the words of each are
// drawn with probability p(w), which reproduces what dominates a real
// corpus's component (the frequent words' shared direction) with no data
// beyond the table, deterministically, once per table.
const (
	pcSentences = 20000
	pcMinWords  = 5
	pcMaxWords  = 40
	pcSeed      = 23
)

// CommonComponent answers the first principal component (uncentred, as
// SIF takes it) of the SIF embeddings of sentences sampled from t's
// frequencies, as a unit vector whose largest coordinate is positive.
func CommonComponent(t *Table) []float32 {
	e := NewEmbedder(t)
	dims := t.dims
	cov := make([]float64, dims*dims)
	x := make([]float32, dims)
	for _, sentence := range sampleSentences(t) {
		clear(x)
		for _, i := range sentence {
			e.addWord(x, i)
		}
		scaleBy(x, len(sentence))
		for r := range dims {
			xr := float64(x[r])
			row := cov[r*dims : (r+1)*dims]
			for c := range dims {
				row[c] += float64(xr * float64(x[c]))
			}
		}
	}
	return topEigenvector(cov, dims)
}

// sampleSentences answers pcSentences sentences of word ranks, each word
// drawn with probability p(w), from a fixed seed.
func sampleSentences(t *Table) [][]int {
	cum := make([]float64, t.Len())
	var total float64
	for i, p := range t.freq {
		total += float64(p)
		cum[i] = total
	}
	rng := rand.New(rand.NewPCG(pcSeed, pcSeed))
	out := make([][]int, pcSentences)
	for s := range out {
		words := make([]int, pcMinWords+rng.IntN(pcMaxWords-pcMinWords+1))
		for w := range words {
			i, _ := slices.BinarySearch(cum, rng.Float64()*total)
			words[w] = min(i, t.Len()-1)
		}
		out[s] = words
	}
	return out
}

func (e *Embedder) addWord(acc []float32, i int) {
	c := e.coef[i]
	for d, q := range e.t.vecs[i*e.t.dims : (i+1)*e.t.dims] {
		acc[d] += float32(c * float32(q))
	}
}

// topEigenvector answers the unit eigenvector of the symmetric positive
// semi-definite matrix m (n x n) with the largest eigenvalue, by power
// iteration from a fixed start; the sign makes the largest coordinate
// positive.
func topEigenvector(m []float64, n int) []float32 {
	v := make([]float64, n)
	for i := range v {
		v[i] = 1 / math.Sqrt(float64(n))
	}
	next := make([]float64, n)
	for range 1000 {
		for r := range n {
			var s float64
			for c := range n {
				s += float64(m[r*n+c] * v[c])
			}
			next[r] = s
		}
		var norm, delta float64
		for _, x := range next {
			norm += float64(x * x)
		}
		norm = math.Sqrt(norm)
		if norm == 0 {
			return make([]float32, n)
		}
		for i := range next {
			next[i] /= norm
			delta += float64((next[i] - v[i]) * (next[i] - v[i]))
		}
		v, next = next, v
		if delta < 1e-24 {
			break
		}
	}
	big := 0
	for i := range v {
		if math.Abs(v[i]) > math.Abs(v[big]) {
			big = i
		}
	}
	out := make([]float32, n)
	for i := range v {
		if v[big] < 0 {
			v[i] = -v[i]
		}
		out[i] = float32(v[i])
	}
	normalise(out)
	return out
}
