package coordinator

// markLetters maps each combining Latin letter and modifier letter of the
// BMP that the fold reads as nothing (a mark over the letter before it, a
// small letter beside it) to the Latin letter its Unicode name gives. It
// is their second reading (bmpFoldTable.sound): a reader may take ͫ
// (COMBINING LATIN SMALL LETTER M) for a decoration of the letter it sits
// on, or for an m, so a marker is matched both ways.
//
// Generated from the Unicode names of this Go's Unicode version by
// TestMarkLetters, which fails while the table differs from what the names
// give; go test ./coordinator -run TestMarkLetters -update rewrites it.
var markLetters = map[rune]rune{
	0x0363: 0x0061, // combining latin small letter a: latin small letter a
	0x0364: 0x0065, // combining latin small letter e: latin small letter e
	0x0365: 0x0069, // combining latin small letter i: latin small letter i
	0x0366: 0x006F, // combining latin small letter o: latin small letter o
	0x0367: 0x0075, // combining latin small letter u: latin small letter u
	0x0368: 0x0063, // combining latin small letter c: latin small letter c
	0x0369: 0x0064, // combining latin small letter d: latin small letter d
	0x036A: 0x0068, // combining latin small letter h: latin small letter h
	0x036B: 0x006D, // combining latin small letter m: latin small letter m
	0x036C: 0x0072, // combining latin small letter r: latin small letter r
	0x036D: 0x0074, // combining latin small letter t: latin small letter t
	0x036E: 0x0076, // combining latin small letter v: latin small letter v
	0x036F: 0x0078, // combining latin small letter x: latin small letter x
	0x1ACC: 0x1D79, // combining latin small letter insular g: latin small letter insular g
	0x1ACD: 0xA783, // combining latin small letter insular r: latin small letter insular r
	0x1ACE: 0xA787, // combining latin small letter insular t: latin small letter insular t
	0x1DD4: 0x00E6, // combining latin small letter ae: latin small letter ae
	0x1DD5: 0xA735, // combining latin small letter ao: latin small letter ao
	0x1DD6: 0xA739, // combining latin small letter av: latin small letter av
	0x1DD8: 0xA77A, // combining latin small letter insular d: latin small letter insular d
	0x1DD9: 0x00F0, // combining latin small letter eth: latin small letter eth
	0x1DDA: 0x0067, // combining latin small letter g: latin small letter g
	0x1DDB: 0x0262, // combining latin letter small capital g: latin letter small capital g
	0x1DDC: 0x006B, // combining latin small letter k: latin small letter k
	0x1DDD: 0x006C, // combining latin small letter l: latin small letter l
	0x1DDE: 0x029F, // combining latin letter small capital l: latin letter small capital l
	0x1DDF: 0x1D0D, // combining latin letter small capital m: latin letter small capital m
	0x1DE0: 0x006E, // combining latin small letter n: latin small letter n
	0x1DE1: 0x0274, // combining latin letter small capital n: latin letter small capital n
	0x1DE2: 0x0280, // combining latin letter small capital r: latin letter small capital r
	0x1DE3: 0xA75B, // combining latin small letter r rotunda: latin small letter r rotunda
	0x1DE4: 0x0073, // combining latin small letter s: latin small letter s
	0x1DE5: 0x017F, // combining latin small letter long s: latin small letter long s
	0x1DE6: 0x007A, // combining latin small letter z: latin small letter z
	0x1DE7: 0x0251, // combining latin small letter alpha: latin small letter alpha
	0x1DE8: 0x0062, // combining latin small letter b: latin small letter b
	0x1DE9: 0xA7B5, // combining latin small letter beta: latin small letter beta
	0x1DEB: 0x0066, // combining latin small letter f: latin small letter f
	0x1DEC: 0xAB38, // combining latin small letter l with double middle tilde: latin small letter l with double middle tilde
	0x1DEE: 0x0070, // combining latin small letter p: latin small letter p
	0x1DEF: 0x0283, // combining latin small letter esh: latin small letter esh
	0x1DF1: 0x0077, // combining latin small letter w: latin small letter w
	0x1DF2: 0x00E4, // combining latin small letter a with diaeresis: latin small letter a with diaeresis
	0x1DF3: 0x00F6, // combining latin small letter o with diaeresis: latin small letter o with diaeresis
	0x1DF4: 0x00FC, // combining latin small letter u with diaeresis: latin small letter u with diaeresis
}
