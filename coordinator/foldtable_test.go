package coordinator

import (
	"errors"
	"os"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The embedded table is what the slow path builds today; -update rewrites
// it when a Go or x/text upgrade moves Unicode's tables.
func TestFoldTableFile(t *testing.T) {
	built := buildBMPFolds()
	if *update {
		if err := os.WriteFile("foldtable.bin", encodeFoldTable(built, unicode.Version), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	file, version, err := decodeFoldTable(foldTableFile)
	if err != nil {
		t.Fatal(err)
	}
	if version != unicode.Version {
		// Another Go's tables: the table is built at start instead.
		t.Logf("foldtable.bin holds Unicode %s, this Go %s: rewrite it with -update", version, unicode.Version)
		return
	}
	if file.fold != built.fold || file.sound != built.sound || file.look != built.look || string(file.multi) != string(built.multi) {
		t.Fatal("foldtable.bin is not the table this build folds to; rewrite it: go test ./coordinator -run TestFoldTableFile -update")
	}
}

// The table must agree with the slow path it replaces, rune by rune
// (foldOne reads the table for every rune from U+0080 up).
func TestFoldTableMatchesSlowPath(t *testing.T) {
	var buf [utf8.UTFMax]byte
	for r := rune(0x80); r < 0x10000; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		enc := string(buf[:utf8.EncodeRune(buf[:], r)])
		var want, got []rune
		if !skippable(r) {
			foldRune(enc, r, func(f rune) { want = append(want, f) })
		}
		foldOne(enc, r, func(f rune) { got = append(got, f) })
		if string(got) != string(want) {
			t.Fatalf("U+%04X: table folds to %q, slow path to %q", r, string(got), string(want))
		}
	}
}

// foldOne reads the table in the BMP and folds the slow way elsewhere; the
// two agree on every rune a caller hands it (callers drop skippable runes).
func TestFoldOneMatchesFoldRune(t *testing.T) {
	for _, r := range []rune{'a', 'M', '0', '&', 'ß', 'ﬃ', 'а', 'Ν', 'ᴛ', '한', 'Ⅻ', '①', 0x1D400, 0x1F1E6, 0xE0041, 0x2F800, 0x10400, 0x1F600} {
		if skippable(r) {
			t.Fatalf("U+%04X is skippable: not a case for foldOne", r)
		}
		enc := string(r)
		var want, got []rune
		foldRune(enc, r, func(f rune) { want = append(want, f) })
		foldOne(enc, r, func(f rune) { got = append(got, f) })
		if string(got) != string(want) {
			t.Errorf("U+%04X: foldOne %q, foldRune %q", r, string(got), string(want))
		}
	}
}

func TestDecodeFoldTableRefuses(t *testing.T) {
	table := buildBMPFolds()
	if _, version, err := decodeFoldTable(encodeFoldTable(table, unicode.Version)); err != nil || version != unicode.Version {
		t.Fatalf("the built table: %v, Unicode %q", err, version)
	}
	var multi rune = -1
	for r, e := range table.fold {
		if e&foldMulti != 0 && e != foldSkip && e != foldBreak {
			multi = rune(r)
			break
		}
	}
	if multi < 0 {
		t.Fatal("the built table has no multi-unit entry")
	}
	outside := *table
	outside.fold[multi] = foldMulti | uint32(len(table.multi))<<foldCountBits | 2
	fewer := *table
	fewer.multi = table.multi[:len(table.multi)-1]
	good := encodeFoldTable(table, unicode.Version)
	for _, c := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"other magic", append([]byte("memhost-folds-9\n"), good[len(foldTableMagic):]...)},
		{"cut short", good[:len(good)/2]},
		{"not deflated", append([]byte(foldTableMagic), 0xff, 0xff, 0xff)},
		{"units outside", encodeFoldTable(&outside, unicode.Version)},
		{"fewer units than entries use", encodeFoldTable(&fewer, unicode.Version)},
		{"no version", append([]byte(foldTableMagic), good[len(foldTableMagic)+len(unicode.Version):]...)},
	} {
		if _, _, err := decodeFoldTable(c.in); !errors.Is(err, errFoldTable) {
			t.Errorf("%s: %v, want %v", c.name, err, errFoldTable)
		}
	}
}

// A table written with another Unicode version is not used: the table is
// built as this Go folds.
func TestFoldTableOfAnotherUnicodeIsRebuilt(t *testing.T) {
	built := buildBMPFolds()
	other := *built
	other.fold['a'] = 'b'
	if got := foldsFrom(encodeFoldTable(&other, "1.0.0")); got.fold != built.fold {
		t.Fatal("a table of Unicode 1.0.0 was used")
	}
	if got := foldsFrom(encodeFoldTable(&other, unicode.Version)); got.fold != other.fold {
		t.Fatal("a table of this Unicode was not used")
	}
}
