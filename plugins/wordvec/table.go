package wordvec

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"strings"
	"unicode/utf8"
)

// The table file (docs/wordvec.md describes it for people), little-endian:
//
//	offset 0   magic "MHWV"
//	       4   version uint16 (1)
//	       6   dims uint16
//	       8   count uint32, the number of words
//	      12   sif_a float32, the SIF smoothing constant the table was built for
//	      16   vocab_bytes uint32, the length of the vocabulary section
//	      20   pc [dims]float32, the common component (unit length, or all zero)
//	           vocabulary: count x (uint8 length, that many bytes of UTF-8),
//	                       by frequency rank, most frequent first
//	           freq [count]float32, each word's unigram probability estimate
//	           scale [count]float32, each vector's quantisation scale
//	           vectors [count][dims]int8 in -127..127; a word's vector is
//	                       scale x int8 values
//	           crc32 (Castagnoli) uint32 of every byte before it
const (
	tableMagic   = "MHWV"
	tableVersion = 1
	headerBytes  = 20

	// MaxDims and MaxWords bound what a table may declare, so a corrupt
	// header cannot make the loader allocate without limit.
	MaxDims  = 1024
	MaxWords = 1 << 21
	// MaxTableBytes bounds the file the loader reads.
	MaxTableBytes = 512 << 20
	// maxWordBytes is what the one-byte length prefix holds.
	maxWordBytes = 255

	// MinScale and MaxScale bound a word's quantisation scale. A text's
	// sum of up to 64 Ki words of 127 x MaxScale stays well inside
	// float32, where a larger scale overflowed to Inf and then NaN; the
	// converter's scales (a vector's peak / 127) are nowhere near either.
	MinScale = 1e-30
	MaxScale = 1e30
)

// ErrBadTable marks a table file that cannot be used.
var ErrBadTable = errors.New("bad word vector table")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Table is a loaded word vector table. It is read only after loading and
// safe for concurrent use.
type Table struct {
	dims  int
	sifA  float32
	pc    []float32  // unit length, or all zero
	hasPC bool       // pc is not all zero
	words vocabulary // by rank
	freq  []float32
	scale []float32
	vecs  []int8 // count x dims
	index wordIndex
	hash  string // hex SHA-256 of the file's bytes
}

// TableData is a table's content before it is encoded, as the converter
// builds it.
type TableData struct {
	Dims  int
	SIFA  float32
	PC    []float32 // nil or all zero: remove no component
	Words []string  // by frequency rank, most frequent first
	Freq  []float32 // unigram probability estimate per word, not increasing
	Scale []float32 // per vector, > 0
	Vecs  []int8    // len(Words) x Dims, each in -127..127
}

// Dims answers the vectors' dimensions.
func (t *Table) Dims() int { return t.dims }

// Len answers the number of words.
func (t *Table) Len() int { return t.words.len() }

// Hash answers the hex SHA-256 of the table file: a different table is a
// different model.
func (t *Table) Hash() string { return t.hash }

// Lookup answers a word's rank, or -1 when the table lacks it.
func (t *Table) Lookup(w []byte) int { return t.index.lookup(t.words, w) }

// Word answers the word at rank i.
func (t *Table) Word(i int) string { return t.words.at(i) }

// Freq answers the probability estimate of the word at rank i.
func (t *Table) Freq(i int) float32 { return t.freq[i] }

// Data answers the table's content; encoding it gives the file back.
func (t *Table) Data() TableData {
	words := make([]string, t.Len())
	for i := range words {
		words[i] = t.words.at(i)
	}
	return TableData{Dims: t.dims, SIFA: t.sifA, PC: t.pc, Words: words, Freq: t.freq, Scale: t.scale, Vecs: t.vecs}
}

// LoadTable reads and checks the table file at path.
func LoadTable(path string) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxTableBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	t, err := ParseTable(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseTable decodes and checks a table file's bytes. Every failure wraps
// ErrBadTable.
func ParseTable(data []byte) (*Table, error) {
	t, err := parseTable(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadTable, err)
	}
	return t, nil
}

func parseTable(data []byte) (*Table, error) {
	if len(data) > MaxTableBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxTableBytes)
	}
	if len(data) < headerBytes+4 {
		return nil, fmt.Errorf("%d bytes is too short for a header", len(data))
	}
	if string(data[:4]) != tableMagic {
		return nil, errors.New("not a word vector table (wrong magic)")
	}
	le := binary.LittleEndian
	if v := le.Uint16(data[4:]); v != tableVersion {
		return nil, fmt.Errorf("version %d, this build reads %d", v, tableVersion)
	}
	body, sum := data[:len(data)-4], le.Uint32(data[len(data)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, fmt.Errorf("checksum %08x, the file says %08x (truncated or corrupt)", got, sum)
	}
	dims, count := int(le.Uint16(data[6:])), int(le.Uint32(data[8:]))
	if dims < 1 || dims > MaxDims {
		return nil, fmt.Errorf("dimensions %d outside 1..%d", dims, MaxDims)
	}
	if count < 1 || count > MaxWords {
		return nil, fmt.Errorf("word count %d outside 1..%d", count, MaxWords)
	}
	sifA := math.Float32frombits(le.Uint32(data[12:]))
	if !(sifA > 0 && sifA < 1) {
		return nil, fmt.Errorf("sif_a %v outside (0, 1)", sifA)
	}
	vocabBytes := int(le.Uint32(data[16:]))
	want := headerBytes + 4*dims + vocabBytes + 8*count + count*dims
	if vocabBytes < 2*count || vocabBytes > count*(1+maxWordBytes) || want != len(body) {
		return nil, fmt.Errorf("%d bytes, the header implies %d", len(body), want)
	}
	r := reader{b: body[headerBytes:]}
	t := &Table{dims: dims, sifA: sifA}
	pc := r.floats(dims)
	var norm float64
	for _, x := range pc {
		norm += float64(x) * float64(x)
	}
	switch {
	case math.IsNaN(norm) || math.IsInf(norm, 0):
		return nil, errors.New("common component is not finite")
	case norm != 0 && math.Abs(norm-1) > 1e-3:
		return nil, fmt.Errorf("common component has length %.4f, not 1", math.Sqrt(norm))
	}
	t.pc, t.hasPC = pc, norm != 0
	// The words are kept as one string and their offsets: 50k strings
	// of their own would cost a megabyte more.
	vocab := string(r.next(vocabBytes))
	t.words = vocabulary{off: make([]uint32, 0, count+1)}
	var blob strings.Builder
	blob.Grow(vocabBytes - count)
	at := 0
	for i := 0; at < len(vocab) && i < count; i++ {
		t.words.off = append(t.words.off, uint32(blob.Len()))
		n := int(vocab[at])
		if n == 0 || at+1+n > len(vocab) {
			return nil, fmt.Errorf("word %d: length %d does not fit the vocabulary", i, n)
		}
		w := vocab[at+1 : at+1+n]
		if err := checkWord(w); err != nil {
			return nil, fmt.Errorf("word %d: %w", i, err)
		}
		blob.WriteString(w)
		at += 1 + n
	}
	t.words.off = append(t.words.off, uint32(blob.Len()))
	t.words.blob = blob.String()
	if t.words.len() != count || at != len(vocab) {
		return nil, fmt.Errorf("vocabulary holds %d words and %d spare bytes, the header says %d words", t.words.len(), len(vocab)-at, count)
	}
	t.freq = r.floats(count)
	var total float64
	for i, p := range t.freq {
		if !(p > 0 && p <= 1) {
			return nil, fmt.Errorf("word %q: frequency %v outside (0, 1]", t.words.at(i), p)
		}
		if i > 0 && p > t.freq[i-1] {
			return nil, fmt.Errorf("word %q: frequency %v above the previous word's: words must be in frequency order", t.words.at(i), p)
		}
		total += float64(p)
	}
	if total > 1+1e-3 {
		return nil, fmt.Errorf("frequencies sum to %.4f, over 1", total)
	}
	t.scale = r.floats(count)
	for i, s := range t.scale {
		if !(s >= MinScale && s <= MaxScale) {
			return nil, fmt.Errorf("word %q: scale %v is outside %g..%g", t.words.at(i), s, MinScale, MaxScale)
		}
	}
	t.vecs = make([]int8, count*dims)
	for i, b := range r.next(count * dims) {
		if b == 0x80 {
			return nil, fmt.Errorf("word %q: vector value -128 (values are -127..127)", t.words.at(i/dims))
		}
		t.vecs[i] = int8(b)
	}
	idx, dup := buildIndex(t.words)
	if dup >= 0 {
		return nil, fmt.Errorf("word %q appears twice", t.words.at(dup))
	}
	t.index = idx
	h := sha256.Sum256(data)
	t.hash = hex.EncodeToString(h[:])
	return t, nil
}

// checkWord holds a vocabulary word to what the tokenizer can look up.
func checkWord(w string) error {
	switch {
	case !utf8.ValidString(w):
		return errors.New("not UTF-8")
	case strings.ToLower(w) != w:
		return fmt.Errorf("%q is not lower case", w)
	case len(Tokens(w)) != 1 || Tokens(w)[0] != w:
		return fmt.Errorf("%q is not one token", w)
	}
	return nil
}

// reader takes sections off a body whose length was checked beforehand.
type reader struct{ b []byte }

func (r *reader) next(n int) []byte {
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) floats(n int) []float32 {
	b := r.next(4 * n)
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// Encode writes d as a table file after checking it the way the loader
// will, so a written table always loads.
func (d *TableData) Encode() ([]byte, error) {
	if len(d.Vecs) != len(d.Words)*d.Dims || len(d.Freq) != len(d.Words) || len(d.Scale) != len(d.Words) ||
		(d.PC != nil && len(d.PC) != d.Dims) {
		return nil, errors.New("table sections disagree in length")
	}
	var b bytes.Buffer
	le := binary.LittleEndian
	b.WriteString(tableMagic)
	vocabBytes := 0
	for _, w := range d.Words {
		if len(w) > maxWordBytes {
			return nil, fmt.Errorf("word %q is longer than %d bytes", w, maxWordBytes)
		}
		vocabBytes += 1 + len(w)
	}
	if d.Dims > math.MaxUint16 || len(d.Words) > math.MaxUint32 || vocabBytes > math.MaxUint32 {
		return nil, errors.New("table too large for the format")
	}
	b.Write(le.AppendUint16(nil, tableVersion))
	b.Write(le.AppendUint16(nil, uint16(d.Dims)))
	b.Write(le.AppendUint32(nil, uint32(len(d.Words))))
	b.Write(le.AppendUint32(nil, math.Float32bits(d.SIFA)))
	b.Write(le.AppendUint32(nil, uint32(vocabBytes)))
	pc := d.PC
	if pc == nil {
		pc = make([]float32, d.Dims)
	}
	writeFloats(&b, pc)
	for _, w := range d.Words {
		b.WriteByte(byte(len(w)))
		b.WriteString(w)
	}
	writeFloats(&b, d.Freq)
	writeFloats(&b, d.Scale)
	for _, q := range d.Vecs {
		b.WriteByte(byte(q))
	}
	b.Write(le.AppendUint32(nil, crc32.Checksum(b.Bytes(), castagnoli)))
	if _, err := parseTable(b.Bytes()); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeFloats(b *bytes.Buffer, fs []float32) {
	for _, f := range fs {
		b.Write(binary.LittleEndian.AppendUint32(nil, math.Float32bits(f)))
	}
}

// vocabulary is the words in rank order, concatenated, with offsets.
type vocabulary struct {
	blob string
	off  []uint32 // word i is blob[off[i]:off[i+1]]
}

func (v vocabulary) len() int { return max(0, len(v.off)-1) }

func (v vocabulary) at(i int) string { return v.blob[v.off[i]:v.off[i+1]] }

// wordIndex finds a word's rank: open addressing over the words slice,
// half a megabyte for 50k words where a map would take several.
type wordIndex struct {
	slots []int32 // rank+1, 0 = empty
	mask  uint64
}

func buildIndex(words vocabulary) (wordIndex, int) {
	n := 1
	for n < 2*words.len() {
		n <<= 1
	}
	idx := wordIndex{slots: make([]int32, n), mask: uint64(n - 1)}
	for i := range words.len() {
		w := words.at(i)
		h := hashWord(w) & idx.mask
		for idx.slots[h] != 0 {
			if words.at(int(idx.slots[h]-1)) == w {
				return idx, i
			}
			h = (h + 1) & idx.mask
		}
		idx.slots[h] = int32(i + 1)
	}
	return idx, -1
}

func (x wordIndex) lookup(words vocabulary, w []byte) int {
	if len(x.slots) == 0 {
		return -1
	}
	h := hashWord(w) & x.mask
	for {
		s := x.slots[h]
		if s == 0 {
			return -1
		}
		if words.at(int(s-1)) == string(w) {
			return int(s - 1)
		}
		h = (h + 1) & x.mask
	}
}

// hashWord is FNV-1a, 64 bits.
func hashWord[S string | []byte](w S) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(w); i++ {
		h ^= uint64(w[i])
		h *= 1099511628211
	}
	return h
}
