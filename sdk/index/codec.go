package index

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"maps"
	"math"
	"slices"

	"github.com/memhost/memhost/sdk/tokenize"
)

// A snapshot is the index as postings, so a store can reopen without
// tokenizing a single record: Decode reads the lists back as the index
// holds them, checks them, and adopts them. Layout (integers are uvarints
// unless noted, strings are a length and bytes):
//
//	magic, tokenizer version (tokenize.Version), field count, weights,
//	k1, b, context weight (float64 bits, 8 bytes LE), stats,
//	next seq, realm count, then per realm:
//	  name, scope count, scopes, tag count, folded tags (those live
//	    documents carry),
//	  doc count, per doc: id, scope id, seq, expiry (zigzag), time
//	    (Doc.WhenMs, zigzag), length, tag count, tag ids;
//	  term count, per term a live document holds (in term id order;
//	    older snapshots hold empty lists too, which decode as well): term,
//	    posting count, and when it has postings: the list's bytes (a
//	    length and bytes, as plist.data), per block of blockSize: first
//	    docno, last - first, offset in the bytes, highest frequency
//	    (float32 bits, 4 bytes LE), shortest length, scope bits (4 bytes
//	    LE); peak count, per peak: frequency (float32 bits), length;
//	  the documents' term lists (as realm.terms): their total length and
//	    bytes, then each document's length;
//	  threaded doc count, per threaded doc: docno, thread id, thread seq
//	    (zigzag), per caller field: term count, terms (its own fields,
//	    which its neighbours' context is rebuilt from);
//	  model count, models (sorted), vector count, per vector: docno,
//	    model number, dimensions, components (float32 bits, 4 bytes LE,
//	    at unit length as the index holds them);
//	then the CRC-32C of all of the above (4 bytes LE).
//
// Deleted slots are dropped, so docnos are renumbered densely.
//
// Decode checks every posting's docno and frequency and each block's
// docnos, offset and highest frequency as it walks a list's bytes (in
// order, so it costs little), but not what only a look at each posting's
// document would check (a block's shortest length and scopes, a list's
// peaks, which bound scores): the checksum stands for those.

// v3 capped the thread context's frequencies and length (ContextFrequency,
// ContextLength), v4 added the vectors, v5 held the lists as the index
// does and a checksum. v6 joins thread context within a scope only: every
// earlier snapshot holds context drawn from other scopes' records under
// the same thread id, so it is stale (the layout is v5's; a threaded
// document's scope is its own, read with it). v7 leaves the system tags
// out of the tags field (TagText); the layout is v6's. v8 keys tags in
// NFC (FoldTag); the layout is v7's.
const magic = "memhost-index\x00v8\n"

// staleMagics start the snapshots of earlier layouts, all stale, and say
// why.
var staleMagics = map[string]string{
	"memhost-index\x00v7\n": "its tags are keyed as written, not in NFC",
	"memhost-index\x00v6\n": "its tags fields hold memhost's system tags",
	"memhost-index\x00v5\n": "it joins thread context across scopes",
	"memhost-index\x00v4\n": "it joins thread context across scopes",
	"memhost-index\x00v3\n": "it joins thread context across scopes",
	"memhost-index\x00v2\n": "it joins thread context across scopes",
}

// castagnoli is the CRC-32C table (the checksum x86 and arm64 compute in
// hardware).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt marks a snapshot that is not one this package wrote.
var ErrCorrupt = errors.New("index: corrupt snapshot")

// ErrStale marks a snapshot whose terms another tokenizer version cut, or
// whose frequencies an earlier layout weighed: its postings would not
// rank as today's, so the caller rebuilds the index from the records
// instead.
var ErrStale = errors.New("index: stale snapshot")

// Encode writes a snapshot of the index to w.
func (ix *Index) Encode(w io.Writer) error {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	bw := bufio.NewWriterSize(w, 256<<10)
	e := encoder{w: bw, sum: crc32.New(castagnoli)}
	e.raw([]byte(magic))
	e.uint(tokenize.Version)
	e.uint(uint64(ix.nfields))
	for _, v := range ix.opts.Weights {
		e.f64(v)
	}
	e.f64(ix.opts.K1)
	e.f64(ix.opts.B)
	e.f64(ix.opts.ContextWeight)
	e.uint(uint64(ix.opts.Stats))
	e.uint(ix.nextSeq)
	e.uint(uint64(len(ix.realms)))
	for name, rm := range ix.realms {
		e.str(name)
		rm.encode(&e)
	}
	if e.err == nil {
		_, e.err = bw.Write(binary.LittleEndian.AppendUint32(nil, e.sum.Sum32()))
	}
	if e.err != nil {
		return fmt.Errorf("index: encode: %w", e.err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("index: encode: %w", err)
	}
	return nil
}

func (rm *realm) encode(e *encoder) {
	e.uint(uint64(len(rm.scopeNames) - 1))
	for _, s := range rm.scopeNames[1:] {
		e.str(s)
	}
	// Only the tags live documents carry, renumbered in their order (the
	// index keeps dropped ones until it renumbers, which sheds them).
	tagRemap := make([]uint32, len(rm.tagIDs))
	for d := range rm.ids {
		if rm.scope[d] != deadScope {
			for _, t := range rm.tags.at(uint32(d)) {
				tagRemap[t] = 1
			}
		}
	}
	tags := make([]string, 0, len(rm.tagIDs))
	names := make([]string, len(rm.tagIDs))
	for t, id := range rm.tagIDs {
		names[id] = t
	}
	for id, t := range names {
		if tagRemap[id] == 1 {
			tagRemap[id] = uint32(len(tags))
			tags = append(tags, t)
		}
	}
	e.uint(uint64(len(tags)))
	for _, t := range tags {
		e.str(t)
	}
	// Live docs renumbered densely, in docno order.
	renum := make([]uint32, len(rm.ids))
	e.uint(uint64(rm.live))
	n := uint32(0)
	for d := range rm.ids {
		if rm.scope[d] == deadScope {
			continue
		}
		renum[d] = n
		n++
		e.str(rm.ids[d])
		e.uint(uint64(rm.scope[d] - 1))
		e.uint(rm.seq[d])
		e.int(rm.expires[d])
		e.int(rm.when[d])
		e.uint(uint64(rm.dl[d]))
		tags := rm.tags.at(uint32(d))
		e.uint(uint64(len(tags)))
		for _, t := range tags {
			e.uint(uint64(tagRemap[t]))
		}
	}
	// Every list, empty ones too, so term ids and the documents' term
	// lists stay as they are. With no deleted slot the lists are written
	// as held; otherwise rebuilt on the dense docnos (deleted postings
	// dropped), which is the work the decoder is spared.
	whole := rm.live == len(rm.ids)
	var keep func(uint32) (uint32, bool)
	var scope, dl []uint32 // by dense docno, as rewrite reads them
	if !whole {
		keep = func(d uint32) (uint32, bool) { return renum[d], rm.scope[d] != deadScope }
		scope, dl = make([]uint32, 0, rm.live), make([]uint32, 0, rm.live)
		for d := range rm.ids {
			if rm.scope[d] != deadScope {
				scope, dl = append(scope, rm.scope[d]), append(dl, rm.dl[d])
			}
		}
	}
	// Only the terms live documents hold: a term only threaded documents
	// keep is interned again as their fields are read, and one nothing
	// holds (its documents deleted since the index last renumbered) is
	// left out, the documents' term lists renumbered to match.
	lists := make([]plist, len(rm.lists))
	termRemap := make([]uint32, len(rm.lists))
	nterms := 0
	for t := range rm.lists {
		lists[t] = rm.lists[t] // a copy: rewrite replaces it, not the index's
		if !whole {
			lists[t].rewrite(keep, scope, dl)
		}
		if lists[t].n > 0 {
			termRemap[t] = uint32(nterms)
			nterms++
		}
	}
	e.uint(uint64(nterms))
	for t := range lists {
		if lists[t].n > 0 {
			e.str(rm.termNames[t])
			e.list(&lists[t])
		}
	}
	// The documents' term lists, back to back, then each one's length.
	docTerms := func(d int) []byte { return rm.terms.at(uint32(d)) }
	if nterms < len(rm.lists) {
		var live []uint32
		for d := range rm.ids {
			if rm.scope[d] != deadScope {
				live = append(live, uint32(d))
			}
		}
		sub := rm.terms.permute(live)
		sub = remapTermLists(&sub, termRemap)
		at := make([]uint32, len(rm.ids)) // docno → its place in sub
		for i, d := range live {
			at[d] = uint32(i)
		}
		docTerms = func(d int) []byte { return sub.at(at[d]) }
	}
	var total uint64
	for d := range rm.ids {
		if rm.scope[d] != deadScope {
			total += uint64(len(docTerms(d)))
		}
	}
	e.uint(total)
	for d := range rm.ids {
		if rm.scope[d] != deadScope {
			e.raw(docTerms(d))
		}
	}
	for d := range rm.ids {
		if rm.scope[d] != deadScope {
			e.uint(uint64(len(docTerms(d))))
		}
	}
	e.uint(uint64(len(rm.threaded)))
	for d := range rm.ids { // in docno order, so a snapshot is deterministic
		td := rm.threaded[rm.ids[d]]
		if rm.scope[d] == deadScope || td == nil {
			continue
		}
		e.uint(uint64(renum[d]))
		e.str(td.key.id)
		e.int(td.key.seq)
		for _, terms := range td.fields(rm) {
			e.uint(uint64(len(terms)))
			for _, t := range terms {
				e.str(t)
			}
		}
	}
	models := slices.Sorted(maps.Keys(rm.models))
	e.uint(uint64(len(models)))
	nvec := 0
	for _, m := range models {
		e.str(m)
		nvec += rm.models[m].n
	}
	e.uint(uint64(nvec))
	for d, dv := range rm.vec {
		if dv == nil || rm.scope[d] == deadScope {
			continue
		}
		e.uint(uint64(renum[d]))
		mi, _ := slices.BinarySearch(models, dv.model)
		e.uint(uint64(mi))
		e.uint(uint64(len(dv.v)))
		for _, x := range dv.v {
			e.u32(math.Float32bits(x))
		}
	}
}

type encoder struct {
	w   *bufio.Writer
	sum hash.Hash32 // of everything written
	buf [binary.MaxVarintLen64]byte
	err error
}

func (e *encoder) raw(b []byte) {
	if e.err == nil {
		e.sum.Write(b)
		_, e.err = e.w.Write(b)
	}
}

// list writes a posting list as the index holds it, which has no
// deleted postings: its count, then, when it has any, its bytes, its
// blocks and its peaks.
func (e *encoder) list(l *plist) {
	e.uint(uint64(l.n))
	if l.n == 0 {
		return
	}
	e.uint(uint64(len(l.data)))
	e.raw(l.data)
	for _, b := range l.blocks {
		e.uint(uint64(b.first))
		e.uint(uint64(b.last - b.first))
		e.uint(uint64(b.off))
		e.u32(math.Float32bits(b.maxF))
		e.uint(uint64(b.minDL))
		e.u32(b.scopes)
	}
	e.uint(uint64(len(l.peaks)))
	for _, p := range l.peaks {
		e.u32(math.Float32bits(p.f))
		e.uint(uint64(p.dl))
	}
}
func (e *encoder) uint(v uint64) { e.raw(binary.AppendUvarint(e.buf[:0], v)) }
func (e *encoder) int(v int64)   { e.raw(binary.AppendVarint(e.buf[:0], v)) }
func (e *encoder) f64(v float64) {
	e.raw(binary.LittleEndian.AppendUint64(e.buf[:0], math.Float64bits(v)))
}
func (e *encoder) u32(v uint32) { e.raw(binary.LittleEndian.AppendUint32(e.buf[:0], v)) }
func (e *encoder) str(s string) {
	e.uint(uint64(len(s)))
	if e.err == nil {
		io.WriteString(e.sum, s)
		_, e.err = e.w.WriteString(s)
	}
}

// Decode reads a snapshot Encode wrote. It refuses, with ErrCorrupt,
// anything it cannot load whole and consistent.
func Decode(r io.Reader) (*Index, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("index: decode: %w", err)
	}
	return DecodeBytes(data)
}

// DecodeBytes is Decode of a snapshot already in memory, for a caller
// that knows its size: reading a large one through Decode grows its
// buffer step by step, each step copied and cleared. The index keeps no
// reference to data.
func DecodeBytes(data []byte) (*Index, error) {
	d := decoder{b: data}
	switch head := string(d.take(len(magic))); {
	case head == magic:
		body := len(data) - 4
		if body < len(magic) || crc32.Checksum(data[:body], castagnoli) != binary.LittleEndian.Uint32(data[body:]) {
			return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
		}
		d.b = data[len(magic):body]
	case staleMagics[head] != "":
		return nil, fmt.Errorf("%w: %s", ErrStale, staleMagics[head])
	default:
		return nil, fmt.Errorf("%w: not an index snapshot", ErrCorrupt)
	}
	if v := d.uint(); d.err == nil && v != tokenize.Version {
		return nil, fmt.Errorf("%w: its terms are of version %d, the tokenizer's %d", ErrStale, v, tokenize.Version)
	}
	nf := d.count(64)
	var opts Options
	for range nf {
		opts.Weights = append(opts.Weights, d.f64())
	}
	opts.K1, opts.B, opts.ContextWeight = d.f64(), d.f64(), d.f64()
	opts.Stats = Stats(d.count(8))
	nextSeq := d.uint()
	if d.err != nil {
		return nil, d.err
	}
	ix, err := New(opts)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	ix.nextSeq = max(nextSeq, 1)
	nr := d.count(len(d.b))
	for range nr {
		name := d.str()
		if _, dup := ix.realms[name]; dup || name == "" {
			d.fail("realm %q repeated or empty", name)
		}
		if d.err != nil {
			return nil, d.err
		}
		rm, err := decodeRealm(&d, ix.nextSeq, ix.nfields)
		if err != nil {
			return nil, err
		}
		ix.realms[name] = rm
		ix.docs += rm.live
		ix.tokens += rm.tokens
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d bytes after the last realm", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return ix, nil
}

func decodeRealm(d *decoder, nextSeq uint64, nfields int) (*realm, error) {
	rm := newRealm()
	ntags := decodeNames(d, rm)
	ndocs := d.count(len(d.b))
	if d.err != nil {
		return nil, d.err
	}
	if err := decodeDocs(d, rm, ndocs, ntags, nextSeq); err != nil {
		return nil, err
	}
	err := decodeTerms(d, rm, func(l *plist, t string) error { return decodeList(d, l, t, ndocs) })
	if err != nil {
		return nil, err
	}
	if err := decodeTermLists(d, rm, ndocs); err != nil {
		return nil, err
	}
	if err := decodeThreads(d, rm, ndocs, nfields); err != nil {
		return nil, err
	}
	if err := decodeVectors(d, rm, ndocs); err != nil {
		return nil, err
	}
	rm.count()
	return rm, nil
}

// decodeVectors reads the model names and the documents' vectors.
func decodeVectors(d *decoder, rm *realm, ndocs int) error {
	models := make([]string, d.count(len(d.b)))
	for i := range models {
		models[i] = d.str()
		if d.err == nil && (models[i] == "" || i > 0 && models[i] <= models[i-1]) {
			d.fail("model %q empty or out of order", models[i])
		}
	}
	for range d.count(ndocs) {
		no := d.count(ndocs - 1)
		model := ""
		if mi := d.count(len(models) - 1); d.err == nil {
			model = models[mi]
		}
		v := make([]float32, d.count(len(d.b)/4))
		for i := range v {
			v[i] = math.Float32frombits(d.u32())
			if f := float64(v[i]); math.IsNaN(f) || math.IsInf(f, 0) {
				d.fail("a vector component is %v", v[i])
			}
		}
		if d.err != nil {
			return d.err
		}
		if len(v) == 0 || rm.vec[no] != nil {
			d.fail("document %d has an empty or second vector", no)
		} else if ms := rm.models[model]; ms != nil && ms.dims != len(v) {
			d.fail("model %q has vectors of %d and %d dimensions", model, ms.dims, len(v))
		}
		if d.err != nil {
			return d.err
		}
		rm.setVector(uint32(no), rm.vecSet(model, len(v)).add(model, v))
	}
	for _, m := range models {
		if rm.models[m] == nil {
			d.fail("model %q has no vector", m)
		}
	}
	return d.err
}

// decodeNames reads the realm's scope and tag names and answers the
// number of tags.
func decodeNames(d *decoder, rm *realm) int {
	for range d.count(len(d.b)) {
		s := d.str()
		if _, dup := rm.scopeIDs[s]; dup {
			d.fail("scope %q repeated", s)
		}
		rm.scopeID(s)
	}
	ntags := d.count(len(d.b))
	for i := range ntags {
		t := d.str()
		if _, dup := rm.tagIDs[t]; dup {
			d.fail("tag %q repeated", t)
		}
		rm.tagIDs[t] = uint32(i)
	}
	return ntags
}

// decodeDocs reads ndocs documents: id, scope, seq, expiry, time, length and
// tags.
func decodeDocs(d *decoder, rm *realm, ndocs, ntags int, nextSeq uint64) error {
	rm.ids = make([]string, ndocs)
	rm.scope = make([]uint32, ndocs)
	rm.dl = make([]uint32, ndocs)
	rm.expires = make([]int64, ndocs)
	rm.when = make([]int64, ndocs)
	rm.seq = make([]uint64, ndocs)
	rm.tags.end = make([]uint32, 0, ndocs)
	rm.vec = make([]*docVec, ndocs)
	for i := range ndocs {
		id := d.str()
		if _, dup := rm.byID[id]; dup || id == "" {
			d.fail("document id %q repeated or empty", id)
		}
		rm.ids[i] = id
		rm.byID[id] = uint32(i)
		rm.scope[i] = uint32(d.count(len(rm.scopeNames)-2)) + 1
		rm.seq[i] = d.uint()
		if rm.seq[i] == 0 || rm.seq[i] >= nextSeq {
			d.fail("document %q has seq %d outside 1..%d", id, rm.seq[i], nextSeq-1)
		}
		rm.expires[i] = d.int()
		rm.anyExpiry = rm.anyExpiry || rm.expires[i] != 0
		rm.when[i] = d.int()
		rm.dl[i] = uint32(d.count(math.MaxUint32))
		rm.tokens += int64(rm.dl[i])
		from := len(rm.tags.data)
		for range d.count(ntags) {
			t := uint32(d.count(ntags - 1))
			if containsU32(rm.tags.data[from:], t) {
				d.fail("document %q repeats a tag", id)
			}
			rm.tags.data = append(rm.tags.data, t)
		}
		if d.err != nil {
			return d.err
		}
		rm.tags.end = append(rm.tags.end, uint32(len(rm.tags.data)))
	}
	rm.findRuns()
	rm.live = ndocs
	return nil
}

// decodeTerms reads the term count, then each term and, with read, its
// list.
func decodeTerms(d *decoder, rm *realm, read func(l *plist, t string) error) error {
	nterms := d.count(len(d.b))
	rm.lists = make([]plist, 0, nterms)
	for range nterms {
		t := d.str()
		if _, dup := rm.termIDs[t]; dup {
			d.fail("term %q repeated", t)
		}
		if d.err != nil {
			return d.err
		}
		if err := read(&rm.lists[rm.term(t)], t); err != nil {
			return err
		}
	}
	return d.err
}

// decodeList reads term t's list as the index holds it (v5).
func decodeList(d *decoder, l *plist, t string, ndocs int) error {
	n := d.count(ndocs)
	if n == 0 {
		return d.err
	}
	size := d.count(len(d.b))
	l.data = slices.Clone(d.take(size))
	l.blocks = make([]pblock, (n+blockSize-1)/blockSize)
	for i := range l.blocks {
		b := &l.blocks[i]
		b.first = uint32(d.count(ndocs - 1))
		b.last = b.first + uint32(d.count(ndocs-1-int(b.first)))
		b.off = uint32(d.count(size))
		b.maxF = math.Float32frombits(d.u32())
		b.minDL = uint32(d.count(math.MaxUint32))
		b.scopes = d.u32()
	}
	l.peaks = make([]peak, d.count(n))
	for i := range l.peaks {
		l.peaks[i] = peak{f: math.Float32frombits(d.u32()), dl: uint32(d.count(math.MaxUint32))}
		if f := l.peaks[i].f; d.err == nil && (!(f > 0) || math.IsInf(float64(f), 0)) {
			d.fail("term %q has a peak of frequency %v", t, f)
		}
	}
	if d.err != nil {
		return d.err
	}
	l.n, l.df = int32(n), int32(n)
	if err := l.check(ndocs); err != nil {
		d.fail("term %q: %v", t, err)
	}
	return d.err
}

// check walks the list's bytes: every block starts at its offset, past
// the block before, with its first docno; its postings' docnos ascend
// below ndocs to its last, and its highest frequency is theirs; every
// frequency is positive and finite; the bytes hold exactly n postings.
func (l *plist) check(ndocs int) error {
	data, i := l.data, 0
	next := func() (uint64, bool) {
		v, m := binary.Uvarint(data[min(i, len(data)):])
		if m <= 0 {
			return 0, false
		}
		i += m
		return v, true
	}
	for bi := range l.blocks {
		b := &l.blocks[bi]
		if int(b.off) != i || bi > 0 && b.first <= l.blocks[bi-1].last {
			return fmt.Errorf("block %d misplaced", bi)
		}
		doc, maxF := b.first, float32(0)
		for k := range l.size(bi) {
			if k > 0 {
				delta, ok := next()
				if !ok || delta == 0 || delta >= uint64(ndocs) || int(doc)+int(delta) >= ndocs {
					return fmt.Errorf("block %d: bad docno delta", bi)
				}
				doc += uint32(delta)
			}
			x, ok := next()
			if !ok {
				return fmt.Errorf("block %d truncated", bi)
			}
			f := math.Float32frombits(uint32(x >> 1))
			if x&1 == 0 {
				if x>>1 >= 1<<24 {
					return fmt.Errorf("block %d: bad frequency", bi)
				}
				f = float32(uint32(x>>1)) / 8
			} else if x>>1 > math.MaxUint32 {
				return fmt.Errorf("block %d: bad frequency", bi)
			}
			if !(f > 0) || math.IsInf(float64(f), 0) {
				return fmt.Errorf("block %d: frequency %v", bi, f)
			}
			maxF = max(maxF, f)
		}
		if doc != b.last || maxF != b.maxF {
			return fmt.Errorf("block %d: its bounds are not its postings'", bi)
		}
	}
	if i != len(data) {
		return fmt.Errorf("%d bytes past its postings", len(data)-i)
	}
	return nil
}

// decodeTermLists reads the documents' term lists (v5): each one's term
// ids ascend and name a list, and each list holds as many postings as
// the documents' term lists name it, so a delete takes from lists that
// hold the document.
func decodeTermLists(d *decoder, rm *realm, ndocs int) error {
	total := d.count(len(d.b))
	rm.terms.data = slices.Clone(d.take(total))
	rm.terms.end = make([]uint32, ndocs)
	named := make([]int32, len(rm.lists))
	at := 0
	for doc := range ndocs {
		at += d.count(total - at)
		rm.terms.end[doc] = uint32(at)
	}
	if d.err != nil {
		return d.err
	}
	if at != total {
		d.fail("the term lists hold %d bytes, their lengths %d", total, at)
		return d.err
	}
	from := 0
	for doc := range ndocs {
		span := rm.terms.data[from:rm.terms.end[doc]]
		from = int(rm.terms.end[doc])
		t := -1
		for len(span) > 0 {
			delta, m := binary.Uvarint(span)
			if m <= 0 || (t >= 0 && delta == 0) || delta >= uint64(len(rm.lists)) || t+int(delta) >= len(rm.lists) {
				d.fail("document %d has a bad term list", doc)
				return d.err
			}
			t = max(t, 0) + int(delta)
			named[t]++
			span = span[m:]
		}
	}
	for t := range rm.lists {
		if named[t] != rm.lists[t].n {
			d.fail("term %q has %d postings, named by %d documents", rm.termNames[t], rm.lists[t].n, named[t])
			return d.err
		}
	}
	return nil
}

// decodeThreads reads the threaded documents: each one's thread key and
// its nfields place fields.
func decodeThreads(d *decoder, rm *realm, ndocs, nfields int) error {
	for range d.count(ndocs) {
		no := d.count(ndocs - 1)
		k := threadKey{id: d.str(), seq: d.int()}
		if d.err == nil && k.id == "" {
			d.fail("document %d has an empty thread id", no)
		}
		if d.err == nil {
			k.scope = rm.scopeNames[rm.scope[no]] // its place is in its own scope
		}
		fields := make([][]string, nfields)
		for f := range fields {
			for range d.count(len(d.b)) {
				fields[f] = append(fields[f], d.str())
			}
		}
		if d.err != nil {
			return d.err
		}
		id := rm.ids[no]
		if _, dup := rm.threaded[id]; dup {
			d.fail("document %q threaded twice", id)
			return d.err
		}
		rm.enthread(id, k, fields)
	}
	return nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	d.b = nil
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail("truncated")
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) uint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad integer")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad integer")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads an integer that must be at most limit.
func (d *decoder) count(limit int) int {
	v := d.uint()
	if limit < 0 || v > uint64(limit) {
		d.fail("count %d exceeds %d", v, limit)
		return 0
	}
	return int(v)
}

func (d *decoder) f64() float64 {
	b := d.take(8)
	if b == nil {
		return 0
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b))
}

func (d *decoder) u32() uint32 {
	b := d.take(4)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

func (d *decoder) str() string {
	return string(d.take(d.count(len(d.b))))
}
