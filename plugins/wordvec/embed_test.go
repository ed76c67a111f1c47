package wordvec

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestTokens(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  ...  ", nil},
		{"Any tips for my evening routine?", []string{"any", "tips", "for", "my", "evening", "routine"}},
		{"I don't know", []string{"i", "don't", "know"}},
		{"I don’t know", []string{"i", "don't", "know"}},
		{"well-being, cross--country", []string{"well-being", "cross", "country"}},
		{"-lead trail- 'quoted' it's'", []string{"lead", "trail", "quoted", "it's"}},
		{"ÉCOLE Straße 2024 3.5", []string{"école", "straße", "2024", "3", "5"}},
		{"naïve café", []string{"naïve", "café"}},
		{"a\xffb", []string{"a", "b"}},
		{"x_y", []string{"x", "y"}},
	}
	for _, c := range cases {
		if got := Tokens(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Tokens(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// lookups answers the table words a token stands for.
func lookups(tb *Table, tok string) []string {
	var out []string
	tb.lookupToken([]byte(tok), func(i int) { out = append(out, tb.Word(i)) })
	return out
}

func TestLookupToken(t *testing.T) {
	tb := tinyTable(t)
	cases := []struct {
		tok  string
		want []string
	}{
		{"the", []string{"the"}},
		{"zebra", nil},
		{"well-being", []string{"well-being"}}, // in the table whole
		{"well-known", []string{"well", "known"}},
		{"well-zebra", []string{"well"}},
		{"o'neill", []string{"o'neill"}},
		{"don't", []string{"do", "not"}},
		{"can't", []string{"can", "not"}},
		{"won't", []string{"will", "not"}},
		{"he's", []string{"he"}},
		{"i'll", []string{"i", "will"}},
		{"he'd", []string{"he"}}, // "would" is not in the tiny table
		{"the'book", []string{"the", "book"}},
		{"well-can't", []string{"well", "can", "not"}},
	}
	for _, c := range cases {
		if got := lookups(tb, c.tok); !slices.Equal(got, c.want) {
			t.Errorf("%q stands for %q, want %q", c.tok, got, c.want)
		}
	}
}

// referenceEmbed is SIF written out plainly, in float64, from the table's
// content: the texts it is given hold plain words only.
func referenceEmbed(d TableData, text string) []float64 {
	sum := make([]float64, d.Dims)
	n := 0
	for _, w := range strings.Fields(strings.ToLower(text)) {
		i := slices.Index(d.Words, strings.Trim(w, "?.,!"))
		if i < 0 {
			continue
		}
		weight := float64(d.SIFA) / (float64(d.SIFA) + float64(d.Freq[i]))
		for k := range d.Dims {
			sum[k] += weight * float64(d.Scale[i]) * float64(d.Vecs[i*d.Dims+k])
		}
		n++
	}
	if n == 0 {
		return sum
	}
	var dot, norm float64
	for k := range sum {
		sum[k] /= float64(n)
		dot += sum[k] * float64(d.PC[k])
	}
	for k := range sum {
		sum[k] -= dot * float64(d.PC[k])
		norm += sum[k] * sum[k]
	}
	for k := range sum {
		sum[k] /= math.Sqrt(norm)
	}
	return sum
}

func TestEmbedMatchesReference(t *testing.T) {
	tb := tinyTable(t)
	d := tb.Data()
	e := NewEmbedder(tb)
	texts := []string{
		"Any tips for my evening routine?",
		"I usually read before bed",
		"the the the",
		"zebra giraffe the",
		"Stock market fell sharply, the market fell.",
		"coffee",
	}
	for _, text := range texts {
		got, want := e.Embed(text), referenceEmbed(d, text)
		if len(got) != tb.Dims() {
			t.Fatalf("%q: %d dimensions", text, len(got))
		}
		for k := range got {
			if math.Abs(float64(got[k])-want[k]) > 1e-5 {
				t.Fatalf("%q: %v, want %v", text, got, want)
			}
		}
		var norm, dot float64
		for k := range got {
			norm += float64(got[k]) * float64(got[k])
			dot += float64(got[k]) * float64(d.PC[k])
		}
		switch {
		case math.Abs(norm-1) > 1e-5:
			t.Errorf("%q: length %v", text, math.Sqrt(norm))
		case math.Abs(dot) > 1e-5:
			t.Errorf("%q: %v along the common component", text, dot)
		}
	}
}

// TestEmbedUnknownTexts: a text with no table word still gets a unit
// vector, the same for the same tokens in any order and case, and
// another for other tokens; only whitespace answers zero.
func TestEmbedUnknownTexts(t *testing.T) {
	e := NewEmbedder(tinyTable(t))
	unit := func(text string) []float32 {
		v := e.Embed(text)
		var norm float64
		for _, x := range v {
			norm += float64(x) * float64(x)
		}
		if math.Abs(norm-1) > 1e-5 {
			t.Fatalf("%q: length %v, want 1", text, math.Sqrt(norm))
		}
		return v
	}
	zq, qz, z := unit("zebra quagga"), unit("Quagga, ZEBRA!"), unit("zebra")
	if !slices.Equal(zq, qz) {
		t.Error("the same unknown tokens in another order and case embed differently")
	}
	if slices.Equal(zq, z) || cosine(z, unit("quagga")) > 0.5 {
		t.Error("different unknown tokens embed alike")
	}
	if cosine(zq, z) < 0.5 {
		t.Errorf("a text and one of its two tokens: cosine %.3f", cosine(zq, z))
	}
	if slices.Equal(unit("?!"), unit("🙂")) {
		t.Error("two token-less texts embed alike")
	}
	for _, text := range []string{"", " \t\n "} {
		for k, x := range e.Embed(text) {
			if x != 0 {
				t.Fatalf("%q: coordinate %d is %v, want the zero vector", text, k, x)
			}
		}
	}
}

// TestEmbedDeterministic embeds the same texts from many goroutines: every
// answer is bit for bit the first.
func TestEmbedDeterministic(t *testing.T) {
	e := NewEmbedder(tinyTable(t))
	texts := []string{"I usually read before bed", "Any tips for my evening routine?", "can't sleep at night"}
	want := make([][]float32, len(texts))
	for i, s := range texts {
		want[i] = e.Embed(s)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Go(func() {
			for range 200 {
				for i, s := range texts {
					if !slices.Equal(e.Embed(s), want[i]) {
						errs <- s
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		t.Errorf("%q embedded differently", s)
	}
}

// TestCommonComponentIsTopEigenvector checks the table's component against
// the sampled sentences' embeddings computed plainly: it is a unit
// eigenvector of their uncentred second moment, with an eigenvalue no
// other direction beats.
func TestCommonComponentIsTopEigenvector(t *testing.T) {
	tb := tinyTable(t)
	d := tb.Data()
	dims := d.Dims
	cov := make([]float64, dims*dims)
	for _, sentence := range sampleSentences(tb) {
		x := make([]float64, dims)
		for _, i := range sentence {
			w := float64(d.SIFA) / (float64(d.SIFA) + float64(d.Freq[i]))
			for k := range dims {
				x[k] += w * float64(d.Scale[i]) * float64(d.Vecs[i*dims+k]) / float64(len(sentence))
			}
		}
		for r := range dims {
			for c := range dims {
				cov[r*dims+c] += x[r] * x[c]
			}
		}
	}
	rayleigh := func(v []float64) float64 {
		var num, den float64
		for r := range dims {
			var s float64
			for c := range dims {
				s += cov[r*dims+c] * v[c]
			}
			num += v[r] * s
			den += v[r] * v[r]
		}
		return num / den
	}
	u := make([]float64, dims)
	for k, x := range d.PC {
		u[k] = float64(x)
	}
	lambda := rayleigh(u)
	for r := range dims {
		var s float64
		for c := range dims {
			s += cov[r*dims+c] * u[c]
		}
		if math.Abs(s-lambda*u[r]) > 1e-4*lambda {
			t.Fatalf("component is not an eigenvector: row %d gives %v, want %v", r, s, lambda*u[r])
		}
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 2000 {
		v := make([]float64, dims)
		for k := range v {
			v[k] = rng.NormFloat64()
		}
		if q := rayleigh(v); q > lambda*(1+1e-6) {
			t.Fatalf("a random direction has Rayleigh quotient %v above the component's %v", q, lambda)
		}
	}
	if again := CommonComponent(tb); !slices.Equal(again, d.PC) {
		t.Fatal("the common component changed between two computations")
	}
}

// TestTopEigenvector recovers a known eigenvector from a matrix built
// from an orthonormal basis, whatever the start vector's overlap.
func TestTopEigenvector(t *testing.T) {
	const n = 4
	// Rows of a rotation: an orthonormal basis.
	c, s := math.Cos(0.7), math.Sin(0.7)
	basis := [n][n]float64{{c, -s, 0, 0}, {s, c, 0, 0}, {0, 0, c, s}, {0, 0, -s, c}}
	for top := range n {
		m := make([]float64, n*n)
		for i, b := range basis {
			lambda := 1.0
			if i == top {
				lambda = 3
			}
			for r := range n {
				for col := range n {
					m[r*n+col] += lambda * b[r] * b[col]
				}
			}
		}
		got := topEigenvector(m, n)
		want := basis[top]
		big := 0
		for k := range want {
			if math.Abs(want[k]) > math.Abs(want[big]) {
				big = k
			}
		}
		sign := math.Copysign(1, want[big])
		for k := range n {
			if math.Abs(float64(got[k])-sign*want[k]) > 1e-5 {
				t.Fatalf("top %d: %v, want %v", top, got, want)
			}
		}
	}
}

func TestModelIDFollowsTable(t *testing.T) {
	tb := tinyTable(t)
	d := tb.Data()
	d.Scale = slices.Clone(d.Scale)
	d.Scale[0] *= 2
	other := encoded(t, d)
	a, b := NewEmbedder(tb).Model(), NewEmbedder(other).Model()
	if a == b || !strings.HasPrefix(a, ModelPrefix) || a != NewEmbedder(tinyTable(t)).Model() {
		t.Fatalf("model ids %q and %q", a, b)
	}
}

// goldenTexts cover known words, contractions, hyphens, unknown words and
// token-less text.
var goldenTexts = []string{
	"Any tips for my evening routine?",
	"I usually read a book before bed, can't sleep at night",
	"well-known o'neill café 2024",
	"zebra quagga",
	"?!",
}

// TestEmbedGolden holds the vectors to testdata/tiny-embeddings.json bit
// for bit: a model id promises the same vectors for the same table, so
// any change of the maths must change ModelPrefix and this file together.
func TestEmbedGolden(t *testing.T) {
	e := NewEmbedder(tinyTable(t))
	got := map[string][]float32{}
	for _, text := range goldenTexts {
		got[text] = e.Embed(text)
	}
	path := filepath.Join("testdata", "tiny-embeddings.json")
	if *update {
		data, err := json.MarshalIndent(map[string]any{"model": e.Model(), "vectors": got}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Model   string
		Vectors map[string][]float32
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if want.Model != e.Model() {
		t.Fatalf("model %q, the golden file has %q", e.Model(), want.Model)
	}
	for _, text := range goldenTexts {
		if !slices.Equal(got[text], want.Vectors[text]) {
			t.Errorf("%q: %v, golden %v", text, got[text], want.Vectors[text])
		}
	}
}

// TestEmbedKnownWordsWithoutDirection: a text whose known words add up to
// nothing (a word whose vector is all zero, which the converter keeps
// from a source, or one that lies along the common component) gets a
// unit vector like a text of unknown words, not the zero vector no
// provider stores.
func TestEmbedKnownWordsWithoutDirection(t *testing.T) {
	tb := encoded(t, TableData{
		Dims: 3, SIFA: SIFA, PC: []float32{0, 0, 1},
		Words: []string{"alpha", "void", "along"},
		Freq:  []float32{0.3, 0.2, 0.1},
		Scale: []float32{0.01, 1, 0.01},
		Vecs:  []int8{127, 0, 0, 0, 0, 0, 0, 0, 127},
	})
	e := NewEmbedder(tb)
	for _, text := range []string{"void", "along", "Void along!", "void void"} {
		v := e.Embed(text)
		var norm float64
		for _, x := range v {
			norm += float64(x) * float64(x)
		}
		if math.Abs(norm-1) > 1e-5 {
			t.Errorf("%q: %v, length %v; want a unit vector", text, v, math.Sqrt(norm))
		}
	}
	if slices.Equal(e.Embed("void"), e.Embed("along")) {
		t.Error("two different words without direction embed alike")
	}
	if got := e.Embed("alpha void"); got[0] != 1 || got[1] != 0 || got[2] != 0 {
		t.Errorf("a text with a word of some direction: %v, want that direction", got)
	}
}

// TestEmbeddingStaysFinite: any table ParseTable accepts embeds any text
// as a finite unit vector. A scale of 2e36 was accepted, and two words
// summed past float32's range (Inf, then NaN once normalised); a tiny
// vector's inverse length overflowed float32 the same way.
func TestEmbeddingStaysFinite(t *testing.T) {
	many := strings.Repeat("alpha beta ", MaxInputBytes/len("alpha beta "))
	for _, tc := range []struct {
		name  string
		scale []float32
		vecs  []int8
	}{
		{"largest scale", []float32{MaxScale, MaxScale}, []int8{127, 127, 127, 127}},
		{"smallest scale", []float32{MinScale, MinScale}, []int8{127, -127, 1, 1}},
		{"scales apart", []float32{MaxScale, MinScale}, []int8{-127, 127, 127, -127}},
		{"words that nearly cancel", []float32{MinScale, MinScale}, []int8{1, 1, -1, -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := encoded(t, TableData{Dims: 2, SIFA: 1e-3, Words: []string{"alpha", "beta"}, Freq: []float32{1e-6, 1e-6}, Scale: tc.scale, Vecs: tc.vecs})
			e := NewEmbedder(tb)
			for _, text := range []string{"alpha", "beta", "alpha beta", "alpha alpha beta", many} {
				v := e.Embed(text)
				var norm float64
				for _, x := range v {
					if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
						t.Fatalf("%.20q: non-finite vector %v", text, v)
					}
					norm += float64(x) * float64(x)
				}
				if math.Abs(norm-1) > 1e-5 {
					t.Errorf("%.20q: %v, length %v; want a unit vector", text, v, math.Sqrt(norm))
				}
			}
		})
	}
	for _, scale := range []float32{2e36, 1e-31} {
		d := TableData{Dims: 2, SIFA: 1e-3, Words: []string{"alpha", "beta"}, Freq: []float32{1e-6, 1e-6}, Scale: []float32{scale, 1}, Vecs: []int8{127, 127, 127, 127}}
		if _, err := d.Encode(); err == nil {
			t.Errorf("a table of scale %g was encoded", scale)
		}
	}
}

func TestNormaliseTinyVectors(t *testing.T) {
	for _, v := range [][]float32{{1e-45, 0}, {1e-40, -1e-40}, {3e-39, 0, 0}, {3e38, 3e38}} {
		in := slices.Clone(v)
		normalise(v)
		var norm float64
		for _, x := range v {
			norm += float64(x) * float64(x)
		}
		if math.Abs(norm-1) > 1e-5 {
			t.Errorf("normalise(%v) = %v, want a unit vector", in, v)
		}
	}
}
