package postgres

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/memhost/memhost/sdk"
)

// corpus generates the same synthetic records and queries on every run.
// It is the sqlite provider's benchmark corpus, word for word, so the two
// providers' figures compare (it could move to a shared test package).
//
// Words come from a 20,000-word vocabulary of made-up words (never
// stopwords), drawn with a Zipf law (s = 1.1) whose 150 commonest ranks are
// flattened, as a stopword list flattens English: the commonest word is in
// about a tenth of the records. A record has a 3-9 word title, a 6-16 word
// description, a 10-60 word body and 0-3 tags; one in 33 is Chinese-like
// text instead. Scopes spread over 20 identities and the realm scope.
// A query takes two words of a random record's title and 2-4 Zipf words;
// one in ten is a short CJK string. The median query's terms are held,
// summed, by about 8% of the records.
type corpus struct {
	vocab []string
	tags  []string
	han   []rune
}

var syllables = strings.Fields("ka ri to mu sen ra pel dor vin esh lo tam quo bri zel nor fa gu hin jop kel mir nat pov rus sil tev ul wex yor zan cha dri fel gro hal ist jun kra lum mok nib orf pra qui ros sta tru umb vel wra xen yal zor")

const benchIdentities = 20

func newCorpus() *corpus {
	r := rand.New(rand.NewPCG(1, 2))
	c := &corpus{}
	seen := map[string]bool{}
	for len(c.vocab) < 20000 {
		var b strings.Builder
		for range 2 + r.IntN(3) {
			b.WriteString(syllables[r.IntN(len(syllables))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			c.vocab = append(c.vocab, w)
		}
	}
	for i := range 200 {
		c.tags = append(c.tags, c.vocab[i*7+3])
	}
	for h := rune(0x4e00); len(c.han) < 600; h += 7 {
		c.han = append(c.han, h)
	}
	return c
}

func (c *corpus) zipf(r *rand.Rand) *rand.Zipf {
	return rand.NewZipf(r, 1.1, 150, uint64(len(c.vocab)-1))
}

func (c *corpus) words(z *rand.Zipf, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = c.vocab[z.Uint64()]
	}
	return strings.Join(parts, " ")
}

// hanText draws n characters, the first ones of the table more often.
func (c *corpus) hanText(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteRune(c.han[int(float64(len(c.han))*r.Float64()*r.Float64())])
	}
	return b.String()
}

var benchKinds = []sdk.RecordKind{sdk.KindFact, sdk.KindPreference, sdk.KindGotcha, sdk.KindProcedure, sdk.KindReference}

// benchScope is the scope of record i.
func benchScope(i int) sdk.Scope {
	if i%10 == 0 {
		return sdk.RealmScope
	}
	return sdk.IdentityScope(fmt.Sprintf("user%d", i%benchIdentities))
}

func (c *corpus) record(i int) sdk.Record {
	r := rand.New(rand.NewPCG(uint64(i), 99))
	z := c.zipf(r)
	out := sdk.Record{Scope: benchScope(i), Kind: benchKinds[i%len(benchKinds)]}
	if i%33 == 0 {
		out.Title = c.hanText(r, 6+r.IntN(8))
		out.Description = c.hanText(r, 20+r.IntN(20))
		out.Body = c.hanText(r, 30+r.IntN(60))
	} else {
		out.Title = c.words(z, 3+r.IntN(7))
		out.Description = c.words(z, 6+r.IntN(11))
		out.Body = c.words(z, 10+r.IntN(51))
	}
	for range r.IntN(4) {
		out.Tags = append(out.Tags, c.tags[r.IntN(len(c.tags))])
	}
	return out
}

// query is query number i over a corpus of n records.
func (c *corpus) query(i, n int) string {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	if i%10 == 0 {
		return c.hanText(r, 4+r.IntN(4))
	}
	z := c.zipf(r)
	title := strings.Fields(c.record(r.IntN(n)).Title)
	q := []string{title[r.IntN(len(title))], title[r.IntN(len(title))], c.words(z, 2+r.IntN(3))}
	return strings.Join(q, " ")
}
