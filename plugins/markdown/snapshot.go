package markdown

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/crc64"
	"os"
	"path/filepath"
	"slices"
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
// fields or how they are cut, the record encoding).
const snapshotFormat = 1

// DefaultSnapshot is the snapshot's file name inside the root when the
// config names none. It starts with a dot, so it is never a record or a
// realm.
const DefaultSnapshot = ".memhost-index"

// tmpSuffix is the pattern of a snapshot being written, beside it.
const tmpSuffix = ".tmp-*"

// errBadSnapshot marks a snapshot that does not describe this root.
var errBadSnapshot = errors.New("index snapshot is unusable")

type snapFile struct {
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
	Docs  []snapDoc
	Index []byte // index.Encode of the realm's engine
}

type snapDoc struct {
	Mtime, Size int64
	Ino         uint64
	Digest      uint64
	Racy        bool
	Rec         sdk.Record
}

// captureSnapshot copies the index's state for encoding. The caller holds
// mu, under which every change of the index happens, so the records and
// postings it copies agree; readers are not held up (idx is not taken).
func (s *store) captureSnapshot() (*snapFile, error) {
	f := &snapFile{Format: snapshotFormat, Tokenizer: tokenize.Version, Weights: fieldWeights[:],
		Context: index.ContextWeight, Root: s.root, WrittenNs: time.Now().UnixNano()}
	names := make([]string, 0, len(s.realms))
	for name := range s.realms {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		ri := s.realms[name]
		sr := snapRealm{Name: name, Docs: make([]snapDoc, 0, len(ri.byID))}
		for _, d := range ri.byID {
			sr.Docs = append(sr.Docs, snapDoc{Mtime: d.stamp.mtime, Size: d.stamp.size, Ino: d.stamp.ino,
				Digest: d.digest, Racy: d.racy, Rec: d.rec})
		}
		var b bytes.Buffer
		if err := ri.ix.Encode(&b); err != nil {
			return nil, err
		}
		sr.Index = b.Bytes()
		f.Realms = append(f.Realms, sr)
	}
	return f, nil
}

// encodeSnapshot lays f out as a snapshot file's bytes. Records are copied
// values whose slices are never changed in place, so this needs no lock.
func encodeSnapshot(f *snapFile) ([]byte, error) {
	var out bytes.Buffer
	out.WriteString(snapshotMagic)
	if err := gob.NewEncoder(&out).Encode(f); err != nil {
		return nil, fmt.Errorf("encode index snapshot: %w", err)
	}
	sum := crc64.Checksum(out.Bytes(), digestTable)
	out.Write(binary.LittleEndian.AppendUint64(nil, sum))
	return out.Bytes(), nil
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
	var f snapFile
	if err := gob.NewDecoder(bytes.NewReader(data[len(snapshotMagic):n])).Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %v", errBadSnapshot, err)
	}
	switch {
	case f.Format != snapshotFormat:
		return nil, fmt.Errorf("%w: format %d, want %d", errBadSnapshot, f.Format, snapshotFormat)
	case f.Tokenizer != tokenize.Version:
		return nil, fmt.Errorf("%w: from tokenizer version %d, this is %d", errBadSnapshot, f.Tokenizer, tokenize.Version)
	case !slices.Equal(f.Weights, fieldWeights[:]) || f.Context != index.ContextWeight:
		return nil, fmt.Errorf("%w: other field weights", errBadSnapshot)
	case f.Root != root:
		return nil, fmt.Errorf("%w: taken of root %s", errBadSnapshot, f.Root)
	}
	racyAfter := f.WrittenNs - int64(racyWindow)
	realms := make(map[string]*realmIndex, len(f.Realms))
	for _, sr := range f.Realms {
		ix, err := index.Decode(bytes.NewReader(sr.Index))
		if err != nil {
			return nil, fmt.Errorf("%w: realm %s: %v", errBadSnapshot, sr.Name, err)
		}
		ri := newRealmIndexOn(sr.Name, ix)
		active := 0
		for i := range sr.Docs {
			sd := &sr.Docs[i]
			r := &sd.Rec
			if r.Realm != sr.Name || checkKey(fileKey{r.Realm, r.Scope, r.ID}) != nil || ri.byID[r.ID] != nil {
				return nil, fmt.Errorf("%w: realm %s: bad record %q", errBadSnapshot, sr.Name, r.ID)
			}
			if r.Status == sdk.StatusActive {
				if !ix.Has(sr.Name, r.ID) {
					return nil, fmt.Errorf("%w: realm %s: record %s is not in the index", errBadSnapshot, sr.Name, r.ID)
				}
				active++
			}
			d := &doc{rec: *r, stamp: fileStamp{mtime: sd.Mtime, size: sd.Size, ino: sd.Ino}, digest: sd.Digest,
				racy: sd.Racy || sd.Mtime >= racyAfter}
			ri.link(d)
		}
		if ix.Len() != active {
			return nil, fmt.Errorf("%w: realm %s: %d indexed, %d active records", errBadSnapshot, sr.Name, ix.Len(), active)
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
	f, err := s.captureSnapshot()
	s.mu.Unlock()
	var data []byte
	if err == nil {
		data, err = encodeSnapshot(f)
	}
	if err == nil {
		err = writeSnapshotFile(s.snapPath, data)
	}
	// A failure is not retried until the next change, so a read-only
	// disk costs one attempt per change, not one per tick.
	s.snapGen = gen
	if err != nil {
		return fmt.Errorf("markdown: %w", err)
	}
	return nil
}

// writeSnapshotFile replaces path with data, so a crash leaves the old
// snapshot or the new one (a torn one would fail its checksum anyway).
func writeSnapshotFile(path string, data []byte) error {
	// A name of its own: two stores may share a root for a moment (a
	// reconfigure, a test's second look).
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+tmpSuffix)
	if err != nil {
		return fmt.Errorf("write index snapshot: %w", err)
	}
	tmp := f.Name()
	err = f.Chmod(filePerm)
	if err == nil {
		_, err = f.Write(data)
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
		return fmt.Errorf("write index snapshot %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}
