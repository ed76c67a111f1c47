package markdown

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/memhost/memhost/sdk"
)

// Vectors (sdk.VectorStore) live beside the records, one file per realm:
//
//	<root>/.memhost-vectors/<realm>.vec
//
// outside every realm directory, so appending to it wakes no watcher and
// no sweep. It is a log: a magic line, then one frame per stored vector
// (length, CRC-32C, then id, model, the digest of the record's text when
// it was embedded, dimensions and float32 components), appended and
// fsynced before PutVectors answers. At open (and reindex) the last frame
// of each id is given to the engine when its record is active and its
// text still has that digest: a record forgotten, superseded or edited by
// hand (here or while the plugin was down) simply has no vector, and the
// host's backlog (MissingVectors) embeds it again. A torn tail is cut at
// the next append; the file is rewritten with only the live frames when
// dead ones outnumber them.

const (
	vectorsDir   = ".memhost-vectors"
	vectorsExt   = ".vec"
	vectorsMagic = "memhost-markdown-vectors\x00v1\n"
)

var vecCRC = crc32.MakeTable(crc32.Castagnoli)

// vecEntry is one frame of a realm's vector file.
type vecEntry struct {
	id, model string
	digest    uint64 // textDigest of the record when embedded
	v         []float32
}

// vecFile is what the store knows of a realm's vector file: the bytes of
// whole frames (a torn tail beyond is cut before the next append) and
// how many frames they hold.
type vecFile struct {
	good   int64
	frames int
}

// textDigest is a digest of what an embedding of r was made from: its
// tags, title, description and body.
func textDigest(r *sdk.Record) uint64 {
	var b bytes.Buffer
	for _, s := range []string{strings.Join(r.Tags, "\n"), r.Title, r.Description, r.Body} {
		b.WriteString(s)
		b.WriteByte(0)
	}
	return fileDigest(b.Bytes())
}

func (s *store) vectorsPath(realm string) string {
	return filepath.Join(s.root, vectorsDir, realm+vectorsExt)
}

var _ sdk.VectorStore = (*Provider)(nil)

// PutVectors stores each vector of an active record of realm, replacing
// its previous one; an id with no active record is skipped.
func (p *Provider) PutVectors(ctx context.Context, realm string, vecs []sdk.RecordVector) error {
	st, err := p.store(ctx)
	if err != nil {
		return err
	}
	if err := st.putVectors(realm, vecs); err != nil {
		return storageError(fmt.Errorf("markdown: put vectors: %w", err))
	}
	return nil
}

// MissingVectors answers the ids of the realm's recallable records with no
// vector made by model, in id order after after.
func (p *Provider) MissingVectors(ctx context.Context, realm, model, after string, limit int) ([]string, error) {
	st, err := p.store(ctx)
	if err != nil {
		return nil, err
	}
	st.refresh()
	st.idx.RLock()
	defer st.idx.RUnlock()
	ri := st.realms[realm]
	if ri == nil {
		return []string{}, nil
	}
	return ri.ix.MissingVectors(realm, model, after, st.opts.now().UnixMilli(), limit), nil
}

func (s *store) putVectors(realm string, vecs []sdk.RecordVector) error {
	s.refresh()
	s.mu.Lock()
	defer s.mu.Unlock()
	ri := s.realms[realm]
	if ri == nil {
		return nil
	}
	var entries []vecEntry
	dims := map[string]int{}
	for i, v := range vecs {
		d := ri.get(v.ID)
		if d == nil || d.rec.Status != sdk.StatusActive {
			continue // forgotten or retired meanwhile
		}
		if v.ContentHash != "" && v.ContentHash != sdk.ContentHash(d.rec.Title, d.rec.Body) {
			continue // made from text the record no longer holds (a hand edit meanwhile)
		}
		if n, ok := dims[v.Model]; ok && n != len(v.Vector) {
			return fmt.Errorf("vectors[%d]: model %q gives %d dimensions here and %d before: %w", i, v.Model, len(v.Vector), n, sdk.ErrInvalid)
		}
		dims[v.Model] = len(v.Vector)
		if err := ri.ix.VectorFits(realm, v.ID, v.Model, len(v.Vector)); err != nil {
			return fmt.Errorf("vectors[%d]: %w: %w", i, sdk.ErrInvalid, err)
		}
		entries = append(entries, vecEntry{id: v.ID, model: v.Model, digest: textDigest(&d.rec), v: v.Vector})
	}
	if len(entries) == 0 {
		return nil
	}
	if err := s.appendVectors(realm, entries); err != nil {
		return err
	}
	s.idx.Lock()
	defer s.idx.Unlock()
	for _, e := range entries {
		if _, err := ri.ix.PutVector(realm, e.id, e.model, e.v); err != nil {
			return fmt.Errorf("index the vector of %s: %w", e.id, err)
		}
	}
	s.noteChange()
	return nil
}

// appendVectors appends entries to realm's file durably. The caller holds
// mu.
func (s *store) appendVectors(realm string, entries []vecEntry) error {
	path := s.vectorsPath(realm)
	vf := s.vecFiles[realm]
	if vf == nil {
		_, read, err := readVectors(path)
		if errors.Is(err, errBadVectors) {
			read, err = vecFile{}, s.setAsideVectors(path, err)
		}
		if err != nil {
			return err
		}
		vf = &read
		s.vecFiles[realm] = vf
	}
	if err := s.ensureDir(vectorsDir); err != nil {
		return err
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		// A link put in the file's place since it was read: never
		// written through (the frames would land in the file it leads
		// to); set aside, and the realm's vectors start a new file.
		if err := s.setAsideVectors(path, errVectorsLink); err != nil {
			return err
		}
		*vf = vecFile{}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|openNoFollow, filePerm)
	if err != nil {
		return err
	}
	defer f.Close()
	var b []byte
	if vf.good == 0 {
		b = append(b, vectorsMagic...)
	}
	for i := range entries {
		b = appendVecFrame(b, &entries[i])
	}
	// Cut a torn tail; a write that fails leaves vf as it was, so the
	// next append cuts what this one left.
	if err := f.Truncate(vf.good); err != nil {
		return err
	}
	if _, err := f.WriteAt(b, vf.good); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if vf.good == 0 {
		if err := syncDir(filepath.Dir(path)); err != nil {
			return err
		}
	}
	vf.good += int64(len(b))
	vf.frames += len(entries)
	return nil
}

func appendVecFrame(b []byte, e *vecEntry) []byte {
	var p []byte
	p = binary.AppendUvarint(p, uint64(len(e.id)))
	p = append(p, e.id...)
	p = binary.AppendUvarint(p, uint64(len(e.model)))
	p = append(p, e.model...)
	p = binary.LittleEndian.AppendUint64(p, e.digest)
	p = binary.AppendUvarint(p, uint64(len(e.v)))
	for _, x := range e.v {
		p = binary.LittleEndian.AppendUint32(p, math.Float32bits(x))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(p, vecCRC))
	return append(b, p...)
}

// setAsideVectors renames the vector file at path, which why says is not
// one this package wrote, to path+".damaged" (replacing an earlier one), so
// that the realm's vectors are written to a new file and embedded again.
func (s *store) setAsideVectors(path string, why error) error {
	aside := path + ".damaged"
	if err := os.Rename(path, aside); err != nil {
		return err
	}
	s.log.Warn("the realm's vector file is damaged: set aside, its vectors will be embedded again", "path", path, "aside", aside, "error", why)
	return syncDir(filepath.Dir(path))
}

// errBadVectors marks a vector file this package did not write.
var errBadVectors = errors.New("not a vector file")

// errVectorsLink is a symbolic link where a vector file belongs: never
// followed, read or written, but set aside as a damaged file is.
var errVectorsLink = fmt.Errorf("%w: a symbolic link, which is never followed", errBadVectors)

// readVectors reads a realm's vector file: the last entry of each id, in
// no order, and the extent of its whole frames. A missing file is empty;
// reading stops at the first torn or corrupt frame.
func readVectors(path string) (map[string]vecEntry, vecFile, error) {
	// Checked by what was opened: a link or a FIFO swapped in after a
	// check of the path would be read, or block the store.
	f, err := openForReading(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return map[string]vecEntry{}, vecFile{}, nil
	case errors.Is(err, syscall.ELOOP):
		return nil, vecFile{}, fmt.Errorf("%s: %w", path, errVectorsLink)
	case err != nil:
		return nil, vecFile{}, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, vecFile{}, err
	} else if !fi.Mode().IsRegular() {
		return nil, vecFile{}, fmt.Errorf("%s: %w", path, errBadVectors)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, vecFile{}, err
	}
	out, vf, err := parseVectors(data)
	if err != nil {
		return nil, vecFile{}, fmt.Errorf("%s: %w", path, err)
	}
	return out, vf, nil
}

// parseVectors reads a vector file's bytes (see readVectors).
func parseVectors(data []byte) (map[string]vecEntry, vecFile, error) {
	if !bytes.HasPrefix(data, []byte(vectorsMagic)) {
		if len(data) < len(vectorsMagic) && bytes.HasPrefix([]byte(vectorsMagic), data) {
			return map[string]vecEntry{}, vecFile{}, nil // torn at creation
		}
		return nil, vecFile{}, errBadVectors
	}
	out := map[string]vecEntry{}
	vf := vecFile{good: int64(len(vectorsMagic))}
	rest := data[len(vectorsMagic):]
	for len(rest) >= 8 {
		n := int(binary.LittleEndian.Uint32(rest))
		if n > len(rest)-8 {
			break
		}
		p := rest[8 : 8+n]
		if crc32.Checksum(p, vecCRC) != binary.LittleEndian.Uint32(rest[4:]) {
			break
		}
		e, ok := decodeVecFrame(p)
		if !ok {
			break
		}
		out[e.id] = e
		rest = rest[8+n:]
		vf.good += int64(8 + n)
		vf.frames++
	}
	return out, vf, nil
}

func decodeVecFrame(p []byte) (vecEntry, bool) {
	var e vecEntry
	str := func() (string, bool) {
		n, k := binary.Uvarint(p)
		if k <= 0 || n > uint64(len(p)-k) {
			return "", false
		}
		s := string(p[k : k+int(n)])
		p = p[k+int(n):]
		return s, true
	}
	var ok1, ok2 bool
	e.id, ok1 = str()
	e.model, ok2 = str()
	if !ok1 || !ok2 || len(p) < 8 {
		return e, false
	}
	e.digest = binary.LittleEndian.Uint64(p)
	p = p[8:]
	n, k := binary.Uvarint(p)
	if k <= 0 || (len(p)-k)%4 != 0 || n != uint64(len(p)-k)/4 {
		return e, false // n*4 could wrap around and pass
	}
	p = p[k:]
	e.v = make([]float32, n)
	for i := range e.v {
		e.v[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
	}
	return e, true
}

// loadVectors gives each realm of realms the vectors of its file that
// still fit its records, and rewrites a file whose dead frames outnumber
// the live ones. The caller holds mu (or is the first sweep), and idx
// when realms are the store's own.
func (s *store) loadVectors(realms map[string]*realmIndex) {
	for name, ri := range realms {
		path := s.vectorsPath(name)
		entries, vf, err := readVectors(path)
		if errors.Is(err, errBadVectors) {
			// A file this package did not write (its magic damaged) is
			// moved aside, or every later write of the realm's vectors
			// would fail on it and its backlog never clear.
			if err := s.setAsideVectors(path, err); err != nil {
				s.log.Warn("could not set the realm's damaged vector file aside", "path", path, "error", err)
				continue
			}
			s.vecFiles[name] = &vecFile{}
			continue
		}
		if err != nil {
			s.log.Warn("ignoring the realm's vectors; they will be embedded again", "path", path, "error", err)
			continue
		}
		var live []vecEntry
		for _, e := range entries {
			d := ri.get(e.id)
			if d == nil || d.rec.Status != sdk.StatusActive || textDigest(&d.rec) != e.digest {
				continue
			}
			if _, err := ri.ix.PutVector(name, e.id, e.model, e.v); err != nil {
				s.log.Warn("ignoring a stored vector", "path", path, "id", e.id, "error", err)
				continue
			}
			live = append(live, e)
		}
		s.vecFiles[name] = &vf
		if vf.frames > 2*len(live)+64 {
			if err := s.rewriteVectors(name, live); err != nil {
				s.log.Warn("could not compact the realm's vectors", "path", path, "error", err)
			}
		}
	}
}

// rewriteVectors replaces realm's file with one frame per live entry.
func (s *store) rewriteVectors(realm string, live []vecEntry) error {
	b := []byte(vectorsMagic)
	for i := range live {
		b = appendVecFrame(b, &live[i])
	}
	path := s.vectorsPath(realm)
	if err := writeSnapshotFile(path, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return err
	}
	s.vecFiles[realm] = &vecFile{good: int64(len(b)), frames: len(live)}
	return nil
}
