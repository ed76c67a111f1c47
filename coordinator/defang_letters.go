package coordinator

// letterBases maps each letter that no table reads in ASCII (no ASCII
// confusable prototype, no transliteration) to the letter it is drawn
// from, when that one has a reading: by its Unicode name, a letter "X
// WITH <decoration>" is X (ꝁ LATIN SMALL LETTER K WITH STROKE is k, ꬺ an
// m with a crossed tail, ꚋ a Cyrillic te with a hook), a small capital
// its capital (ꜰ is F), and a Latin letter whose name spells one letter
// beside its qualifiers that letter (ꝛ LATIN SMALL LETTER R ROTUNDA and ꭋ
// SCRIPT R are r); else a letter whose other case has a reading reads
// as that case (Greek small san ϻ as its capital Ϻ, which is M). A model
// reads such a letter as the one it is drawn from, so each would
// otherwise end a marker's word where a reader sees none end.
//
// Generated from the Unicode names of this Go's Unicode version by
// TestLetterBases, which fails while the table differs from what the names
// give; go test ./coordinator -run TestLetterBases -update rewrites it.
var letterBases = map[rune]rune{
	0x01DD:  0x0065,  // latin small letter turned e: latin small letter e
	0x0242:  0x0241,  // latin small letter glottal stop: latin capital letter glottal stop
	0x0245:  0x0056,  // latin capital letter turned v: latin capital letter v
	0x028C:  0x0076,  // latin small letter turned v: latin small letter v
	0x02A1:  0x0294,  // latin letter glottal stop with stroke: latin letter glottal stop
	0x03F5:  0x0395,  // greek lunate epsilon symbol: greek capital letter epsilon
	0x03FB:  0x03FA,  // greek small letter san: greek capital letter san
	0x042A:  0x044A,  // cyrillic capital letter hard sign: cyrillic small letter hard sign
	0x04C5:  0x041B,  // cyrillic capital letter el with tail: cyrillic capital letter el
	0x04F6:  0x0413,  // cyrillic capital letter ghe with descender: cyrillic capital letter ghe
	0x04F7:  0x0433,  // cyrillic small letter ghe with descender: cyrillic small letter ghe
	0x04FA:  0x0413,  // cyrillic capital letter ghe with stroke and hook: cyrillic capital letter ghe
	0x04FB:  0x0433,  // cyrillic small letter ghe with stroke and hook: cyrillic small letter ghe
	0x04FC:  0x0425,  // cyrillic capital letter ha with hook: cyrillic capital letter ha
	0x04FD:  0x0445,  // cyrillic small letter ha with hook: cyrillic small letter ha
	0x04FE:  0x0425,  // cyrillic capital letter ha with stroke: cyrillic capital letter ha
	0x04FF:  0x0445,  // cyrillic small letter ha with stroke: cyrillic small letter ha
	0x0500:  0x0501,  // cyrillic capital letter komi de: cyrillic small letter komi de
	0x050B:  0x050A,  // cyrillic small letter komi nje: cyrillic capital letter komi nje
	0x0511:  0x0510,  // cyrillic small letter reversed ze: cyrillic capital letter reversed ze
	0x0512:  0x041B,  // cyrillic capital letter el with hook: cyrillic capital letter el
	0x0513:  0x043B,  // cyrillic small letter el with hook: cyrillic small letter el
	0x051A:  0x051B,  // cyrillic capital letter qa: cyrillic small letter qa
	0x0520:  0x041B,  // cyrillic capital letter el with middle hook: cyrillic capital letter el
	0x0521:  0x043B,  // cyrillic small letter el with middle hook: cyrillic small letter el
	0x0522:  0x041D,  // cyrillic capital letter en with middle hook: cyrillic capital letter en
	0x0523:  0x043D,  // cyrillic small letter en with middle hook: cyrillic small letter en
	0x0524:  0x041F,  // cyrillic capital letter pe with descender: cyrillic capital letter pe
	0x0525:  0x043F,  // cyrillic small letter pe with descender: cyrillic small letter pe
	0x0526:  0x04BA,  // cyrillic capital letter shha with descender: cyrillic capital letter shha
	0x0527:  0x04BB,  // cyrillic small letter shha with descender: cyrillic small letter shha
	0x0528:  0x041D,  // cyrillic capital letter en with left hook: cyrillic capital letter en
	0x0529:  0x043D,  // cyrillic small letter en with left hook: cyrillic small letter en
	0x052E:  0x041B,  // cyrillic capital letter el with descender: cyrillic capital letter el
	0x052F:  0x043B,  // cyrillic small letter el with descender: cyrillic small letter el
	0x0588:  0x0575,  // armenian small letter yi with stroke: armenian small letter yi
	0x063B:  0x06A9,  // arabic letter keheh with two dots above: arabic letter keheh
	0x063C:  0x06A9,  // arabic letter keheh with three dots below: arabic letter keheh
	0x063D:  0x06CC,  // arabic letter farsi yeh with inverted v: arabic letter farsi yeh
	0x063E:  0x06CC,  // arabic letter farsi yeh with two dots above: arabic letter farsi yeh
	0x063F:  0x06CC,  // arabic letter farsi yeh with three dots above: arabic letter farsi yeh
	0x06D1:  0x064A,  // arabic letter yeh with three dots below: arabic letter yeh
	0x0750:  0x0628,  // arabic letter beh with three dots horizontally below: arabic letter beh
	0x0752:  0x0628,  // arabic letter beh with three dots pointing upwards below: arabic letter beh
	0x0753:  0x0628,  // arabic letter beh with three dots pointing upwards below and two dots above: arabic letter beh
	0x0754:  0x0628,  // arabic letter beh with two dots below and dot above: arabic letter beh
	0x0755:  0x0628,  // arabic letter beh with inverted small v below: arabic letter beh
	0x0756:  0x0628,  // arabic letter beh with small v: arabic letter beh
	0x0757:  0x062D,  // arabic letter hah with two dots above: arabic letter hah
	0x0758:  0x062D,  // arabic letter hah with three dots pointing upwards below: arabic letter hah
	0x0759:  0x062F,  // arabic letter dal with two dots vertically below and small tah: arabic letter dal
	0x075A:  0x062F,  // arabic letter dal with inverted small v below: arabic letter dal
	0x075B:  0x0631,  // arabic letter reh with stroke: arabic letter reh
	0x075C:  0x0633,  // arabic letter seen with four dots above: arabic letter seen
	0x0760:  0x0641,  // arabic letter feh with two dots below: arabic letter feh
	0x0761:  0x0641,  // arabic letter feh with three dots pointing upwards below: arabic letter feh
	0x0764:  0x06A9,  // arabic letter keheh with three dots pointing upwards below: arabic letter keheh
	0x0765:  0x0645,  // arabic letter meem with dot above: arabic letter meem
	0x0766:  0x0645,  // arabic letter meem with dot below: arabic letter meem
	0x0767:  0x0646,  // arabic letter noon with two dots below: arabic letter noon
	0x076A:  0x0644,  // arabic letter lam with bar: arabic letter lam
	0x076B:  0x0631,  // arabic letter reh with two dots vertically above: arabic letter reh
	0x076D:  0x0633,  // arabic letter seen with two dots vertically above: arabic letter seen
	0x076E:  0x062D,  // arabic letter hah with small arabic letter tah below: arabic letter hah
	0x076F:  0x062D,  // arabic letter hah with small arabic letter tah and two dots: arabic letter hah
	0x0770:  0x0633,  // arabic letter seen with small arabic letter tah and two dots: arabic letter seen
	0x0773:  0x0627,  // arabic letter alef with extended arabic-indic digit two above: arabic letter alef
	0x0774:  0x0627,  // arabic letter alef with extended arabic-indic digit three above: arabic letter alef
	0x0775:  0x06CC,  // arabic letter farsi yeh with extended arabic-indic digit two above: arabic letter farsi yeh
	0x0776:  0x06CC,  // arabic letter farsi yeh with extended arabic-indic digit three above: arabic letter farsi yeh
	0x0777:  0x06CC,  // arabic letter farsi yeh with extended arabic-indic digit four below: arabic letter farsi yeh
	0x0778:  0x0648,  // arabic letter waw with extended arabic-indic digit two above: arabic letter waw
	0x0779:  0x0648,  // arabic letter waw with extended arabic-indic digit three above: arabic letter waw
	0x077A:  0x06D2,  // arabic letter yeh barree with extended arabic-indic digit two above: arabic letter yeh barree
	0x077B:  0x06D2,  // arabic letter yeh barree with extended arabic-indic digit three above: arabic letter yeh barree
	0x077C:  0x062D,  // arabic letter hah with extended arabic-indic digit four below: arabic letter hah
	0x077D:  0x0633,  // arabic letter seen with extended arabic-indic digit four above: arabic letter seen
	0x077F:  0x0643,  // arabic letter kaf with two dots above: arabic letter kaf
	0x0870:  0x0627,  // arabic letter alef with attached fatha: arabic letter alef
	0x0871:  0x0627,  // arabic letter alef with attached top right fatha: arabic letter alef
	0x0872:  0x0627,  // arabic letter alef with right middle stroke: arabic letter alef
	0x0873:  0x0627,  // arabic letter alef with left middle stroke: arabic letter alef
	0x0874:  0x0627,  // arabic letter alef with attached kasra: arabic letter alef
	0x0875:  0x0627,  // arabic letter alef with attached bottom right kasra: arabic letter alef
	0x0876:  0x0627,  // arabic letter alef with attached round dot above: arabic letter alef
	0x0877:  0x0627,  // arabic letter alef with attached right round dot: arabic letter alef
	0x0878:  0x0627,  // arabic letter alef with attached left round dot: arabic letter alef
	0x0879:  0x0627,  // arabic letter alef with attached round dot below: arabic letter alef
	0x087A:  0x0627,  // arabic letter alef with dot above: arabic letter alef
	0x087B:  0x0627,  // arabic letter alef with attached top right fatha and dot above: arabic letter alef
	0x087C:  0x0627,  // arabic letter alef with right middle stroke and dot above: arabic letter alef
	0x087D:  0x0627,  // arabic letter alef with attached bottom right kasra and dot above: arabic letter alef
	0x087E:  0x0627,  // arabic letter alef with attached top right fatha and left ring: arabic letter alef
	0x087F:  0x0627,  // arabic letter alef with right middle stroke and left ring: arabic letter alef
	0x0880:  0x0627,  // arabic letter alef with attached bottom right kasra and left ring: arabic letter alef
	0x0881:  0x0627,  // arabic letter alef with attached right hamza: arabic letter alef
	0x0882:  0x0627,  // arabic letter alef with attached left hamza: arabic letter alef
	0x0889:  0x0646,  // arabic letter noon with inverted small v: arabic letter noon
	0x088A:  0x062D,  // arabic letter hah with inverted small v below: arabic letter hah
	0x088B:  0x0637,  // arabic letter tah with dot below: arabic letter tah
	0x088C:  0x0637,  // arabic letter tah with three dots below: arabic letter tah
	0x088D:  0x06A9,  // arabic letter keheh with two dots vertically below: arabic letter keheh
	0x08A0:  0x0628,  // arabic letter beh with small v below: arabic letter beh
	0x08A2:  0x062C,  // arabic letter jeem with two dots above: arabic letter jeem
	0x08A3:  0x0637,  // arabic letter tah with two dots above: arabic letter tah
	0x08A5:  0x0642,  // arabic letter qaf with dot below: arabic letter qaf
	0x08A6:  0x0644,  // arabic letter lam with double bar: arabic letter lam
	0x08A8:  0x064A,  // arabic letter yeh with two dots below and hamza above: arabic letter yeh
	0x08A9:  0x064A,  // arabic letter yeh with two dots below and dot above: arabic letter yeh
	0x08AA:  0x0631,  // arabic letter reh with loop: arabic letter reh
	0x08AB:  0x0648,  // arabic letter waw with dot within: arabic letter waw
	0x08B4:  0x0643,  // arabic letter kaf with dot below: arabic letter kaf
	0x08B5:  0x0642,  // arabic letter qaf with dot below and no dots above: arabic letter qaf
	0x08B7:  0x067E,  // arabic letter peh with small meem above: arabic letter peh
	0x08B8:  0x062A,  // arabic letter teh with small teh above: arabic letter teh
	0x08BA:  0x064A,  // arabic letter yeh with two dots below and small noon above: arabic letter yeh
	0x08BE:  0x067E,  // arabic letter peh with small v: arabic letter peh
	0x08C0:  0x0679,  // arabic letter tteh with small v: arabic letter tteh
	0x08C3:  0x063A,  // arabic letter ghain with three dots above: arabic letter ghain
	0x08C4:  0x08BC,  // arabic letter african qaf with three dots above: arabic letter african qaf
	0x08C5:  0x062C,  // arabic letter jeem with three dots above: arabic letter jeem
	0x08C6:  0x062C,  // arabic letter jeem with three dots below: arabic letter jeem
	0x08C7:  0x0644,  // arabic letter lam with small arabic letter tah above: arabic letter lam
	0x13F8:  0x13F0,  // cherokee small letter ye: cherokee letter ye
	0x13F9:  0x13F1,  // cherokee small letter yi: cherokee letter yi
	0x13FA:  0x13F2,  // cherokee small letter yo: cherokee letter yo
	0x1878:  0x1834,  // mongolian letter cha with two dots: mongolian letter cha
	0x1C80:  0x0412,  // cyrillic small letter rounded ve: cyrillic capital letter ve
	0x1C81:  0x0414,  // cyrillic small letter long-legged de: cyrillic capital letter de
	0x1C82:  0x041E,  // cyrillic small letter narrow o: cyrillic capital letter o
	0x1C83:  0x0421,  // cyrillic small letter wide es: cyrillic capital letter es
	0x1C84:  0x0422,  // cyrillic small letter tall te: cyrillic capital letter te
	0x1C85:  0x0422,  // cyrillic small letter three-legged te: cyrillic capital letter te
	0x1C86:  0x044A,  // cyrillic small letter tall hard sign: cyrillic small letter hard sign
	0x1C87:  0x0462,  // cyrillic small letter tall yat: cyrillic capital letter yat
	0x1C90:  0x10D0,  // georgian mtavruli capital letter an: georgian letter an
	0x1C91:  0x10D1,  // georgian mtavruli capital letter ban: georgian letter ban
	0x1C92:  0x10D2,  // georgian mtavruli capital letter gan: georgian letter gan
	0x1C93:  0x10D3,  // georgian mtavruli capital letter don: georgian letter don
	0x1C94:  0x10D4,  // georgian mtavruli capital letter en: georgian letter en
	0x1C95:  0x10D5,  // georgian mtavruli capital letter vin: georgian letter vin
	0x1C96:  0x10D6,  // georgian mtavruli capital letter zen: georgian letter zen
	0x1C97:  0x10D7,  // georgian mtavruli capital letter tan: georgian letter tan
	0x1C98:  0x10D8,  // georgian mtavruli capital letter in: georgian letter in
	0x1C99:  0x10D9,  // georgian mtavruli capital letter kan: georgian letter kan
	0x1C9A:  0x10DA,  // georgian mtavruli capital letter las: georgian letter las
	0x1C9B:  0x10DB,  // georgian mtavruli capital letter man: georgian letter man
	0x1C9C:  0x10DC,  // georgian mtavruli capital letter nar: georgian letter nar
	0x1C9D:  0x10DD,  // georgian mtavruli capital letter on: georgian letter on
	0x1C9E:  0x10DE,  // georgian mtavruli capital letter par: georgian letter par
	0x1C9F:  0x10DF,  // georgian mtavruli capital letter zhar: georgian letter zhar
	0x1CA0:  0x10E0,  // georgian mtavruli capital letter rae: georgian letter rae
	0x1CA1:  0x10E1,  // georgian mtavruli capital letter san: georgian letter san
	0x1CA2:  0x10E2,  // georgian mtavruli capital letter tar: georgian letter tar
	0x1CA3:  0x10E3,  // georgian mtavruli capital letter un: georgian letter un
	0x1CA4:  0x10E4,  // georgian mtavruli capital letter phar: georgian letter phar
	0x1CA5:  0x10E5,  // georgian mtavruli capital letter khar: georgian letter khar
	0x1CA6:  0x10E6,  // georgian mtavruli capital letter ghan: georgian letter ghan
	0x1CA7:  0x10E7,  // georgian mtavruli capital letter qar: georgian letter qar
	0x1CA8:  0x10E8,  // georgian mtavruli capital letter shin: georgian letter shin
	0x1CA9:  0x10E9,  // georgian mtavruli capital letter chin: georgian letter chin
	0x1CAA:  0x10EA,  // georgian mtavruli capital letter can: georgian letter can
	0x1CAB:  0x10EB,  // georgian mtavruli capital letter jil: georgian letter jil
	0x1CAC:  0x10EC,  // georgian mtavruli capital letter cil: georgian letter cil
	0x1CAD:  0x10ED,  // georgian mtavruli capital letter char: georgian letter char
	0x1CAE:  0x10EE,  // georgian mtavruli capital letter xan: georgian letter xan
	0x1CAF:  0x10EF,  // georgian mtavruli capital letter jhan: georgian letter jhan
	0x1CB0:  0x10F0,  // georgian mtavruli capital letter hae: georgian letter hae
	0x1CB1:  0x10F1,  // georgian mtavruli capital letter he: georgian letter he
	0x1CB2:  0x10F2,  // georgian mtavruli capital letter hie: georgian letter hie
	0x1CB3:  0x10F3,  // georgian mtavruli capital letter we: georgian letter we
	0x1CB4:  0x10F4,  // georgian mtavruli capital letter har: georgian letter har
	0x1CB5:  0x10F5,  // georgian mtavruli capital letter hoe: georgian letter hoe
	0x1CB6:  0x10F6,  // georgian mtavruli capital letter fi: georgian letter fi
	0x1CBF:  0x10FF,  // georgian mtavruli capital letter labial sign: georgian letter labial sign
	0x1D12:  0x006F,  // latin small letter sideways open o: latin small letter o
	0x1D16:  0x006F,  // latin small letter top half o: latin small letter o
	0x1D17:  0x006F,  // latin small letter bottom half o: latin small letter o
	0x1D23:  0x01B7,  // latin letter small capital ezh: latin capital letter ezh
	0x1D27:  0x039B,  // greek letter small capital lamda: greek capital letter lamda
	0x1D2A:  0x03A8,  // greek letter small capital psi: greek capital letter psi
	0x1D79:  0x0067,  // latin small letter insular g: latin small letter g
	0x1D8B:  0x0283,  // latin small letter esh with palatal hook: latin small letter esh
	0x1D8F:  0x0061,  // latin small letter a with retroflex hook: latin small letter a
	0x1D91:  0x0064,  // latin small letter d with hook and tail: latin small letter d
	0x1D92:  0x0065,  // latin small letter e with retroflex hook: latin small letter e
	0x1D93:  0x025B,  // latin small letter open e with retroflex hook: latin small letter open e
	0x1D94:  0x025C,  // latin small letter reversed open e with retroflex hook: latin small letter reversed open e
	0x1D96:  0x0069,  // latin small letter i with retroflex hook: latin small letter i
	0x1D97:  0x0254,  // latin small letter open o with retroflex hook: latin small letter open o
	0x1D98:  0x0283,  // latin small letter esh with retroflex hook: latin small letter esh
	0x1D99:  0x0075,  // latin small letter u with retroflex hook: latin small letter u
	0x1D9A:  0x0292,  // latin small letter ezh with retroflex hook: latin small letter ezh
	0x1E9C:  0x017F,  // latin small letter long s with diagonal stroke: latin small letter long s
	0x1EFC:  0x0056,  // latin capital letter middle-welsh v: latin capital letter v
	0x1EFD:  0x0076,  // latin small letter middle-welsh v: latin small letter v
	0x1EFE:  0x0059,  // latin capital letter y with loop: latin capital letter y
	0x2C6D:  0x0251,  // latin capital letter alpha: latin small letter alpha
	0x2C70:  0x0252,  // latin capital letter turned alpha: latin small letter turned alpha
	0x2C71:  0x0076,  // latin small letter v with right hook: latin small letter v
	0x2C72:  0x0057,  // latin capital letter w with hook: latin capital letter w
	0x2C73:  0x0077,  // latin small letter w with hook: latin small letter w
	0x2C74:  0x0076,  // latin small letter v with curl: latin small letter v
	0x2C75:  0x0048,  // latin capital letter half h: latin capital letter h
	0x2C76:  0x0068,  // latin small letter half h: latin small letter h
	0x2C78:  0x0065,  // latin small letter e with notch: latin small letter e
	0x2C79:  0x0279,  // latin small letter turned r with tail: latin small letter turned r
	0x2C7A:  0x006F,  // latin small letter o with low ring inside: latin small letter o
	0x2C7B:  0x0065,  // latin letter small capital turned e: latin small letter e
	0x2C7E:  0x0053,  // latin capital letter s with swash tail: latin capital letter s
	0x2C7F:  0x005A,  // latin capital letter z with swash tail: latin capital letter z
	0x2C87:  0x2C86,  // coptic small letter dalda: coptic capital letter dalda
	0x2C8A:  0x2C8B,  // coptic capital letter sou: coptic small letter sou
	0x2C97:  0x2C96,  // coptic small letter laula: coptic capital letter laula
	0x2CB0:  0x2CB1,  // coptic capital letter oou: coptic small letter oou
	0x2CB7:  0x2CB6,  // coptic small letter cryptogrammic eie: coptic capital letter cryptogrammic eie
	0x2CC1:  0x2CC0,  // coptic small letter sampi: coptic capital letter sampi
	0x2CDD:  0x2CDC,  // coptic small letter old nubian shima: coptic capital letter old nubian shima
	0x2D00:  0x10A0,  // georgian small letter an: georgian capital letter an
	0x2D01:  0x10A1,  // georgian small letter ban: georgian capital letter ban
	0x2D02:  0x10A2,  // georgian small letter gan: georgian capital letter gan
	0x2D03:  0x10A3,  // georgian small letter don: georgian capital letter don
	0x2D04:  0x10A4,  // georgian small letter en: georgian capital letter en
	0x2D05:  0x10A5,  // georgian small letter vin: georgian capital letter vin
	0x2D06:  0x10A6,  // georgian small letter zen: georgian capital letter zen
	0x2D07:  0x10A7,  // georgian small letter tan: georgian capital letter tan
	0x2D08:  0x10A8,  // georgian small letter in: georgian capital letter in
	0x2D09:  0x10A9,  // georgian small letter kan: georgian capital letter kan
	0x2D0A:  0x10AA,  // georgian small letter las: georgian capital letter las
	0x2D0B:  0x10AB,  // georgian small letter man: georgian capital letter man
	0x2D0C:  0x10AC,  // georgian small letter nar: georgian capital letter nar
	0x2D0D:  0x10AD,  // georgian small letter on: georgian capital letter on
	0x2D0E:  0x10AE,  // georgian small letter par: georgian capital letter par
	0x2D0F:  0x10AF,  // georgian small letter zhar: georgian capital letter zhar
	0x2D10:  0x10B0,  // georgian small letter rae: georgian capital letter rae
	0x2D11:  0x10B1,  // georgian small letter san: georgian capital letter san
	0x2D12:  0x10B2,  // georgian small letter tar: georgian capital letter tar
	0x2D13:  0x10B3,  // georgian small letter un: georgian capital letter un
	0x2D14:  0x10B4,  // georgian small letter phar: georgian capital letter phar
	0x2D15:  0x10B5,  // georgian small letter khar: georgian capital letter khar
	0x2D16:  0x10B6,  // georgian small letter ghan: georgian capital letter ghan
	0x2D17:  0x10B7,  // georgian small letter qar: georgian capital letter qar
	0x2D18:  0x10B8,  // georgian small letter shin: georgian capital letter shin
	0x2D19:  0x10B9,  // georgian small letter chin: georgian capital letter chin
	0x2D1A:  0x10BA,  // georgian small letter can: georgian capital letter can
	0x2D1B:  0x10BB,  // georgian small letter jil: georgian capital letter jil
	0x2D1C:  0x10BC,  // georgian small letter cil: georgian capital letter cil
	0x2D1D:  0x10BD,  // georgian small letter char: georgian capital letter char
	0x2D1E:  0x10BE,  // georgian small letter xan: georgian capital letter xan
	0x2D1F:  0x10BF,  // georgian small letter jhan: georgian capital letter jhan
	0x2D20:  0x10C0,  // georgian small letter hae: georgian capital letter hae
	0x2D21:  0x10C1,  // georgian small letter he: georgian capital letter he
	0x2D22:  0x10C2,  // georgian small letter hie: georgian capital letter hie
	0x2D23:  0x10C3,  // georgian small letter we: georgian capital letter we
	0x2D24:  0x10C4,  // georgian small letter har: georgian capital letter har
	0x2D25:  0x10C5,  // georgian small letter hoe: georgian capital letter hoe
	0x312E:  0x311B,  // bopomofo letter o with dot above: bopomofo letter o
	0xA646:  0xA647,  // cyrillic capital letter iota: cyrillic small letter iota
	0xA64C:  0xA64D,  // cyrillic capital letter broad omega: cyrillic small letter broad omega
	0xA68A:  0x0422,  // cyrillic capital letter te with middle hook: cyrillic capital letter te
	0xA68B:  0x0442,  // cyrillic small letter te with middle hook: cyrillic small letter te
	0xA694:  0xA695,  // cyrillic capital letter hwe: cyrillic small letter hwe
	0xA730:  0x0046,  // latin letter small capital f: latin capital letter f
	0xA73E:  0x0043,  // latin capital letter reversed c with dot: latin capital letter c
	0xA73F:  0x2184,  // latin small letter reversed c with dot: latin small letter reversed c
	0xA741:  0x006B,  // latin small letter k with stroke: latin small letter k
	0xA742:  0x004B,  // latin capital letter k with diagonal stroke: latin capital letter k
	0xA743:  0x006B,  // latin small letter k with diagonal stroke: latin small letter k
	0xA744:  0x004B,  // latin capital letter k with stroke and diagonal stroke: latin capital letter k
	0xA745:  0x006B,  // latin small letter k with stroke and diagonal stroke: latin small letter k
	0xA746:  0x004C,  // latin capital letter broken l: latin capital letter l
	0xA747:  0x006C,  // latin small letter broken l: latin small letter l
	0xA748:  0x004C,  // latin capital letter l with high stroke: latin capital letter l
	0xA749:  0x006C,  // latin small letter l with high stroke: latin small letter l
	0xA74C:  0x004F,  // latin capital letter o with loop: latin capital letter o
	0xA74D:  0x006F,  // latin small letter o with loop: latin small letter o
	0xA750:  0x0050,  // latin capital letter p with stroke through descender: latin capital letter p
	0xA751:  0x0070,  // latin small letter p with stroke through descender: latin small letter p
	0xA752:  0x0050,  // latin capital letter p with flourish: latin capital letter p
	0xA753:  0x0070,  // latin small letter p with flourish: latin small letter p
	0xA754:  0x0050,  // latin capital letter p with squirrel tail: latin capital letter p
	0xA755:  0x0070,  // latin small letter p with squirrel tail: latin small letter p
	0xA756:  0x0051,  // latin capital letter q with stroke through descender: latin capital letter q
	0xA757:  0x0071,  // latin small letter q with stroke through descender: latin small letter q
	0xA758:  0x0051,  // latin capital letter q with diagonal stroke: latin capital letter q
	0xA759:  0x0071,  // latin small letter q with diagonal stroke: latin small letter q
	0xA75B:  0x0072,  // latin small letter r rotunda: latin small letter r
	0xA75E:  0x0056,  // latin capital letter v with diagonal stroke: latin capital letter v
	0xA75F:  0x0076,  // latin small letter v with diagonal stroke: latin small letter v
	0xA760:  0xA761,  // latin capital letter vy: latin small letter vy
	0xA762:  0x005A,  // latin capital letter visigothic z: latin capital letter z
	0xA763:  0x007A,  // latin small letter visigothic z: latin small letter z
	0xA764:  0x00DE,  // latin capital letter thorn with stroke: latin capital letter thorn
	0xA765:  0x00FE,  // latin small letter thorn with stroke: latin small letter thorn
	0xA766:  0x00DE,  // latin capital letter thorn with stroke through descender: latin capital letter thorn
	0xA767:  0x00FE,  // latin small letter thorn with stroke through descender: latin small letter thorn
	0xA76F:  0xA76E,  // latin small letter con: latin capital letter con
	0xA779:  0x0044,  // latin capital letter insular d: latin capital letter d
	0xA77A:  0x0064,  // latin small letter insular d: latin small letter d
	0xA77B:  0x0046,  // latin capital letter insular f: latin capital letter f
	0xA77C:  0x0066,  // latin small letter insular f: latin small letter f
	0xA77D:  0x0047,  // latin capital letter insular g: latin capital letter g
	0xA77E:  0x0047,  // latin capital letter turned insular g: latin capital letter g
	0xA77F:  0x0067,  // latin small letter turned insular g: latin small letter g
	0xA780:  0x004C,  // latin capital letter turned l: latin capital letter l
	0xA781:  0x006C,  // latin small letter turned l: latin small letter l
	0xA782:  0x0052,  // latin capital letter insular r: latin capital letter r
	0xA783:  0x0072,  // latin small letter insular r: latin small letter r
	0xA784:  0x0053,  // latin capital letter insular s: latin capital letter s
	0xA785:  0x0073,  // latin small letter insular s: latin small letter s
	0xA786:  0x0054,  // latin capital letter insular t: latin capital letter t
	0xA787:  0x0074,  // latin small letter insular t: latin small letter t
	0xA78B:  0xA78C,  // latin capital letter saltillo: latin small letter saltillo
	0xA78D:  0x0048,  // latin capital letter turned h: latin capital letter h
	0xA78E:  0x006C,  // latin small letter l with retroflex hook and belt: latin small letter l
	0xA790:  0x004E,  // latin capital letter n with descender: latin capital letter n
	0xA791:  0x006E,  // latin small letter n with descender: latin small letter n
	0xA792:  0x0043,  // latin capital letter c with bar: latin capital letter c
	0xA793:  0x0063,  // latin small letter c with bar: latin small letter c
	0xA794:  0x0063,  // latin small letter c with palatal hook: latin small letter c
	0xA795:  0x0068,  // latin small letter h with palatal hook: latin small letter h
	0xA796:  0x0042,  // latin capital letter b with flourish: latin capital letter b
	0xA797:  0x0062,  // latin small letter b with flourish: latin small letter b
	0xA79C:  0xA79D,  // latin capital letter volapuk oe: latin small letter volapuk oe
	0xA79E:  0xA79F,  // latin capital letter volapuk ue: latin small letter volapuk ue
	0xA7A0:  0x0047,  // latin capital letter g with oblique stroke: latin capital letter g
	0xA7A1:  0x0067,  // latin small letter g with oblique stroke: latin small letter g
	0xA7A2:  0x004B,  // latin capital letter k with oblique stroke: latin capital letter k
	0xA7A3:  0x006B,  // latin small letter k with oblique stroke: latin small letter k
	0xA7A4:  0x004E,  // latin capital letter n with oblique stroke: latin capital letter n
	0xA7A5:  0x006E,  // latin small letter n with oblique stroke: latin small letter n
	0xA7A6:  0x0052,  // latin capital letter r with oblique stroke: latin capital letter r
	0xA7A7:  0x0072,  // latin small letter r with oblique stroke: latin small letter r
	0xA7A8:  0x0053,  // latin capital letter s with oblique stroke: latin capital letter s
	0xA7A9:  0x0073,  // latin small letter s with oblique stroke: latin small letter s
	0xA7AA:  0x0048,  // latin capital letter h with hook: latin capital letter h
	0xA7AC:  0x0047,  // latin capital letter script g: latin capital letter g
	0xA7AD:  0x004C,  // latin capital letter l with belt: latin capital letter l
	0xA7AE:  0x0069,  // latin capital letter small capital i: latin small letter i
	0xA7AF:  0x0051,  // latin letter small capital q: latin capital letter q
	0xA7B0:  0x004B,  // latin capital letter turned k: latin capital letter k
	0xA7B1:  0x0054,  // latin capital letter turned t: latin capital letter t
	0xA7B6:  0xA7B7,  // latin capital letter omega: latin small letter omega
	0xA7B8:  0x0055,  // latin capital letter u with stroke: latin capital letter u
	0xA7B9:  0x0075,  // latin small letter u with stroke: latin small letter u
	0xA7BA:  0x0041,  // latin capital letter glottal a: latin capital letter a
	0xA7BB:  0x0061,  // latin small letter glottal a: latin small letter a
	0xA7BC:  0x0049,  // latin capital letter glottal i: latin capital letter i
	0xA7BD:  0x0069,  // latin small letter glottal i: latin small letter i
	0xA7BE:  0x0055,  // latin capital letter glottal u: latin capital letter u
	0xA7BF:  0x0075,  // latin small letter glottal u: latin small letter u
	0xA7C0:  0x004F,  // latin capital letter old polish o: latin capital letter o
	0xA7C1:  0x006F,  // latin small letter old polish o: latin small letter o
	0xA7C2:  0x0057,  // latin capital letter anglicana w: latin capital letter w
	0xA7C3:  0x0077,  // latin small letter anglicana w: latin small letter w
	0xA7C4:  0x0043,  // latin capital letter c with palatal hook: latin capital letter c
	0xA7C5:  0x0053,  // latin capital letter s with hook: latin capital letter s
	0xA7C6:  0x005A,  // latin capital letter z with palatal hook: latin capital letter z
	0xA7C7:  0x0044,  // latin capital letter d with short stroke overlay: latin capital letter d
	0xA7C8:  0x0064,  // latin small letter d with short stroke overlay: latin small letter d
	0xA7C9:  0x0053,  // latin capital letter s with short stroke overlay: latin capital letter s
	0xA7CA:  0x0073,  // latin small letter s with short stroke overlay: latin small letter s
	0xA7D0:  0x0047,  // latin capital letter closed insular g: latin capital letter g
	0xA7D1:  0x0067,  // latin small letter closed insular g: latin small letter g
	0xA7D7:  0x0073,  // latin small letter middle scots s: latin small letter s
	0xA7D8:  0x0053,  // latin capital letter sigmoid s: latin capital letter s
	0xA7D9:  0x0073,  // latin small letter sigmoid s: latin small letter s
	0xA7F5:  0x0048,  // latin capital letter reversed half h: latin capital letter h
	0xA7F6:  0x0068,  // latin small letter reversed half h: latin small letter h
	0xA7F7:  0x0049,  // latin epigraphic letter sideways i: latin capital letter i
	0xA7FA:  0x019C,  // latin letter small capital turned m: latin capital letter turned m
	0xA7FB:  0x0046,  // latin epigraphic letter reversed f: latin capital letter f
	0xA7FC:  0x0050,  // latin epigraphic letter reversed p: latin capital letter p
	0xA7FD:  0x004D,  // latin epigraphic letter inverted m: latin capital letter m
	0xA7FE:  0x0049,  // latin epigraphic letter i longa: latin capital letter i
	0xA7FF:  0x004D,  // latin epigraphic letter archaic m: latin capital letter m
	0xAB31:  0x0061,  // latin small letter a reversed-schwa: latin small letter a
	0xAB33:  0x0065,  // latin small letter barred e: latin small letter e
	0xAB34:  0x0065,  // latin small letter e with flourish: latin small letter e
	0xAB36:  0x0261,  // latin small letter script g with crossed-tail: latin small letter script g
	0xAB37:  0x006C,  // latin small letter l with inverted lazy s: latin small letter l
	0xAB38:  0x006C,  // latin small letter l with double middle tilde: latin small letter l
	0xAB39:  0x006C,  // latin small letter l with middle ring: latin small letter l
	0xAB3A:  0x006D,  // latin small letter m with crossed-tail: latin small letter m
	0xAB3B:  0x006E,  // latin small letter n with crossed-tail: latin small letter n
	0xAB3C:  0x014B,  // latin small letter eng with crossed-tail: latin small letter eng
	0xAB43:  0x006F,  // latin small letter turned o open-o: latin small letter o
	0xAB44:  0x006F,  // latin small letter turned o open-o with stroke: latin small letter o
	0xAB45:  0x0072,  // latin small letter stirrup r: latin small letter r
	0xAB46:  0x0280,  // latin letter small capital r with right leg: latin letter small capital r
	0xAB49:  0x0072,  // latin small letter r with crossed-tail: latin small letter r
	0xAB4A:  0xAB48,  // latin small letter double r with crossed-tail: latin small letter double r
	0xAB4B:  0x0072,  // latin small letter script r: latin small letter r
	0xAB4C:  0x0072,  // latin small letter script r with ring: latin small letter r
	0xAB4F:  0x0289,  // latin small letter u bar with short right leg: latin small letter u bar
	0xAB54:  0xAB53,  // latin small letter chi with low right ring: latin small letter chi
	0xAB56:  0x0078,  // latin small letter x with low right ring: latin small letter x
	0xAB57:  0x0078,  // latin small letter x with long left leg: latin small letter x
	0xAB58:  0x0078,  // latin small letter x with long left leg and low right ring: latin small letter x
	0xAB59:  0x0078,  // latin small letter x with long left leg with serif: latin small letter x
	0xAB61:  0x0065,  // latin small letter iotified e: latin small letter e
	0xAB65:  0x03A9,  // greek letter small capital omega: greek capital letter omega
	0xAB66:  0x02A3,  // latin small letter dz digraph with retroflex hook: latin small letter dz digraph
	0xAB67:  0x02A6,  // latin small letter ts digraph with retroflex hook: latin small letter ts digraph
	0xAB68:  0x0279,  // latin small letter turned r with middle tilde: latin small letter turned r
	0xAB73:  0x13A3,  // cherokee small letter o: cherokee letter o
	0xAB76:  0x13A6,  // cherokee small letter ga: cherokee letter ga
	0xAB77:  0x13A7,  // cherokee small letter ka: cherokee letter ka
	0xAB78:  0x13A8,  // cherokee small letter ge: cherokee letter ge
	0xAB79:  0x13A9,  // cherokee small letter gi: cherokee letter gi
	0xAB7D:  0x13AD,  // cherokee small letter ha: cherokee letter ha
	0xAB7E:  0x13AE,  // cherokee small letter he: cherokee letter he
	0xAB7F:  0x13AF,  // cherokee small letter hi: cherokee letter hi
	0xAB80:  0x13B0,  // cherokee small letter ho: cherokee letter ho
	0xAB82:  0x13B2,  // cherokee small letter hv: cherokee letter hv
	0xAB84:  0x13B4,  // cherokee small letter le: cherokee letter le
	0xAB85:  0x13B5,  // cherokee small letter li: cherokee letter li
	0xAB86:  0x13B6,  // cherokee small letter lo: cherokee letter lo
	0xAB88:  0x13B8,  // cherokee small letter lv: cherokee letter lv
	0xAB89:  0x13B9,  // cherokee small letter ma: cherokee letter ma
	0xAB8A:  0x13BA,  // cherokee small letter me: cherokee letter me
	0xAB8C:  0x13BC,  // cherokee small letter mo: cherokee letter mo
	0xAB8D:  0x13BD,  // cherokee small letter mu: cherokee letter mu
	0xAB8F:  0x13BF,  // cherokee small letter hna: cherokee letter hna
	0xAB91:  0x13C1,  // cherokee small letter ne: cherokee letter ne
	0xAB92:  0x13C2,  // cherokee small letter ni: cherokee letter ni
	0xAB94:  0x13C4,  // cherokee small letter nu: cherokee letter nu
	0xAB95:  0x13C5,  // cherokee small letter nv: cherokee letter nv
	0xAB96:  0x13C6,  // cherokee small letter qua: cherokee letter qua
	0xAB97:  0x13C7,  // cherokee small letter que: cherokee letter que
	0xAB98:  0x13C8,  // cherokee small letter qui: cherokee letter qui
	0xAB99:  0x13C9,  // cherokee small letter quo: cherokee letter quo
	0xAB9A:  0x13CA,  // cherokee small letter quu: cherokee letter quu
	0xAB9B:  0x13CB,  // cherokee small letter quv: cherokee letter quv
	0xAB9D:  0x13CD,  // cherokee small letter s: cherokee letter s
	0xAB9E:  0x13CE,  // cherokee small letter se: cherokee letter se
	0xABA0:  0x13D0,  // cherokee small letter so: cherokee letter so
	0xABA1:  0x13D1,  // cherokee small letter su: cherokee letter su
	0xABA3:  0x13D3,  // cherokee small letter da: cherokee letter da
	0xABA4:  0x13D4,  // cherokee small letter ta: cherokee letter ta
	0xABA5:  0x13D5,  // cherokee small letter de: cherokee letter de
	0xABA6:  0x13D6,  // cherokee small letter te: cherokee letter te
	0xABA7:  0x13D7,  // cherokee small letter di: cherokee letter di
	0xABA8:  0x13D8,  // cherokee small letter ti: cherokee letter ti
	0xABAB:  0x13DB,  // cherokee small letter dv: cherokee letter dv
	0xABAC:  0x13DC,  // cherokee small letter dla: cherokee letter dla
	0xABAD:  0x13DD,  // cherokee small letter tla: cherokee letter tla
	0xABB0:  0x13E0,  // cherokee small letter tlo: cherokee letter tlo
	0xABB1:  0x13E1,  // cherokee small letter tlu: cherokee letter tlu
	0xABB3:  0x13E3,  // cherokee small letter tsa: cherokee letter tsa
	0xABB4:  0x13E4,  // cherokee small letter tse: cherokee letter tse
	0xABB5:  0x13E5,  // cherokee small letter tsi: cherokee letter tsi
	0xABB7:  0x13E7,  // cherokee small letter tsu: cherokee letter tsu
	0xABB8:  0x13E8,  // cherokee small letter tsv: cherokee letter tsv
	0xABB9:  0x13E9,  // cherokee small letter wa: cherokee letter wa
	0xABBA:  0x13EA,  // cherokee small letter we: cherokee letter we
	0xABBC:  0x13EC,  // cherokee small letter wo: cherokee letter wo
	0xABBD:  0x13ED,  // cherokee small letter wu: cherokee letter wu
	0xABBE:  0x13EE,  // cherokee small letter wv: cherokee letter wv
	0xABBF:  0x13EF,  // cherokee small letter ya: cherokee letter ya
	0xFE81:  0x0627,  // arabic letter alef with madda above isolated form: arabic letter alef
	0xFE82:  0x0627,  // arabic letter alef with madda above final form: arabic letter alef
	0xFE89:  0x064A,  // arabic letter yeh with hamza above isolated form: arabic letter yeh
	0xFE8A:  0x064A,  // arabic letter yeh with hamza above final form: arabic letter yeh
	0xFE8B:  0x064A,  // arabic letter yeh with hamza above initial form: arabic letter yeh
	0xFE8C:  0x064A,  // arabic letter yeh with hamza above medial form: arabic letter yeh
	0x10402: 0x1042A, // deseret capital letter long a: deseret small letter long a
	0x10417: 0x1043F, // deseret capital letter kay: deseret small letter kay
	0x1041A: 0x10442, // deseret capital letter vee: deseret small letter vee
	0x10429: 0x10401, // deseret small letter long e: deseret capital letter long e
	0x10447: 0x1041F, // deseret small letter esh: deseret capital letter esh
	0x104B3: 0x104DB, // osage capital letter ah: osage small letter ah
	0x104DC: 0x104B4, // osage small letter bra: osage capital letter bra
	0x104E4: 0x104BC, // osage small letter ka: osage capital letter ka
	0x104EC: 0x104C4, // osage small letter pa: osage capital letter pa
	0x104F5: 0x104CD, // osage small letter dha: osage capital letter dha
	0x104F8: 0x104D0, // osage small letter kha: osage capital letter kha
	0x104FA: 0x104D2, // osage small letter za: osage capital letter za
	0x118A1: 0x118C1, // warang citi capital letter a: warang citi small letter a
	0x118A8: 0x118C8, // warang citi capital letter e: warang citi small letter e
	0x118AA: 0x118CA, // warang citi capital letter ang: warang citi small letter ang
	0x118B6: 0x118D6, // warang citi capital letter am: warang citi small letter am
	0x118C9: 0x118A9, // warang citi small letter o: warang citi capital letter o
	0x118CE: 0x118AE, // warang citi small letter yuj: warang citi capital letter yuj
	0x118CF: 0x118AF, // warang citi small letter uc: warang citi capital letter uc
	0x118D2: 0x118B2, // warang citi small letter tte: warang citi capital letter tte
	0x118DB: 0x118BB, // warang citi small letter horr: warang citi capital letter horr
	0x1DF00: 0x02A9,  // latin small letter feng digraph with trill: latin small letter feng digraph
	0x1DF01: 0x0067,  // latin small letter reversed script g: latin small letter g
	0x1DF02: 0x0067,  // latin letter small capital turned g: latin small letter g
	0x1DF03: 0x006B,  // latin small letter reversed k: latin small letter k
	0x1DF04: 0x029F,  // latin letter small capital l with belt: latin letter small capital l
	0x1DF05: 0x026E,  // latin small letter lezh with retroflex hook: latin small letter lezh
	0x1DF06: 0x028E,  // latin small letter turned y with belt: latin small letter turned y
	0x1DF08: 0x0279,  // latin small letter turned r with long leg and retroflex hook: latin small letter turned r
	0x1DF09: 0x0074,  // latin small letter t with hook and retroflex hook: latin small letter t
	0x1DF0A: 0x01C3,  // latin letter retroflex click with retroflex hook: latin letter retroflex click
	0x1DF0B: 0x0283,  // latin small letter esh with double bar: latin small letter esh
	0x1DF0C: 0x0283,  // latin small letter esh with double bar and curl: latin small letter esh
	0x1DF0D: 0x0287,  // latin small letter turned t with curl: latin small letter turned t
	0x1DF0F: 0x0297,  // latin letter stretched c with curl: latin letter stretched c
	0x1DF10: 0x006B,  // latin letter small capital turned k: latin small letter k
	0x1DF11: 0x006C,  // latin small letter l with fishhook: latin small letter l
	0x1DF12: 0x02A4,  // latin small letter dezh digraph with palatal hook: latin small letter dezh digraph
	0x1DF13: 0x006C,  // latin small letter l with belt and palatal hook: latin small letter l
	0x1DF14: 0x014B,  // latin small letter eng with palatal hook: latin small letter eng
	0x1DF15: 0x0279,  // latin small letter turned r with palatal hook: latin small letter turned r
	0x1DF16: 0x0072,  // latin small letter r with fishhook and palatal hook: latin small letter r
	0x1DF17: 0x02A7,  // latin small letter tesh digraph with palatal hook: latin small letter tesh digraph
	0x1DF18: 0x0292,  // latin small letter ezh with palatal hook: latin small letter ezh
	0x1DF19: 0x02A4,  // latin small letter dezh digraph with retroflex hook: latin small letter dezh digraph
	0x1DF1A: 0x0069,  // latin small letter i with stroke and retroflex hook: latin small letter i
	0x1DF1B: 0x006F,  // latin small letter o with retroflex hook: latin small letter o
	0x1DF1C: 0x02A7,  // latin small letter tesh digraph with retroflex hook: latin small letter tesh digraph
	0x1DF1D: 0x0063,  // latin small letter c with retroflex hook: latin small letter c
	0x1DF1E: 0x0073,  // latin small letter s with curl: latin small letter s
	0x1DF25: 0x0064,  // latin small letter d with mid-height left hook: latin small letter d
	0x1DF26: 0x006C,  // latin small letter l with mid-height left hook: latin small letter l
	0x1DF27: 0x006E,  // latin small letter n with mid-height left hook: latin small letter n
	0x1DF28: 0x0072,  // latin small letter r with mid-height left hook: latin small letter r
	0x1DF29: 0x0073,  // latin small letter s with mid-height left hook: latin small letter s
	0x1DF2A: 0x0074,  // latin small letter t with mid-height left hook: latin small letter t
}
