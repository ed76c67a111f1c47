package markdown

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/index"
	"github.com/memhost/memhost/sdk/tokenize"
)

// The index snapshot lets a large root open without reading, parsing and
// tokenizing every file: it holds each realm's records with the stamp and
// digest of the file each came from, and the engine's postings
// (index.Encode). Opening decodes it and then sweeps the tree as always,
// which compares every file's stamp (a stat, no read) with the snapshot's:
// files written or hand-edited since it was taken are read again, files
// gone are dropped, new ones added. So a stale snapshot (a crash after
// writes, edits while the plugin was down) costs only the files that
// differ, and a torn or foreign one (bad magic, bad checksum, another
// format, tokenizer or root) is ignored and the index rebuilt from the
// files. The files stay the truth; the snapshot is a cache of them.
//
// It is written beside its path and renamed over it, after writes go
// quiet and at close, and never blocks recall (it copies the index under
// the writers' lock, not the readers').

// snapshotMagic starts a snapshot file; a CRC-64 of everything before it
// ends it.
const snapshotMagic = "memhost-markdown-index\x00"

// snapshotFormat is bumped whenever the snapshot's meaning changes (the
// fields or how they are cut, the record encoding, the layout).
const snapshotFormat = 6 // 6: records keep their seq, in write order

// docChunk is how many records one gob message of a snapshot holds, so
// neither side ever buffers the whole record list as one message. A
// variable so tests can make records span many messages.
var docChunk = 4096

// DefaultSnapshot is the snapshot's file name inside the root when the
// config names none. It starts with a dot, so it is never a record or a
// realm.
const DefaultSnapshot = ".memhost-index"

// tmpSuffix is the pattern of a snapshot being written, beside it.
const tmpSuffix = ".tmp-*"

// errBadSnapshot marks a snapshot that does not describe this root.
var errBadSnapshot = errors.New("index snapshot is unusable")

// A snapshot is, after the magic, a gob stream: a snapHeader holding every
// realm's engine (index.Encode), then each realm's records in order, in
// messages of at most docChunk snapDocs; a CRC-64 of all of it ends it.
// The engines come first so they decode while the records do.
type snapHeader struct {
	Format    int
	Tokenizer int
	Weights   []float64
	Context   float64
	Root      string
	WrittenNs int64 // wall clock when taken, for racy stamps
	Realms    []snapRealm
}

type snapRealm struct {
	Name  string
	Docs  int    // records, in the messages after the header
	Index []byte // index.Encode of the realm's engine
}

// snapCapture is a snapshot's content, copied out of the store.
type snapCapture struct {
	head snapHeader
	docs [][]snapDoc // per realm of head.Realms
}

type snapDoc struct {
	Mtime, Size int64
	Ino         uint64
	Digest      uint64
	Racy        bool
	Seq         uint64 // doc.seq: the write order, which the files do not hold
	Rec         sdk.Record
}

// captureSnapshot copies the index's state for encoding. The caller holds
// mu, under which every change of the index happens, so the records and
// postings it copies agree; readers are not held up (idx is not taken).
func (s *store) captureSnapshot() (*snapCapture, error) {
	c := &snapCapture{head: snapHeader{Format: snapshotFormat, Tokenizer: tokenize.Version, Weights: fieldWeights[:],
		Context: index.ContextWeight, Root: s.root, WrittenNs: time.Now().UnixNano()}}
	names := make([]string, 0, len(s.realms))
	for name := range s.realms {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		ri := s.realms[name]
		docs := make([]snapDoc, 0, len(ri.byID))
		for _, d := range ri.byID {
			docs = append(docs, snapDoc{Mtime: d.stamp.mtime, Size: d.stamp.size, Ino: d.stamp.ino,
				Digest: d.digest, Racy: d.racy, Seq: d.seq, Rec: d.rec})
		}
		var b bytes.Buffer
		if err := ri.ix.Encode(&b); err != nil {
			return nil, err
		}
		c.head.Realms = append(c.head.Realms, snapRealm{Name: name, Docs: len(docs), Index: b.Bytes()})
		c.docs = append(c.docs, docs)
	}
	return c, nil
}

// encodeSnapshot writes c as a snapshot file's bytes to w. Records are
// copied values whose slices are never changed in place, so this needs no
// lock.
func encodeSnapshot(w io.Writer, c *snapCapture) error {
	sum := crc64.New(digestTable)
	mw := io.MultiWriter(w, sum)
	if _, err := io.WriteString(mw, snapshotMagic); err != nil {
		return err
	}
	enc := gob.NewEncoder(mw)
	err := enc.Encode(&c.head)
	for _, docs := range c.docs {
		for len(docs) > 0 && err == nil {
			n := min(len(docs), docChunk)
			err = enc.Encode(docs[:n])
			docs = docs[n:]
		}
	}
	if err != nil {
		return fmt.Errorf("encode index snapshot: %w", err)
	}
	_, err = w.Write(binary.LittleEndian.AppendUint64(nil, sum.Sum64()))
	return err
}

// decodeSnapshot answers the realms a snapshot of root holds.
func decodeSnapshot(data []byte, root string) (map[string]*realmIndex, error) {
	n := len(data) - 8
	if n < len(snapshotMagic) || string(data[:len(snapshotMagic)]) != snapshotMagic {
		return nil, fmt.Errorf("%w: not a snapshot", errBadSnapshot)
	}
	if crc64.Checksum(data[:n], digestTable) != binary.LittleEndian.Uint64(data[n:]) {
		return nil, fmt.Errorf("%w: checksum mismatch (torn or damaged)", errBadSnapshot)
	}
	dec := gob.NewDecoder(bytes.NewReader(data[len(snapshotMagic):n]))
	var h snapHeader
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("%w: %v", errBadSnapshot, err)
	}
	switch {
	case h.Format != snapshotFormat:
		return nil, fmt.Errorf("%w: format %d, want %d", errBadSnapshot, h.Format, snapshotFormat)
	case h.Tokenizer != tokenize.Version:
		return nil, fmt.Errorf("%w: from tokenizer version %d, this is %d", errBadSnapshot, h.Tokenizer, tokenize.Version)
	case !slices.Equal(h.Weights, fieldWeights[:]) || h.Context != index.ContextWeight:
		return nil, fmt.Errorf("%w: other field weights", errBadSnapshot)
	case h.Root != root:
		return nil, fmt.Errorf("%w: taken of root %s", errBadSnapshot, h.Root)
	}
	// The engines decode on other cores while the records decode here.
	engines := make([]*index.Index, len(h.Realms))
	errs := make([]error, len(h.Realms))
	var wg sync.WaitGroup
	for i := range h.Realms {
		wg.Go(func() { engines[i], errs[i] = index.DecodeBytes(h.Realms[i].Index) })
	}
	realms, err := decodeDocs(dec, &h)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	for i, sr := range h.Realms {
		if errs[i] != nil {
			return nil, fmt.Errorf("%w: realm %s: %v", errBadSnapshot, sr.Name, errs[i])
		}
		ri, ix := realms[sr.Name], engines[i]
		ri.ix = ix
		active := 0
		for id, d := range ri.byID {
			if d.rec.Status != sdk.StatusActive {
				continue
			}
			if !ix.Has(sr.Name, id) {
				return nil, fmt.Errorf("%w: realm %s: record %s is not in the index", errBadSnapshot, sr.Name, id)
			}
			active++
		}
		if ix.Len() != active {
			return nil, fmt.Errorf("%w: realm %s: %d indexed, %d active records", errBadSnapshot, sr.Name, ix.Len(), active)
		}
	}
	return realms, nil
}

// decodeDocs reads each realm's records, the messages after the header.
// The realms it answers have no engine yet.
func decodeDocs(dec *gob.Decoder, h *snapHeader) (map[string]*realmIndex, error) {
	racyAfter := h.WrittenNs - int64(racyWindow)
	realms := make(map[string]*realmIndex, len(h.Realms))
	for _, sr := range h.Realms {
		if realms[sr.Name] != nil || sdk.ValidateRealm(sr.Name) != nil || sr.Docs < 0 {
			return nil, fmt.Errorf("%w: bad realm %q", errBadSnapshot, sr.Name)
		}
		ri := newRealmIndexOn(sr.Name, nil)
		ri.byID = make(map[string]*doc, sr.Docs)
		ri.byContent = make(map[contentKey][]*doc, sr.Docs)
		for left := sr.Docs; left > 0; {
			// A fresh slice each time: gob leaves zero fields alone and
			// reuses what it finds, which would bleed into the records kept.
			var chunk []snapDoc
			if err := dec.Decode(&chunk); err != nil {
				return nil, fmt.Errorf("%w: realm %s: %v", errBadSnapshot, sr.Name, err)
			}
			if len(chunk) == 0 || len(chunk) > left {
				return nil, fmt.Errorf("%w: realm %s: records do not add up", errBadSnapshot, sr.Name)
			}
			left -= len(chunk)
			for i := range chunk {
				sd := &chunk[i]
				r := &sd.Rec
				if r.Realm != sr.Name || checkKey(fileKey{r.Realm, r.Scope, r.ID}) != nil || ri.byID[r.ID] != nil || sd.Seq == 0 {
					return nil, fmt.Errorf("%w: realm %s: bad record %q", errBadSnapshot, sr.Name, r.ID)
				}
				ri.link(&doc{rec: *r, stamp: fileStamp{mtime: sd.Mtime, size: sd.Size, ino: sd.Ino}, digest: sd.Digest,
					racy: sd.Racy || sd.Mtime >= racyAfter, seq: sd.Seq})
				ri.lastSeq = max(ri.lastSeq, sd.Seq)
			}
		}
		realms[sr.Name] = ri
	}
	return realms, nil
}

// loadSnapshot fills s.realms from the snapshot file, if one is usable;
// it reports whether it did.
func (s *store) loadSnapshot() bool {
	if s.snapPath == "" {
		return false
	}
	if left, err := filepath.Glob(s.snapPath + tmpSuffix); err == nil { // a crash mid-write leaves them
		for _, p := range left {
			os.Remove(p)
		}
	}
	data, err := os.ReadFile(s.snapPath)
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err == nil {
		var realms map[string]*realmIndex
		if realms, err = decodeSnapshot(data, s.root); err == nil {
			s.realms = realms
			return true
		}
	}
	s.log.Info("rebuilding the recall index from the files", "snapshot", s.snapPath, "reason", err.Error())
	return false
}

// clusterShare is the least share of a realm's documents that must have
// arrived since its last renumbering in scope order for a snapshot to
// renumber them: each renumbering leaves one more run of scope order, and
// costs about what encoding those documents does.
const clusterShare = 1.0 / 16

// saveSnapshot writes the index when it changed since the last snapshot.
// Writes wait while it copies the index; recall does not.
func (s *store) saveSnapshot() error {
	if s.snapPath == "" {
		return nil
	}
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	s.mu.Lock()
	gen := s.changes.Load() // every change counted here is in the copy
	if gen == s.snapGen {
		s.mu.Unlock()
		return nil
	}
	// Renumber each realm's documents written since in scope order
	// (index.Cluster) while writes wait here anyway; the snapshot keeps
	// the order.
	for _, ri := range s.realms {
		ri.ix.Cluster(clusterShare)
	}
	c, err := s.captureSnapshot()
	s.mu.Unlock()
	if err == nil {
		err = writeSnapshotFile(s.snapPath, func(w io.Writer) error { return encodeSnapshot(w, c) })
	}
	// A failure is not retried until the next change, so a read-only
	// disk costs one attempt per change, not one per tick.
	s.snapGen = gen
	if err != nil {
		return fmt.Errorf("markdown: %w", err)
	}
	return nil
}

// writeSnapshotFile replaces path with what write writes, streamed, so a
// crash leaves the old snapshot or the new one (a torn one would fail its
// checksum anyway).
func writeSnapshotFile(path string, write func(io.Writer) error) error {
	// A name of its own: two roots may name one snapshot_path.
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+tmpSuffix)
	if err != nil {
		return fmt.Errorf("write index snapshot %s: %w", path, sdk.FileProblem(err))
	}
	tmp := f.Name()
	err = f.Chmod(filePerm)
	if err == nil {
		bw := bufio.NewWriterSize(f, 1<<20)
		if err = write(bw); err == nil {
			err = bw.Flush()
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write index snapshot %s: %w", path, sdk.FileProblem(err))
	}
	return syncDir(filepath.Dir(path))
}
