package coordinator

import (
	"bytes"
	"compress/flate"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Markers in the BMP fold table; other entries are the one folded rune,
// or foldMulti with the offset and count of the rune's units in
// bmpFoldTable.multi.
const (
	foldSkip  = 0xFFFFFFFF // skippable or a separator
	foldBreak = 0xFFFFFFFE // skippable line break
	foldMulti = 0x80000000 // | offset<<foldCountBits | count
	// foldCountBits holds the count of a multi-unit fold.
	foldCountBits = 5
)

// bmpFoldTable is the fold of every BMP rune, so that folding costs one
// lookup per rune.
type bmpFoldTable struct {
	fold  [0x10000]uint32
	multi []rune
}

// units answers the folded units of a foldMulti entry.
func (t *bmpFoldTable) units(entry uint32) []rune {
	off := (entry &^ foldMulti) >> foldCountBits
	return t.multi[off : off+entry&(1<<foldCountBits-1)]
}

// foldTableFile is buildBMPFolds' table, encoded by encodeFoldTable.
// Building it takes some 50 ms of Unicode normalisation, case folding and
// confusable lookups, which every host start and every process that
// defangs would pay. TestFoldTableFile checks the file against the build
// and rewrites it with -update (after a Go or x/text upgrade changes
// Unicode's tables).
//
//go:embed foldtable.bin
var foldTableFile []byte

// bmpFolds answers the fold table, decoded from foldTableFile on first
// use (about 5 ms: inflating it).
var bmpFolds = sync.OnceValue(func() *bmpFoldTable { return foldsFrom(foldTableFile) })

// foldsFrom decodes an encoded table, or builds one when it was written by
// a Go with other Unicode tables, so that folding is always this Go's.
func foldsFrom(file []byte) *bmpFoldTable {
	t, version, err := decodeFoldTable(file)
	if err != nil {
		panic(fmt.Sprintf("coordinator: foldtable.bin: %v (go test ./coordinator -run TestFoldTableFile -update rewrites it)", err))
	}
	if version != unicode.Version {
		return buildBMPFolds()
	}
	return t
}

// buildBMPFolds folds every BMP rune the slow way (foldRune).
func buildBMPFolds() *bmpFoldTable {
	t := &bmpFoldTable{}
	var buf [utf8.UTFMax]byte
	var units []rune
	for r := rune(0); r < 0x10000; r++ {
		switch {
		case breaksLine(r):
			t.fold[r] = foldBreak
		case r >= 0xD800 && r <= 0xDFFF, skippable(r):
			t.fold[r] = foldSkip
		default:
			n := utf8.EncodeRune(buf[:], r)
			units = units[:0]
			foldRune(string(buf[:n]), r, func(f rune) { units = append(units, f) })
			switch {
			case len(units) == 0:
				t.fold[r] = foldSkip
			case len(units) == 1:
				t.fold[r] = uint32(units[0])
			default:
				n := min(len(units), 1<<foldCountBits-1)
				t.fold[r] = foldMulti | uint32(len(t.multi))<<foldCountBits | uint32(n)
				t.multi = append(t.multi, units[:n]...)
			}
		}
	}
	return t
}

// foldTableMagic starts an encoded fold table; the digit is its version.
const foldTableMagic = "memhost-folds-1\n"

// encodeFoldTable writes the magic and the Unicode version of the Go that
// built the table (the other tables it reads are pinned by go.sum) on a
// line, then deflated: the 65,536 entries, each a little-endian uint32,
// the count of multi units and the units in UTF-8 (nearly all are ASCII
// letters: transliterations such as Hangul's).
func encodeFoldTable(t *bmpFoldTable, unicodeVersion string) []byte {
	var out bytes.Buffer
	out.WriteString(foldTableMagic)
	out.WriteString(unicodeVersion + "\n")
	w, _ := flate.NewWriter(&out, flate.BestCompression) // the level is valid
	var raw []byte
	for _, e := range t.fold {
		raw = binary.LittleEndian.AppendUint32(raw, e)
	}
	raw = binary.LittleEndian.AppendUint32(raw, uint32(len(t.multi)))
	raw = append(raw, string(t.multi)...)
	w.Write(raw) // a bytes.Buffer does not fail
	w.Close()
	return out.Bytes()
}

var errFoldTable = errors.New("not a fold table of this version")

// decodeFoldTable reads what encodeFoldTable wrote, checking that every
// multi-unit entry lies within the units, and answers the Unicode version
// it was built with.
func decodeFoldTable(b []byte) (*bmpFoldTable, string, error) {
	t := &bmpFoldTable{}
	if !bytes.HasPrefix(b, []byte(foldTableMagic)) {
		return nil, "", errFoldTable
	}
	version, rest, ok := bytes.Cut(b[len(foldTableMagic):], []byte("\n"))
	if !ok || len(version) == 0 || len(version) > 32 {
		return nil, "", fmt.Errorf("%w: no Unicode version", errFoldTable)
	}
	raw, err := io.ReadAll(flate.NewReader(bytes.NewReader(rest)))
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", errFoldTable, err)
	}
	if len(raw) < 4*(len(t.fold)+1) {
		return nil, "", fmt.Errorf("%w: %d bytes", errFoldTable, len(raw))
	}
	for r := range t.fold {
		t.fold[r] = binary.LittleEndian.Uint32(raw[4*r:])
	}
	raw = raw[4*len(t.fold):]
	n := binary.LittleEndian.Uint32(raw)
	units := raw[4:]
	if !utf8.Valid(units) || uint64(utf8.RuneCount(units)) != uint64(n) {
		return nil, "", fmt.Errorf("%w: the units are not %d runes of UTF-8", errFoldTable, n)
	}
	t.multi = []rune(string(units))
	for r, e := range t.fold {
		if e == foldSkip || e == foldBreak || e&foldMulti == 0 {
			continue
		}
		if off, count := (e&^foldMulti)>>foldCountBits, e&(1<<foldCountBits-1); count < 2 || uint64(off)+uint64(count) > uint64(n) {
			return nil, "", fmt.Errorf("%w: U+%04X's units lie outside them", errFoldTable, r)
		}
	}
	return t, string(version), nil
}

// foldOne emits the folded form of r (its encoding is enc), as foldRune
// does, from the table in the BMP.
func foldOne(enc string, r rune, emit func(rune)) {
	if r < utf8.RuneSelf || r > 0xFFFF {
		foldRune(enc, r, emit)
		return
	}
	table := bmpFolds()
	switch e := table.fold[r]; {
	case e == foldSkip || e == foldBreak:
	case e&foldMulti != 0:
		for _, u := range table.units(e) {
			emit(u)
		}
	default:
		emit(rune(e))
	}
}
