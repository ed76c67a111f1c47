package coordinator

// Faux-Latin ("fancy text") alphabets write the Latin letters with
// letters of other scripts chosen for their looks: Cyrillic Я for R and И
// for N, Greek Σ and Ξ for E, Canadian syllabics (ᗩ ᗴ ᑎ ᔕ), Thai and
// Hebrew letters (๓ ภ ค ק), Ethiopic, Cherokee, Yi, Armenian and Georgian
// letters, Old Italic and Gothic, runes, halfwidth katakana and kanji
// (乇 刀 尺), currency signs (₳ ₦ ₮), turned and IPA letters (ʍ ɔ ɟ ƃ) and
// the turned capitals of upside-down text (∀ Ǝ ⊥). A model reads such a
// word as the Latin one, yet the tables read each of these letters by its
// sound (Я is "ia", ᑎ "ti", ภ "ph") or not at all (𐌌), since UTS #39
// gives it no ASCII prototype. lookLetters is, for each of them, the Latin
// letter these alphabets write with it: its third reading
// (bmpFoldTable.look), beside its shape and its sound, so that a marker
// spelled in any mix of them is matched letter by letter. A form of one
// (halfwidth, mathematical, another case whose case folding gives it)
// reads as it does, unless it has an entry of its own (Greek σ is o, its
// capital Σ is E). Runes are read by the Latin letter each stands for
// (ᛖ is e, though it is drawn like M), as the rune alphabets write them.
//
// The table is written by hand, alphabet by alphabet, from what the
// generators map a to z to: no Unicode data says which letter a syllabic
// or a rune is drawn like. An entry adds a reading and removes none, so
// it can only make a marker match where none did. A false hit needs a run
// of letters spelling a whole marker word, each of which holds an e: the
// letters read as e here are rare in running text of their scripts (乇,
// ቿ, ᗴ) but for Ukrainian є and Greek ε, Σ, Ξ, and no Ukrainian or Greek
// word spells a marker's word, so text in those scripts reads as it did
// (TestFauxLatinBenignText).
var lookLetters = map[rune]rune{
	// Canadian syllabics.
	'ᗩ': 'a', 'ᗅ': 'a', 'ᐱ': 'a', 'ᗷ': 'b', 'ᑲ': 'b', 'ᖯ': 'b', 'ᑕ': 'c', 'ᑢ': 'c', 'ᑤ': 'c',
	'ᗪ': 'd', 'ᗞ': 'd', 'ᕲ': 'd', 'ᑯ': 'd', 'ᗡ': 'd', 'ᗴ': 'e', 'ᘿ': 'e', 'ᕮ': 'e', 'ᗕ': 'e',
	'ᖴ': 'f', 'ᘜ': 'g', 'ᕼ': 'h', 'ᓰ': 'i', 'ᒍ': 'j', 'ᒚ': 'j', 'ᒪ': 'l', 'ᗰ': 'm', 'ᘻ': 'm',
	'ᙏ': 'm', 'ᑎ': 'n', 'ᘉ': 'n', 'ᓍ': 'o', 'ᗝ': 'o', 'ᑭ': 'p', 'ᕵ': 'p', 'ᖘ': 'p', 'ᑫ': 'q',
	'ᕴ': 'q', 'ᖇ': 'r', 'ᔕ': 's', 'ᔑ': 's', 'ᖶ': 't', 'ᑌ': 'u', 'ᑘ': 'u', 'ᐯ': 'v', 'ᐺ': 'v',
	'ᗯ': 'w', 'ᘺ': 'w', '᙭': 'x', 'ᖻ': 'y', 'ᘔ': 'z', 'ᗱ': 'z', 'ᕓ': 'v',
	// Cyrillic drawn as other Latin letters than it sounds like; a
	// capital reads as its small letter unless listed.
	'Д': 'a', 'д': 'a', 'в': 'b', 'н': 'h', 'Ѧ': 'a', 'ѧ': 'a', 'б': 'b', 'ъ': 'b', 'ь': 'b', 'ѣ': 'b', 'Ѣ': 'b',
	'є': 'e', 'ҽ': 'e', 'ҿ': 'e', 'ә': 'e', 'ԑ': 'e', 'э': 'e', 'ѐ': 'e', 'ё': 'e',
	'ғ': 'f', 'ӻ': 'f', 'ԍ': 'g', 'ђ': 'h', 'ћ': 'h', 'ң': 'h', 'ӊ': 'h', 'ї': 'i', 'і': 'i',
	'ҝ': 'k', 'ҟ': 'k', 'ҡ': 'k', 'ӄ': 'k', 'қ': 'k', 'ӎ': 'm', 'и': 'n', 'й': 'n', 'ѝ': 'n',
	'п': 'n', 'ф': 'o', 'ѳ': 'o', 'ѻ': 'o', 'ө': 'o', 'я': 'r', 'г': 'r', 'ѓ': 'r', 'ґ': 'r',
	'ц': 'u', 'ѵ': 'v', 'ш': 'w', 'щ': 'w', 'ѡ': 'w', 'ѿ': 'w', 'ѽ': 'w', 'ж': 'x', 'ҳ': 'x',
	'ӽ': 'x', 'ӿ': 'x', 'ч': 'y', 'ұ': 'y', 'ү': 'y',
	// Greek.
	'Λ': 'a', 'λ': 'a', 'Δ': 'a', 'δ': 'd', 'Σ': 'e', 'Ξ': 'e', 'ξ': 'e', 'ε': 'e', 'ϵ': 'e',
	'Π': 'n', 'π': 'n', 'Ͷ': 'n', 'ͷ': 'n', 'η': 'n', 'Θ': 'o', 'θ': 'o', 'Φ': 'o', 'φ': 'o',
	'σ': 'o', 'Ω': 'o', 'ς': 'c', 'Ͻ': 'c', 'ͻ': 'c', 'μ': 'u', 'ω': 'w', 'ϖ': 'w', 'Ͳ': 't',
	'ͳ': 't', 'τ': 't', 'ϰ': 'k', 'κ': 'k', 'Ϙ': 'q', 'ϙ': 'q', 'Ͱ': 'h', 'ͱ': 'h', 'ϸ': 'p',
	// Thai, Hebrew and the others of the "Thai" alphabet (ค๒ς๔єŦﻮђเןкɭ๓ภ๏קợгรՇยשฬאץչ).
	'ค': 'a', '๒': 'b', '๔': 'd', 'Ŧ': 'f', 'ﻮ': 'g', 'เ': 'i', 'ן': 'j', 'ɭ': 'l', '๓': 'm',
	'ภ': 'n', '๏': 'o', 'ק': 'p', 'ợ': 'q', 'ร': 's', 'Շ': 't', 'ย': 'u', 'ש': 'v', 'ฬ': 'w',
	'א': 'x', 'ץ': 'y', 'չ': 'z',
	// Ethiopic.
	'ል': 'a', 'ጌ': 'b', 'ር': 'c', 'ዕ': 'd', 'ቿ': 'e', 'ቻ': 'f', 'ኗ': 'g', 'ዘ': 'h', 'ጎ': 'i',
	'ጋ': 'j', 'ጕ': 'k', 'ረ': 'l', 'ጠ': 'm', 'ክ': 'n', 'ዐ': 'o', 'የ': 'p', 'ዒ': 'q', 'ዪ': 'r',
	'ነ': 's', 'ፕ': 't', 'ሁ': 'u', 'ሀ': 'v', 'ሠ': 'w', 'ሸ': 'x', 'ሃ': 'y', 'ጊ': 'z', 'ፈ': 'c',
	'ጀ': 'x', 'ፚ': 'z',
	// Cherokee (its small letters fold to these).
	'Ꮧ': 'a', 'Ᏸ': 'b', 'Ꮄ': 'd', 'Ꮛ': 'e', 'Ꭶ': 'f', 'Ꮆ': 'g', 'Ꮒ': 'h', 'Ꭵ': 'i', 'Ꮰ': 'j',
	'Ꮶ': 'k', 'Ꮭ': 'l', 'Ꮇ': 'm', 'Ꮑ': 'n', 'Ꭷ': 'o', 'Ꭾ': 'p', 'Ꭴ': 'q', 'Ꮢ': 'r', 'Ꮥ': 's',
	'Ꮦ': 't', 'Ꮼ': 'u', 'Ꮙ': 'v', 'Ꮗ': 'w', 'Ꭹ': 'y',
	// Yi syllables and radicals.
	'ꍏ': 'a', 'ꌃ': 'b', 'ꏳ': 'c', 'ꀷ': 'd', 'ꏂ': 'e', 'ꎇ': 'f', 'ꁅ': 'g', 'ꀍ': 'h', 'ꀤ': 'i',
	'꒻': 'j', 'ꀘ': 'k', '꒒': 'l', 'ꎭ': 'm', 'ꈤ': 'n', 'ꂦ': 'o', 'ꆰ': 'q', 'ꋪ': 'r', 'ꌚ': 's',
	'꓄': 't', 'ꀎ': 'u', '꒦': 'v', 'ꅐ': 'w', 'ꉧ': 'x', 'ꌩ': 'y', 'ꁴ': 'z',
	'ꋫ': 'a', 'ꃃ': 'b', 'ꏸ': 'c', 'ꁕ': 'd', 'ꍟ': 'e', 'ꄘ': 'f', 'ꁍ': 'g', 'ꑛ': 'h', 'ꂑ': 'i',
	'ꀭ': 'j', 'ꀗ': 'k', 'ꁒ': 'm', 'ꁹ': 'n', 'ꆂ': 'o', 'ꉣ': 'p', 'ꁸ': 'q', '꒓': 'r', '꓅': 't',
	'ꐇ': 'u', 'ꏝ': 'v', 'ꇓ': 'x', 'ꐟ': 'y',
	// Armenian and Georgian.
	'ա': 'w', 'ղ': 'n', 'ռ': 'n', 'ո': 'n', 'Ո': 'n', 'ս': 'u', 'մ': 'u', 'օ': 'o', 'ք': 'p',
	'զ': 'q', 'ց': 'g', 'հ': 'h', 'է': 't', 'ժ': 'd', 'յ': 'j', 'լ': 'l', 'ի': 'h', 'ֆ': 's',
	'Ս': 'u', 'Օ': 'o', 'Լ': 'l', 'Տ': 's', 'Ք': 'p', 'Զ': 'q',
	'ც': 'b', 'ძ': 'd', 'ყ': 'y', 'ჩ': 'h', 'ო': 'm',
	// Others these alphabets borrow: a Malayalam digit, a Tibetan
	// letter, a Cherokee small letter, a Carian letter.
	'൬': 'm', 'ཞ': 'r', 'Ᏽ': 'g', 0x102C5: 'h',
	// Tifinagh drawn like Latin letters.
	'ⵔ': 'o', 'ⵙ': 'o', 'ⵣ': 'x', 'ⴽ': 'k',
	// Runes, by the letter each stands for.
	'ᚠ': 'f', 'ᚡ': 'v', 'ᚢ': 'u', 'ᚣ': 'y', 'ᚤ': 'y', 'ᚥ': 'w', 'ᚨ': 'a', 'ᚩ': 'o', 'ᚪ': 'a',
	'ᚫ': 'a', 'ᚬ': 'o', 'ᚭ': 'o', 'ᚮ': 'o', 'ᚯ': 'o', 'ᚰ': 'o', 'ᚱ': 'r', 'ᚲ': 'k', 'ᚳ': 'c',
	'ᚴ': 'k', 'ᚵ': 'g', 'ᚷ': 'g', 'ᚸ': 'g', 'ᚹ': 'w', 'ᚺ': 'h', 'ᚻ': 'h', 'ᚼ': 'h', 'ᚽ': 'h',
	'ᚾ': 'n', 'ᚿ': 'n', 'ᛀ': 'n', 'ᛁ': 'i', 'ᛂ': 'e', 'ᛃ': 'j', 'ᛄ': 'j', 'ᛅ': 'a', 'ᛆ': 'a',
	'ᛈ': 'p', 'ᛉ': 'z', 'ᛊ': 's', 'ᛋ': 's', 'ᛌ': 's', 'ᛍ': 'c', 'ᛎ': 'z', 'ᛏ': 't', 'ᛐ': 't',
	'ᛑ': 'd', 'ᛒ': 'b', 'ᛓ': 'b', 'ᛔ': 'p', 'ᛕ': 'p', 'ᛖ': 'e', 'ᛗ': 'm', 'ᛘ': 'm', 'ᛙ': 'm',
	'ᛚ': 'l', 'ᛛ': 'l', 'ᛞ': 'd', 'ᛟ': 'o', 'ᛣ': 'k', 'ᛤ': 'k', 'ᛦ': 'y', 'ᛧ': 'y', 'ᛨ': 'y',
	'ᛩ': 'q', 'ᛪ': 'x',
	// Halfwidth katakana, kana and kanji of the "Japanese" alphabet
	// (ﾑ乃ᄃり乇ｷムんﾉﾌズﾚﾶ刀のｱゐ尺丂ｲひ√Wﾒﾘ乙); the full-width katakana
	// keep their sound.
	'ﾑ': 'a', '乃': 'b', 'ᄃ': 'c', 'り': 'd', '乇': 'e', 'ｷ': 'f', 'ム': 'g', 'ん': 'h', 'ﾉ': 'i',
	'ﾌ': 'j', 'ズ': 'k', 'ﾚ': 'l', 'ﾶ': 'm', '刀': 'n', 'の': 'o', 'ｱ': 'p', 'ゐ': 'q', '尺': 'r',
	'丂': 's', 'ｲ': 't', 'ひ': 'u', '√': 'v', 'ﾒ': 'x', 'ﾘ': 'y', '乙': 'z',
	// Currency signs and other symbols drawn as letters.
	'₳': 'a', '฿': 'b', '₿': 'b', '₵': 'c', '¢': 'c', '₡': 'c', 'Ɇ': 'e', 'ɇ': 'e', '₣': 'f',
	'₲': 'g', 'Ⱨ': 'h', 'ⱨ': 'h', '₭': 'k', 'Ⱡ': 'l', 'ⱡ': 'l', 'ł': 'l', 'Ł': 'l', '₥': 'm',
	'₦': 'n', '₱': 'p', '₽': 'p', 'Ɽ': 'r', '₴': 's', '₮': 't', '₸': 't', 'Ʉ': 'u', '₩': 'w',
	'Ӿ': 'x', '×': 'x', 'Ɏ': 'y', 'ɏ': 'y', '¥': 'y', 'Ⱬ': 'z', 'ⱬ': 'z', '∂': 'd', 'ℓ': 'l',
	'∏': 'n', '∐': 'u', '∩': 'n', '∪': 'u', '⋂': 'n', '⋃': 'u', '∨': 'v', '⊂': 'c', '⊥': 't',
	'⊤': 't', '℮': 'e', '℞': 'r', '℟': 'r',
	// Turned and IPA letters, and the turned capitals of upside-down text.
	'ɐ': 'a', 'ɒ': 'a', 'ɑ': 'a', '∀': 'a', 'ꓯ': 'a', 'ꓭ': 'b', 'ɓ': 'b', 'ɔ': 'c', 'Ɔ': 'c',
	'ꓛ': 'c', 'ƈ': 'c', 'ꓷ': 'd', 'ɗ': 'd', 'ɖ': 'd', 'ǝ': 'e', 'Ǝ': 'e', 'ə': 'e', 'ɘ': 'e',
	'ɜ': 'e', 'ɛ': 'e', 'ꓱ': 'e', 'ɟ': 'f', 'ʄ': 'f', 'Ⅎ': 'f', 'ꓞ': 'f', 'ꓩ': 'f', 'ƃ': 'g',
	'ɠ': 'g', '⅁': 'g', 'ꓨ': 'g', 'ɥ': 'h', 'ɦ': 'h', 'ɧ': 'h', 'ᴉ': 'i', 'ɨ': 'i', 'ʝ': 'j',
	'ʞ': 'k', 'ƙ': 'k', 'ꓘ': 'k', '⅂': 'l', '⅃': 'l', 'ꓶ': 'l', 'ʅ': 'l', 'ɯ': 'm', 'ʍ': 'm',
	'ɱ': 'm', 'ŋ': 'n', 'ɲ': 'n', 'ɳ': 'n', 'Ԁ': 'p', 'ꓒ': 'p', 'ɹ': 'r', 'ɾ': 'r', 'ɿ': 'r',
	'ʁ': 'r', 'ɽ': 'r', 'ɻ': 'r', 'ꓤ': 'r', 'ʂ': 's', 'ʇ': 't', 'ꓕ': 't', 'ƭ': 't', 'ɬ': 't',
	'ʈ': 't', 'ꓵ': 'u', 'ʉ': 'u', 'ʌ': 'v', 'ʋ': 'v', 'ʎ': 'y', '⅄': 'y', 'ʐ': 'z', 'ʑ': 'z',
	// Old Italic and Gothic.
	0x10300: 'a', 0x10301: 'b', 0x10302: 'c', 0x10303: 'd', 0x10304: 'e', 0x10305: 'f',
	0x10306: 'z', 0x10307: 'h', 0x10309: 'i', 0x1030A: 'k', 0x1030B: 'l', 0x1030C: 'm',
	0x1030D: 'n', 0x1030F: 'o', 0x10310: 'p', 0x10311: 'm', 0x10312: 'q', 0x10313: 'r',
	0x10314: 's', 0x10315: 't', 0x10316: 'u', 0x10317: 'x', 0x10319: 'y', 0x1031A: 'f',
	0x1031B: 'r', 0x1031D: 'i', 0x10320: 'i', 0x10321: 'v', 0x10322: 'x',
	0x10330: 'a', 0x10331: 'b', 0x10332: 'g', 0x10333: 'd', 0x10334: 'e', 0x10335: 'q',
	0x10336: 'z', 0x10337: 'h', 0x10339: 'i', 0x1033A: 'k', 0x1033B: 'l', 0x1033C: 'm',
	0x1033D: 'n', 0x1033E: 'j', 0x1033F: 'u', 0x10340: 'p', 0x10342: 'r', 0x10343: 's',
	0x10344: 't', 0x10345: 'w', 0x10346: 'f', 0x10347: 'x', 0x10349: 'o',
}

// lookLettersToo is a second letter an alphabet writes with a character
// that has no sound (a rune, a symbol): ᚲ is k or c, ∩ n or u (turned),
// Λ A or V (turned). It takes bmpFoldTable.sound, as symbolLetters do.
var lookLettersToo = map[rune]rune{'ᚲ': 'c', '∩': 'u', 'Λ': 'v'}

// turnedLetters is the letter each ASCII letter is, turned upside down:
// upside-down text writes n with u, d with p and b with q, and the other
// way round, beside turned letters of its own (ɯ ǝ ʇ ʞ ɐ ɹ in lookLetters),
// so "ɯǝɯ-ʇoʞǝu" reads as mem-token. It is their second reading
// (asciiSounds, and bmpFoldTable.sound for their compatibility forms).
// Upside-down text also reverses the order of the letters; that is not
// read.
var turnedLetters = map[byte]byte{'n': 'u', 'u': 'n', 'd': 'p', 'p': 'd', 'b': 'q', 'q': 'b'}
