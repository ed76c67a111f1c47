package coordinator

import (
	"bytes"
	"compress/flate"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
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
	fold [0x10000]uint32
	// sound is the second reading of a rune a reader may read by its
	// shape or by its sound: its transliteration's letters where those
	// differ from its fold, which reads its shape (Cyrillic Н looks like
	// H and is an n, Greek ν looks like v and is an n), or the letter a
	// mark the fold skips is (markLetters), or the letter a symbol stands
	// for in leet spelling (defang_symbols.go: a parenthesis's is itself,
	// see parenOf); 0 for a rune with one reading. Entries are encoded as
	// fold's are.
	sound [0x10000]uint32
	// look is the third reading of a letter a faux-Latin alphabet writes
	// a Latin letter with (lookLetters: Cyrillic Я is R, syllabic ᑎ is
	// N), where that differs from its fold and sound; 0 for none.
	look  [0x10000]uint32
	multi []rune
}

// units answers the folded units of a foldMulti entry.
func (t *bmpFoldTable) units(entry uint32) []rune {
	off := (entry &^ foldMulti) >> foldCountBits
	return t.multi[off : off+entry&(1<<foldCountBits-1)]
}

// entry encodes units (at least one) as a table entry, appending to multi
// when they are more than one.
func (t *bmpFoldTable) entry(units []rune) uint32 {
	if len(units) == 1 {
		return uint32(units[0])
	}
	n := min(len(units), 1<<foldCountBits-1)
	e := foldMulti | uint32(len(t.multi))<<foldCountBits | uint32(n)
	t.multi = append(t.multi, units[:n]...)
	return e
}

// asciiUnits answers the units of an entry when all are ASCII.
func (t *bmpFoldTable) asciiUnits(e uint32) ([]rune, bool) {
	if e == foldSkip || e == foldBreak {
		return nil, false
	}
	units := []rune{rune(e)}
	if e&foldMulti != 0 {
		units = t.units(e)
	}
	for _, u := range units {
		if u >= utf8.RuneSelf {
			return nil, false
		}
	}
	return units, true
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
			if len(units) == 0 {
				t.fold[r] = foldSkip
			} else {
				t.fold[r] = t.entry(units)
			}
		}
	}
	for r := rune(utf8.RuneSelf); r < 0x10000; r++ {
		shape, ok := t.asciiUnits(t.fold[r])
		if !ok {
			continue
		}
		units = units[:0]
		emitASCII(transliterate(r), func(f rune) { units = append(units, f) })
		if len(units) > 0 && string(units) != string(shape) {
			t.sound[r] = t.entry(units)
		}
	}
	// A Latin letter whose shape reads as other letters than its name
	// spells (nameLetters) is read by its name too.
	for _, r := range slices.Sorted(maps.Keys(nameLetters)) {
		units = units[:0]
		emitASCII(string(nameLetters[r]), func(f rune) { units = append(units, f) })
		if t.sound[r] == 0 && len(units) > 0 {
			t.sound[r] = t.entry(units)
		}
	}
	// A symbol that stands for a letter in leet spelling (symbolLetters)
	// is read as that letter too.
	for _, r := range slices.Sorted(maps.Keys(symbolLetters)) {
		units = units[:0]
		emitASCII(string(symbolLetters[r]), func(f rune) { units = append(units, f) })
		if shape, _ := t.asciiUnits(t.fold[r]); t.sound[r] == 0 && string(units) != string(shape) {
			t.sound[r] = t.entry(units)
		}
	}
	// So is an ASCII one (asciiSymbolLetters), and a parenthesis has
	// itself as its sound (parenOf): scan reads ASCII through asciiSounds,
	// but the entries give the symbols' compatibility forms (＄ ﹩ ＋ ⁺ （ ⁽)
	// their readings below.
	for _, c := range slices.Sorted(maps.Keys(asciiSymbolLetters)) {
		units = units[:0]
		emitASCII(string(asciiSymbolLetters[c]), func(f rune) { units = append(units, f) })
		t.sound[c] = t.entry(units)
	}
	// And an ASCII letter turned upside down (turnedLetters).
	for _, c := range slices.Sorted(maps.Keys(turnedLetters)) {
		units = units[:0]
		emitASCII(string(turnedLetters[c]), func(f rune) { units = append(units, f) })
		t.sound[c], t.sound[c-'a'+'A'] = t.entry(units), t.entry(units)
	}
	t.sound['('], t.sound[')'] = '(', ')'
	// A compatibility form of one letter (ᶹ, a superscript ʋ) or symbol
	// (fullwidth ＄, small ﹫) reads as that letter or symbol does, by its
	// sound too.
	for r := rune(utf8.RuneSelf); r < 0x10000; r++ {
		if dr, ok := compatLetter(string(r)); ok && t.sound[r] == 0 && t.sound[dr] != 0 && t.fold[r] == t.fold[dr] {
			t.sound[r] = t.sound[dr]
		}
	}
	// A mark or modifier the fold reads as nothing may be read as the
	// letter it is (markLetters): that is its second reading.
	for _, r := range slices.Sorted(maps.Keys(markLetters)) {
		letter := markLetters[r]
		units = units[:0]
		foldRune(string(letter), letter, func(f rune) { units = append(units, f) })
		if t.fold[r] == foldSkip && t.sound[r] == 0 && len(units) > 0 {
			t.sound[r] = t.entry(units)
		}
	}
	// A second letter such an alphabet writes with a character that has
	// no sound (lookLettersToo) is its sound.
	for _, r := range slices.Sorted(maps.Keys(lookLettersToo)) {
		units = units[:0]
		emitASCII(string(lookLettersToo[r]), func(f rune) { units = append(units, f) })
		if t.sound[r] == 0 {
			t.sound[r] = t.entry(units)
		}
	}
	// A letter a faux-Latin alphabet writes a Latin letter with
	// (lookLetters), or a form of one, is read as that letter too.
	for r := rune(utf8.RuneSelf); r < 0x10000; r++ {
		if breaksLine(r) || (r >= 0xD800 && r <= 0xDFFF) || skippable(r) {
			continue
		}
		letter, ok := lookLetterOf(string(r), r)
		if !ok {
			continue
		}
		units = units[:0]
		emitASCII(string(letter), func(f rune) { units = append(units, f) })
		shape, _ := t.asciiUnits(t.fold[r])
		sound, _ := t.asciiUnits(t.sound[r])
		if string(units) != string(shape) && (t.sound[r] == 0 || string(units) != string(sound)) {
			t.look[r] = t.entry(units)
		}
	}
	return t
}

// lookLetterOf answers the Latin letter a faux-Latin alphabet writes
// with r (its encoding is enc): its own entry in lookLetters, else that
// of its case folding (a Cherokee small letter, a Georgian capital), else
// that of the one letter its compatibility form is (halfwidth, bold).
func lookLetterOf(enc string, r rune) (rune, bool) {
	if l, ok := lookLetters[r]; ok {
		return l, true
	}
	if f, ok := caseFoldOf(r); ok {
		if fr := []rune(f); len(fr) == 1 {
			if l, ok := lookLetters[fr[0]]; ok {
				return l, true
			}
		}
	}
	if l, ok := lookLetters[unicode.ToLower(r)]; ok {
		return l, true
	}
	if dr, ok := compatLetter(enc); ok && dr != r {
		return lookLetterOf(string(dr), dr)
	}
	return 0, false
}

// foldTableMagic starts an encoded fold table; the digit is its version.
const foldTableMagic = "memhost-folds-3\n"

// encodeFoldTable writes the magic and the Unicode version of the Go that
// built the table (the other tables it reads are pinned by go.sum) on a
// line, then deflated: the 65,536 entries, each a little-endian uint32,
// the count of multi units and the units in UTF-8 (nearly all are ASCII
// letters: transliterations such as Hangul's), then the count of sound
// entries and each as two uint32s, its rune and its entry, then the look
// entries likewise.
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
	for _, tab := range []*[0x10000]uint32{&t.sound, &t.look} {
		var entries []byte
		count := 0
		for r, e := range tab {
			if e != 0 {
				entries = binary.LittleEndian.AppendUint32(entries, uint32(r))
				entries = binary.LittleEndian.AppendUint32(entries, e)
				count++
			}
		}
		raw = binary.LittleEndian.AppendUint32(raw, uint32(count))
		raw = append(raw, entries...)
	}
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
	raw = raw[4:]
	// The units run up to the sound entries: n runes of UTF-8.
	end := 0
	for k := uint32(0); k < n; k++ {
		if end >= len(raw) {
			return nil, "", fmt.Errorf("%w: the units are not %d runes of UTF-8", errFoldTable, n)
		}
		r, size := utf8.DecodeRune(raw[end:])
		if r == utf8.RuneError && size <= 1 {
			return nil, "", fmt.Errorf("%w: the units are not %d runes of UTF-8", errFoldTable, n)
		}
		end += size
	}
	t.multi = []rune(string(raw[:end]))
	raw = raw[end:]
	for i, tab := range []*[0x10000]uint32{&t.sound, &t.look} {
		name := [...]string{"sound", "look"}[i]
		if len(raw) < 4 {
			return nil, "", fmt.Errorf("%w: no %s entries", errFoldTable, name)
		}
		count := binary.LittleEndian.Uint32(raw)
		raw = raw[4:]
		if uint64(len(raw)) < 8*uint64(count) || (i == 1 && uint64(len(raw)) != 8*uint64(count)) {
			return nil, "", fmt.Errorf("%w: %d bytes of %s entries, want %d", errFoldTable, len(raw), name, 8*uint64(count))
		}
		for k := 0; k < 8*int(count); k += 8 {
			r, e := binary.LittleEndian.Uint32(raw[k:]), binary.LittleEndian.Uint32(raw[k+4:])
			if r >= 0x10000 || e == 0 || e == foldSkip || e == foldBreak {
				return nil, "", fmt.Errorf("%w: a bad %s entry", errFoldTable, name)
			}
			tab[r] = e
		}
		raw = raw[8*int(count):]
	}
	for _, tab := range []*[0x10000]uint32{&t.fold, &t.sound, &t.look} {
		for r, e := range tab {
			if e == foldSkip || e == foldBreak || e&foldMulti == 0 {
				continue
			}
			if off, count := (e&^foldMulti)>>foldCountBits, e&(1<<foldCountBits-1); count < 2 || uint64(off)+uint64(count) > uint64(n) {
				return nil, "", fmt.Errorf("%w: U+%04X's units lie outside them", errFoldTable, r)
			}
		}
	}
	return t, string(version), nil
}

// foldOne emits the folded form of r (its encoding is enc) read by its
// shape, as the scan's main branch reads it.
func foldOne(enc string, r rune, emit func(rune)) {
	var b readingBuf
	shape, _, _, _ := b.readings(enc, r)
	for _, f := range shape {
		emit(f)
	}
}

// readingBuf holds a character's readings, so that reading one allocates
// nothing.
type readingBuf struct{ shape, sound, look [8]rune }

// readings answers the folded units of r (its encoding is enc) read by
// its shape and, when it has a second reading (bmpFoldTable.sound), by
// its sound, and when a faux-Latin alphabet writes a Latin letter with it
// (bmpFoldTable.look), as that letter; sound and look are nil when it has
// none. breaks reports a line break, which has no reading. A character
// outside the BMP whose compatibility form is one BMP letter with a
// second or third reading (bold 𝛎 is ν, 𞀾 a modifier р, bold 𝚺 is Σ)
// reads each way as that letter does.
func (b *readingBuf) readings(enc string, r rune) (shape, sound, look []rune, breaks bool) {
	table := bmpFolds()
	if r < utf8.RuneSelf {
		shape = b.shape[:0]
		foldRune(enc, r, func(f rune) { shape = append(shape, f) })
		return shape, asciiSounds()[r], nil, false
	}
	if r > 0xFFFF {
		shape = b.shape[:0]
		foldRune(enc, r, func(f rune) { shape = append(shape, f) })
		if l, ok := lookLetters[r]; ok {
			look = b.look[:0]
			emitASCII(string(l), func(f rune) { look = append(look, f) })
			if string(look) == string(shape) {
				look = nil
			}
		}
		if isTagChar(r) {
			// Invisible where text is shown, yet read by some models: a
			// tag character reads as the ASCII it encodes and as nothing,
			// so none between a marker's letters hides it from either.
			return shape, b.sound[:0], look, false
		}
		if dr, ok := compatLetter(enc); ok {
			if table.sound[dr] != 0 {
				sound = table.unitsOf(table.sound[dr], b.sound[:0])
			}
			if look == nil && table.look[dr] != 0 {
				look = table.unitsOf(table.look[dr], b.look[:0])
			}
		}
		return shape, sound, look, false
	}
	e := table.fold[r]
	if e == foldBreak {
		return nil, nil, nil, true
	}
	shape = table.unitsOf(e, b.shape[:0])
	if alt := table.sound[r]; alt != 0 {
		sound = table.unitsOf(alt, b.sound[:0])
	}
	if alt := table.look[r]; alt != 0 {
		look = table.unitsOf(alt, b.look[:0])
	}
	return shape, sound, look, false
}

// compatLetter answers the one BMP character the compatibility
// decomposition of enc is, if it is one: the letter a compatibility form
// (ᶹ, bold 𝛎) is drawn from, whose readings it shares.
func compatLetter(enc string) (rune, bool) {
	d := norm.NFKD.PropertiesString(enc).Decomposition()
	dr, n := utf8.DecodeRune(d)
	return dr, d != nil && n == len(d) && dr < 0x10000
}

// unitsOf answers the units of entry e: dst with them appended, or the
// table's own (read only) for a foldMulti entry. A skipped rune has none,
// and answers dst as it is.
func (t *bmpFoldTable) unitsOf(e uint32, dst []rune) []rune {
	switch {
	case e == foldSkip || e == foldBreak:
		return dst
	case e&foldMulti != 0:
		return t.units(e)
	}
	return append(dst, rune(e))
}
