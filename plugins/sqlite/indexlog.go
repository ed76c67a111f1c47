package sqlite

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/memhost/memhost/sdk"
	memindex "github.com/memhost/memhost/sdk/index"
	"github.com/memhost/memhost/sdk/tokenize"
)

// The index log (<path>.index.log) carries the snapshot across a crash:
// after each commit that changes the index, its changes are appended as
// one frame stamped with the transaction's index generation, and a
// snapshot empties the log. An open whose snapshot is older than the
// database replays the frames after it, in commit order, and so reaches
// exactly the index the crashed process held, without re-tokenizing a
// record. A frame missing (a crash between a commit and its append), torn
// or corrupt leaves a gap in the generations, and the open rebuilds from
// the records as before: the log only ever saves work.
//
// Frames are not fsynced: a kill -9 keeps them in the page cache, and a
// power cut that loses some shows as a gap.

// logMagic starts a log file; the database's identity (index_gen.store)
// follows it, so the log of another database is never replayed, then the
// tokenizer's version. Its frames hold terms already cut, so the header
// changes with the rule that cuts them: 4 leaves the system tags out
// (index.TagText), 5 adds tokenize.Version.
const logMagic = "memhost-sqlite-index-log\x00\x05"

// logHead is the header of the log of the database whose identity is store.
func logHead(store []byte) []byte {
	return binary.AppendUvarint(append([]byte(logMagic), store...), tokenize.Version)
}

// logSnapshotBytes is the log size past which the maintainer writes a
// snapshot (and so empties the log) without waiting for writes to pause.
const logSnapshotBytes = 64 << 20

// maxFrameBytes bounds one frame: a transaction of sdk.MaxBatch records
// at the record size limits fits many times over.
const maxFrameBytes = 1 << 30

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// indexLog is the open log file. Appends happen under database.wmu, so
// frames follow commit order; a reset or a trim under wmu and imu.
type indexLog struct {
	f    *os.File
	path string
	head []byte // logHead
	size atomic.Int64
	// dropped counts the bytes of frames a reset or trim removed, so that
	// end positions stay comparable across them.
	dropped int64
	// broken stops appends after a failed one until the next reset: a
	// frame lost mid-log must not be followed by later ones.
	broken bool
	buf    []byte
}

func (d *database) logPath() string { return d.path + ".index.log" }

// openIndexLog opens the log of the database whose identity is store for
// appending, cut to keep bytes (the valid prefix the open replayed; 0
// starts it afresh).
func openIndexLog(path string, store []byte, keep int64) (*indexLog, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open index log: %w", err)
	}
	l := &indexLog{f: f, path: path, head: logHead(store)}
	if keep < int64(len(l.head)) {
		err = l.reset()
	} else if err = f.Truncate(keep); err == nil {
		_, err = f.Seek(keep, io.SeekStart)
		l.size.Store(keep)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open index log %s: %w", path, err)
	}
	return l, nil
}

// end is the position after the last frame, counted from the log's first
// frame ever: it only grows, across resets and trims.
func (l *indexLog) end() int64 { return l.dropped + l.size.Load() }

// reset empties the log: the snapshot now holds everything it held.
func (l *indexLog) reset() error {
	l.broken = false
	head := int64(len(l.head))
	if n := l.size.Load(); n > head {
		l.dropped += n - head
	}
	if err := l.f.Truncate(0); err != nil {
		l.broken = true
		return err
	}
	if _, err := l.f.WriteAt(l.head, 0); err != nil {
		l.broken = true
		return err
	}
	if _, err := l.f.Seek(head, io.SeekStart); err != nil {
		l.broken = true
		return err
	}
	l.size.Store(head)
	return nil
}

// dropThrough removes the frames that end at or before end (an end()
// position), which a snapshot now holds, and keeps the frames after them:
// writes go on while a snapshot is written. The kept frames are copied to
// a new file renamed over the log, so a crash leaves one whole log or the
// other; frames a snapshot holds are skipped at replay either way.
func (l *indexLog) dropThrough(end int64) error {
	off, size, head := end-l.dropped, l.size.Load(), int64(len(l.head))
	switch {
	case off >= size:
		return l.reset()
	case off <= head:
		return nil
	}
	tail := make([]byte, size-off)
	if _, err := l.f.ReadAt(tail, off); err != nil {
		return fmt.Errorf("trim the index log: %w", err)
	}
	tmp := l.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("trim the index log: %w", err)
	}
	_, err = f.Write(append(slices.Clip(l.head), tail...))
	if err == nil {
		err = os.Rename(tmp, l.path)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("trim the index log: %w", err)
	}
	l.f.Close()
	l.f = f
	l.dropped += off - head
	l.size.Store(head + int64(len(tail)))
	return nil
}

func (l *indexLog) close() error { return l.f.Close() }

// append writes the frame of generation gen. A failure breaks the log
// until the next snapshot; the write it belongs to has committed and
// stands.
func (l *indexLog) append(gen uint64, ops []indexOp) error {
	if l.broken {
		return nil
	}
	b := append(l.buf[:0], make([]byte, 8)...) // length and checksum, below
	b = binary.AppendUvarint(b, gen)
	b = binary.AppendUvarint(b, uint64(len(ops)))
	for i := range ops {
		b = appendOp(b, &ops[i])
	}
	payload := b[8:]
	binary.LittleEndian.PutUint32(b[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(payload, crcTable))
	l.buf = b[:0]
	if len(b) > 1<<20 {
		l.buf = nil // do not keep a huge buffer for the next small frame
	}
	if _, err := l.f.Write(b); err != nil {
		l.broken = true
		return fmt.Errorf("append to the index log: %w", err)
	}
	l.size.Add(int64(len(b)))
	return nil
}

const (
	opPut byte = iota
	opDel
	opVec
)

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendOp(b []byte, op *indexOp) []byte {
	if op.del {
		b = append(b, opDel)
		b = appendStr(b, op.realm)
		return appendStr(b, op.id)
	}
	if v := op.vec; v != nil {
		b = append(b, opVec)
		b = appendStr(b, op.realm)
		b = appendStr(b, v.ID)
		b = appendStr(b, v.Model)
		b = binary.AppendUvarint(b, uint64(len(v.Vector)))
		for _, x := range v.Vector {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
		return b
	}
	d := &op.doc
	b = append(b, opPut)
	b = appendStr(b, d.ID)
	b = appendStr(b, d.Realm)
	b = appendStr(b, d.Scope)
	b = binary.AppendUvarint(b, uint64(len(d.Tags)))
	for _, t := range d.Tags {
		b = appendStr(b, t)
	}
	b = binary.AppendUvarint(b, uint64(len(d.Fields)))
	for _, terms := range d.Fields {
		b = binary.AppendUvarint(b, uint64(len(terms)))
		for _, t := range terms {
			b = appendStr(b, t)
		}
	}
	b = binary.AppendVarint(b, d.ExpiresMs)
	b = binary.AppendVarint(b, d.WhenMs)
	b = binary.AppendUvarint(b, d.Seq)
	b = appendStr(b, d.Thread)
	return binary.AppendVarint(b, d.ThreadSeq)
}

var errBadFrame = errors.New("corrupt index log frame")

// frameReader decodes one frame's payload. Terms are substrings of the
// payload, converted to a string once; whatever the index keeps (ids,
// scopes, tags, new terms, a threaded document's fields) is cloned, so a
// frame's memory is not held after its replay.
type frameReader struct {
	s   string
	err error
}

func (r *frameReader) uint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint([]byte(r.s[:min(len(r.s), binary.MaxVarintLen64)]))
	if n <= 0 {
		r.err = errBadFrame
		return 0
	}
	r.s = r.s[n:]
	return v
}

// int reads what binary.AppendVarint wrote: a zig-zag encoded uvarint.
func (r *frameReader) int() int64 {
	u := r.uint()
	return int64(u>>1) ^ -int64(u&1)
}

// count reads a count that cannot exceed the bytes left (every counted
// item takes at least one).
func (r *frameReader) count() int {
	v := r.uint()
	if v > uint64(len(r.s)) {
		r.err = errBadFrame
		return 0
	}
	return int(v)
}

func (r *frameReader) str() string {
	n := r.count()
	if r.err != nil {
		return ""
	}
	s := r.s[:n]
	r.s = r.s[n:]
	return s
}

func (r *frameReader) byte() byte {
	if r.err != nil || len(r.s) == 0 {
		r.err = errBadFrame
		return 0
	}
	c := r.s[0]
	r.s = r.s[1:]
	return c
}

// op decodes one change.
func (r *frameReader) op() indexOp {
	switch r.byte() {
	case opDel:
		return indexOp{del: true, realm: strings.Clone(r.str()), id: strings.Clone(r.str())}
	case opVec:
		return r.vecOp()
	case opPut:
	default:
		r.err = errBadFrame
		return indexOp{}
	}
	d := memindex.Doc{ID: strings.Clone(r.str()), Realm: strings.Clone(r.str()), Scope: strings.Clone(r.str())}
	if n := r.count(); n > 0 {
		d.Tags = make([]string, n)
		for i := range d.Tags {
			d.Tags[i] = strings.Clone(r.str())
		}
	}
	d.Fields = make([][]string, r.count())
	for i := range d.Fields {
		terms := make([]string, r.count())
		for j := range terms {
			terms[j] = r.str()
		}
		d.Fields[i] = terms
	}
	d.ExpiresMs = r.int()
	d.WhenMs = r.int()
	d.Seq = r.uint()
	d.Thread = strings.Clone(r.str())
	d.ThreadSeq = r.int()
	if d.Thread != "" {
		// The index keeps a threaded document's fields for its
		// neighbours' context.
		for _, terms := range d.Fields {
			for j := range terms {
				terms[j] = strings.Clone(terms[j])
			}
		}
	}
	return indexOp{doc: d}
}

// vecOp decodes a vector put after its tag.
func (r *frameReader) vecOp() indexOp {
	realm := strings.Clone(r.str())
	v := &sdk.RecordVector{ID: strings.Clone(r.str()), Model: strings.Clone(r.str())}
	n := r.count()
	if r.err != nil || 4*n > len(r.s) {
		r.err = errBadFrame
		return indexOp{}
	}
	v.Vector = make([]float32, n)
	for i := range v.Vector {
		v.Vector[i] = math.Float32frombits(binary.LittleEndian.Uint32([]byte(r.s[4*i : 4*i+4])))
	}
	r.s = r.s[4*n:]
	return indexOp{realm: realm, vec: v}
}

// replayLog applies to ix, which holds generation from, the log's frames
// of generations from+1 through to, in order. It answers the bytes of the
// log that hold those frames (the prefix to keep), and false when the log
// does not reach to: it is missing, torn, corrupt or has a gap. ix is
// then partly changed and must be dropped. With from == to there is
// nothing to reach, and a missing or foreign log is no failure.
//
// beyond tells that the log goes on after to. Frames are appended after
// their commit, so a log past the database means the database went back:
// it was restored from an older copy.
func replayLog(path string, store []byte, ix *memindex.Index, from, to uint64) (keep int64, ok, beyond bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, from == to, false, nil
		}
		return 0, false, false, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	want := logHead(store)
	head := make([]byte, len(want))
	if _, err := io.ReadFull(br, head); err != nil || !bytes.Equal(head, want) {
		return 0, from == to, false, nil // damaged, of an older format or of another database
	}
	keep = int64(len(want))
	at := from
	var hdr [8]byte
	var payload []byte
	for {
		// Past to, anything but a frame the snapshot holds (even a torn
		// one) was appended after a commit the database no longer holds.
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if at == to && err != io.EOF {
				return keep, true, true, nil
			}
			return keep, at == to, false, nil // the log ends (before to?)
		}
		n := binary.LittleEndian.Uint32(hdr[0:])
		if n > maxFrameBytes {
			return keep, at == to, at == to, nil
		}
		if cap(payload) < int(n) {
			payload = make([]byte, n)
		}
		payload = payload[:n]
		if _, err := io.ReadFull(br, payload); err != nil || crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(hdr[4:]) {
			return keep, at == to, at == to, nil // torn or corrupt
		}
		r := frameReader{s: string(payload)}
		gen := r.uint()
		switch {
		case r.err != nil:
			return keep, at == to, at == to, nil
		case gen <= at:
			// Written before the snapshot that holds it.
			keep += int64(len(hdr)) + int64(n)
			continue
		case at == to:
			return keep, true, true, nil
		case gen != at+1:
			return keep, false, false, nil // a gap
		}
		nops := r.count()
		ops := make([]indexOp, 0, nops)
		for range nops {
			ops = append(ops, r.op())
		}
		if r.err != nil || len(r.s) != 0 {
			return keep, false, false, nil
		}
		if err := applyOps(ix, ops); err != nil {
			return keep, false, false, nil
		}
		at = gen
		keep += int64(len(hdr)) + int64(n)
	}
}
