package index

import (
	"encoding/binary"
	"iter"
	"math"
	"slices"
)

// A posting list is held compressed, in blocks of blockSize postings:
// each posting is its docno's distance from the one before (a uvarint; the
// block's first posting is the block's first docno and costs nothing) and
// its weighted frequency (fcode). Beside the bytes, one pblock per block
// bounds the block's scores and names its docno range and scopes, so a walk
// passes over a block no posting of which can matter without decoding it,
// and a probe goes straight to the one block that may hold a docno.

// blockSize is how many postings share one block.
const blockSize = 64

// pblock describes one block of a posting list.
type pblock struct {
	first, last uint32  // docnos of its first and last postings
	off         uint32  // where its postings start in plist.data
	maxF        float32 // the highest weighted frequency in it
	minDL       uint32  // the shortest document in it
	scopes      uint32  // bit s%32 for each scope id s of its documents
}

// plist is one term's postings, in docno order. Deleted documents stay in
// it (skipped by their dead scope) until they outnumber the live ones.
type plist struct {
	data   []byte
	blocks []pblock
	// peaks are the postings' (frequency, length) pairs no other pair
	// beats on both (a higher frequency and a shorter document score
	// higher): the list's best score is one of theirs, whatever the
	// query's idf and average length, and there are few of them.
	peaks    []peak
	n        int32 // postings held, deleted ones included
	df, dead int32
}

type peak struct {
	f  float32
	dl uint32
}

// addPeak keeps the pairs no other beats as (f, dl) arrives.
func (l *plist) addPeak(f float32, dl uint32) {
	for _, p := range l.peaks {
		if p.f >= f && p.dl <= dl {
			return
		}
	}
	l.peaks = slices.DeleteFunc(l.peaks, func(p peak) bool { return f >= p.f && dl <= p.dl })
	l.peaks = append(l.peaks, peak{f, dl})
}

func scopeBit(scope uint32) uint32 { return 1 << (scope & 31) }

// add appends docno no, which is past every docno the list holds.
func (l *plist) add(no uint32, f float32, dl, scope uint32) {
	if l.n%blockSize == 0 {
		l.blocks = append(l.blocks, pblock{first: no, last: no, off: uint32(len(l.data)), maxF: f, minDL: dl, scopes: scopeBit(scope)})
	} else {
		b := &l.blocks[len(l.blocks)-1]
		l.data = binary.AppendUvarint(l.data, uint64(no-b.last))
		b.last = no
		b.maxF, b.minDL = max(b.maxF, f), min(b.minDL, dl)
		b.scopes |= scopeBit(scope)
	}
	l.data = appendF(l.data, f)
	l.addPeak(f, dl)
	l.n++
	l.df++
}

// appendF encodes a weighted frequency: a whole number of eighths (every
// frequency of small integer weights and of the context weight 3/8) as
// twice that number, one byte below 8; any other as its bits, flagged.
func appendF(b []byte, f float32) []byte {
	if v := f * 8; v < 1<<24 && v == float32(uint32(v)) {
		return binary.AppendUvarint(b, uint64(uint32(v))<<1)
	}
	return binary.AppendUvarint(b, uint64(math.Float32bits(f))<<1|1)
}

// readF decodes the frequency appendF wrote at b[i:], answering where the
// next value starts.
func readF(b []byte, i int) (float32, int) {
	x, i := uvarint(b, i)
	if x&1 == 0 {
		return float32(uint32(x>>1)) / 8, i
	}
	return math.Float32frombits(uint32(x >> 1)), i
}

// uvarint decodes the uvarint at b[i:], which the list itself wrote.
func uvarint(b []byte, i int) (uint64, int) {
	if c := b[i]; c < 0x80 {
		return uint64(c), i + 1
	}
	v, n := binary.Uvarint(b[i:])
	return v, i + n
}

// size answers how many postings block bi holds.
func (l *plist) size(bi int) int {
	if bi == len(l.blocks)-1 {
		return int(l.n) - bi*blockSize
	}
	return blockSize
}

// decode fills docs and fs with block bi's postings, answering how many.
// The one-byte gaps and the one- and two-byte frequencies, nearly every
// posting, are decoded inline (a call to uvarint is not inlined).
func (l *plist) decode(bi int, docs *[blockSize]uint32, fs *[blockSize]float32) int {
	b := &l.blocks[bi]
	n := l.size(bi)
	data, doc, i := l.data, b.first, int(b.off)
	for k := range n {
		if k > 0 {
			if c := data[i]; c < 0x80 {
				doc += uint32(c)
				i++
			} else {
				d, m := binary.Uvarint(data[i:])
				doc += uint32(d)
				i += m
			}
		}
		var f float32
		if c := data[i]; c < 0x80 && c&1 == 0 {
			f = float32(c>>1) / 8
			i++
		} else if c >= 0x80 && c&1 == 0 && data[i+1] < 0x80 {
			// two bytes: a frequency of 8 or more (a title term's)
			f = float32(uint32(c&0x7f)>>1|uint32(data[i+1])<<6) / 8
			i += 2
		} else {
			f, i = readF(data, i)
		}
		docs[k], fs[k] = doc, f
	}
	return n
}

// all iterates the postings: docno and weighted frequency.
func (l *plist) all() iter.Seq2[uint32, float32] {
	return func(yield func(uint32, float32) bool) {
		var docs [blockSize]uint32
		var fs [blockSize]float32
		for bi := range l.blocks {
			n := l.decode(bi, &docs, &fs)
			for k := range n {
				if !yield(docs[k], fs[k]) {
					return
				}
			}
		}
	}
}

// rewrite re-encodes the list with the postings remap keeps, renumbered
// as it answers (in the same order); scope and dl are by new docno.
func (l *plist) rewrite(remap func(uint32) (uint32, bool), scope, dl []uint32) {
	out := plist{data: make([]byte, 0, len(l.data)), blocks: make([]pblock, 0, len(l.blocks))}
	for doc, f := range l.all() {
		if nd, ok := remap(doc); ok {
			out.add(nd, f, dl[nd], scope[nd])
		}
	}
	out.data, out.blocks, out.peaks = slices.Clip(out.data), slices.Clip(out.blocks), slices.Clip(out.peaks)
	*l = out
}

func (l *plist) compact(scope, dl []uint32) {
	l.rewrite(func(d uint32) (uint32, bool) { return d, scope[d] != deadScope }, scope, dl)
}

// seek answers the first block at or after from that may hold docno no
// (its last docno is no or past it); len(l.blocks) when none does.
func (l *plist) seek(no uint32, from int) int {
	bs := l.blocks
	// Gallop, then binary search.
	step, hi := 1, from
	for hi < len(bs) && bs[hi].last < no {
		from = hi + 1
		hi += step
		step *= 2
	}
	hi = min(hi, len(bs))
	for from < hi {
		mid := int(uint(from+hi) >> 1)
		if bs[mid].last < no {
			from = mid + 1
		} else {
			hi = mid
		}
	}
	return from
}

// probe finds docnos, in ascending order, in one list: a cursor that
// decodes no further into a block than the docnos asked for, and reads
// only the frequency of a docno it finds.
type probe struct {
	l   *plist
	bi  int    // the block the cursor is in; -1 none
	doc uint32 // the posting the cursor is on
	fi  int    // where that posting's frequency starts in l.data
}

func (p *probe) reset(l *plist) { p.l, p.bi = l, -1 }

// block puts the cursor in the block that may hold docno no and answers
// it, or nil when no block can; no must not be below the docno of the
// previous call.
func (p *probe) block(no uint32) *pblock {
	l := p.l
	if p.bi >= 0 && no <= l.blocks[p.bi].last {
		return &l.blocks[p.bi]
	}
	bi := l.seek(no, max(p.bi, 0))
	if bi == len(l.blocks) {
		return nil
	}
	b := &l.blocks[bi]
	p.bi, p.doc, p.fi = bi, b.first, int(b.off)
	return b
}

// find answers the weighted frequency of docno no, 0 when the list does
// not hold it; no must not be below the docno of the previous call.
func (p *probe) find(no uint32) float32 {
	b := p.block(no)
	if b == nil || b.first > no {
		return 0
	}
	// no is at most the block's last docno: the scan ends inside it.
	data, doc, i := p.l.data, p.doc, p.fi
	for doc < no {
		for data[i] >= 0x80 { // the frequency passed over
			i++
		}
		if i++; data[i] < 0x80 { // the gap, inline as in decode
			doc += uint32(data[i])
			i++
			continue
		}
		d, m := binary.Uvarint(data[i:])
		doc += uint32(d)
		i += m
	}
	p.doc, p.fi = doc, i
	if doc != no {
		return 0
	}
	if c := data[i]; c < 0x80 && c&1 == 0 {
		return float32(c>>1) / 8
	}
	f, _ := readF(data, i)
	return f
}
