package wordvec

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
)

func configured(t *testing.T) *Plugin {
	t.Helper()
	p := New()
	path, err := filepath.Abs(filepath.Join("testdata", "tiny.wvt"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(Config{Table: path})
	if err := p.Configure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigure(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.wvt")
	corrupt := filepath.Join(t.TempDir(), "corrupt.wvt")
	if err := os.WriteFile(corrupt, []byte("MHWV not a table"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, config, want string }{
		{"missing table", `{"table":` + strconv.Quote(missing) + `}`, "run `make vectors`"},
		{"default table missing", `{}`, "run `make vectors`"}, // beside the test binary: never there
		{"corrupt table", `{"table":` + strconv.Quote(corrupt) + `}`, "rebuild it with `make vectors`"},
		{"unknown key", `{"tabel":"x"}`, "tabel"},
		{"wrong type", `{"table":3}`, "table"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := New().Configure(context.Background(), json.RawMessage(c.config))
			if !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrInvalid saying %q", err, c.want)
			}
		})
	}
}

func TestEmbedTexts(t *testing.T) {
	if _, err := New().EmbedTexts(context.Background(), []string{"x"}); !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("unconfigured: %v", err)
	}
	p := configured(t)
	e, _ := p.Embedder()
	texts := []string{"I usually read before bed", "zebra", "Any tips for my evening routine?"}
	got, err := p.EmbedTexts(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(texts) {
		t.Fatalf("%d vectors for %d texts", len(got), len(texts))
	}
	for i, text := range texts {
		want := e.Embed(text)
		for k := range want {
			if got[i][k] != want[k] {
				t.Fatalf("text %d out of order or changed", i)
			}
		}
	}

	over := make([]string, MaxBatch+1)
	if _, err := p.EmbedTexts(context.Background(), over); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("a batch over the limit: %v", err)
	}
	full := make([]string, MaxBatch)
	for i := range full {
		full[i] = "the book " + strconv.Itoa(i)
	}
	if _, err := p.EmbedTexts(context.Background(), full); err != nil {
		t.Errorf("a batch at the limit: %v", err)
	}
	for name, bad := range map[string][]string{"no texts": {}, "an empty text": {"ok", ""}, "invalid UTF-8": {"ok", "a\xffb"}, "whitespace only": {"ok", " \t\n "}} {
		if _, err := p.EmbedTexts(context.Background(), bad); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	long := []string{"ok", strings.Repeat("a", MaxInputBytes+1)}
	if _, err := p.EmbedTexts(context.Background(), long); !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), "text 1") {
		t.Errorf("a text over the limit: %v", err)
	}
	if _, err := p.EmbedTexts(context.Background(), []string{strings.Repeat("a ", MaxInputBytes/2)}); err != nil {
		t.Errorf("a text at the limit: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.EmbedTexts(ctx, texts); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled call: %v", err)
	}
}

// realTable answers the table `make vectors` builds, from
// MEMHOST_WORDVEC_TABLE or bin/plugins, or skips: tests must not need
// the network, and only this one wants the real vectors.
func realTable(t testing.TB) *Table {
	path := os.Getenv("MEMHOST_WORDVEC_TABLE")
	if path == "" {
		path = filepath.Join("..", "..", "bin", "plugins", DefaultTable)
	}
	tb, err := LoadTable(path)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("no table at %s: run `make vectors` (or set MEMHOST_WORDVEC_TABLE) for this test", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func cosine(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// TestSemanticSanity needs the real table: a question is closer to its
// evidence, which shares no word with it, than to unrelated text.
func TestSemanticSanity(t *testing.T) {
	tb := realTable(t)
	e := NewEmbedder(tb)
	if tb.Len() != 50000 || tb.Dims() != 100 {
		t.Fatalf("%d words x %d dimensions, want 50000 x 100", tb.Len(), tb.Dims())
	}
	cases := []struct{ query, evidence, unrelated string }{
		{"any tips for my evening routine?", "I usually read a book before bed", "the quarterly tax filing deadline moved"},
		{"what car do I drive?", "my Toyota sedan needs new tyres", "I adopted a kitten from the shelter"},
		{"which instrument am I learning?", "I practise guitar chords every day", "the flight to Denver was delayed"},
		{"where did we go on holiday?", "we spent a week at the beach in Spain", "the database migration failed twice"},
	}
	for _, c := range cases {
		q := e.Embed(c.query)
		near, far := cosine(q, e.Embed(c.evidence)), cosine(q, e.Embed(c.unrelated))
		t.Logf("%q: evidence %.3f, unrelated %.3f", c.query, near, far)
		if near <= far {
			t.Errorf("%q is closer to %q (%.3f) than to %q (%.3f)", c.query, c.unrelated, far, c.evidence, near)
		}
	}
}

// syntheticTable answers a table the size of the real one (50k words x 100
// dimensions, Zipf frequencies, random vectors) for the benchmark, and
// texts of about 100 words drawn from it by frequency.
func syntheticTable(tb testing.TB) (*Table, []string) {
	const words, dims = 50000, 100
	r := rand.New(rand.NewPCG(3, 5))
	d := TableData{Dims: dims, SIFA: SIFA}
	var h float64
	for k := 1; k <= 400000; k++ {
		h += 1 / float64(k)
	}
	for i := range words {
		d.Words = append(d.Words, "w"+strconv.Itoa(i))
		d.Freq = append(d.Freq, float32(1/(float64(i+1)*h)))
		v := make([]float32, dims)
		for k := range v {
			v[k] = float32(r.NormFloat64() * 0.4)
		}
		scale, q := quantise(v)
		d.Scale = append(d.Scale, scale)
		d.Vecs = append(d.Vecs, q...)
	}
	d.PC = make([]float32, dims)
	d.PC[0] = 1
	t := encoded(tb, d)
	texts := make([]string, 256)
	for i := range texts {
		var b strings.Builder
		for range 100 {
			// Zipf-like: the rank's logarithm is uniform.
			rank := int(math.Exp(r.Float64()*math.Log(words))) - 1
			b.WriteString(d.Words[rank])
			b.WriteString(", ")
		}
		texts[i] = b.String()
	}
	return t, texts
}

// BenchmarkEmbed reports texts/s for turns of about 100 words on a table
// of the real one's size (the backlog target is 5k records/s).
func BenchmarkEmbed(b *testing.B) {
	tb, texts := syntheticTable(b)
	e := NewEmbedder(tb)
	b.ResetTimer()
	for i := range b.N {
		e.Embed(texts[i%len(texts)])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "texts/s")
}
