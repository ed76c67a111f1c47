package coordinator

// nameLetters maps each Latin letter of the BMP whose shape reads as other
// letters than the one its Unicode name spells (ẜ LATIN SMALL LETTER LONG
// S WITH DIAGONAL STROKE reads as f by its shape; ɯ LATIN SMALL LETTER
// TURNED M as w; Ꝛ LATIN CAPITAL LETTER R ROTUNDA as 2) to that letter. It
// is their second reading (bmpFoldTable.sound): a reader who knows the
// letter reads it by its name.
//
// Generated from the Unicode names of this Go's Unicode version by
// TestNameLetters, which fails while the table differs from what the names
// give; go test ./coordinator -run TestNameLetters -update rewrites it.
var nameLetters = map[rune]rune{
	0x00DF: 0x0073, // latin small letter sharp s: latin small letter s
	0x019C: 0x006D, // latin capital letter turned m: latin small letter m
	0x0265: 0x0068, // latin small letter turned h: latin small letter h
	0x026F: 0x006D, // latin small letter turned m: latin small letter m
	0x0270: 0x006D, // latin small letter turned m with long leg: latin small letter m
	0x1E9C: 0x0073, // latin small letter long s with diagonal stroke: latin small letter s
	0x1E9D: 0x0073, // latin small letter long s with high stroke: latin small letter s
	0x1E9E: 0x0073, // latin capital letter sharp s: latin small letter s
	0x2184: 0x0063, // latin small letter reversed c: latin small letter c
	0xA73E: 0x0063, // latin capital letter reversed c with dot: latin small letter c
	0xA73F: 0x0063, // latin small letter reversed c with dot: latin small letter c
	0xA75A: 0x0072, // latin capital letter r rotunda: latin small letter r
	0xA78D: 0x0068, // latin capital letter turned h: latin small letter h
	0xA7FA: 0x006D, // latin letter small capital turned m: latin small letter m
}
