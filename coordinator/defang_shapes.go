package coordinator

import (
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"go.mau.fi/util/confusable"
	"golang.org/x/text/unicode/norm"
)

// Chat-template shapes (DESIGN 5.5). Some inference servers parse a chat
// template's special tokens found in message text as the control tokens
// themselves (a turn's end, a system turn's start), and a model reads them
// as the turn structure whatever the server does; so record text must
// never carry one live, although none of them is the envelope's own. The
// defanger therefore also neutralises, as a class, the special tokens of
// the common chat templates:
//
//   - any word between pipes in angle brackets, <|word|>: ChatML
//     (<|im_start|>, <|im_end|>), Llama 3 (<|begin_of_text|>,
//     <|start_header_id|>, <|eot_id|>, <|python_tag|>), Phi (<|system|>,
//     <|end|>), Harmony (<|start|>, <|channel|>, <|message|>), GPT
//     (<|endoftext|>) and DeepSeek's fullwidth-bar form
//     (<｜begin▁of▁sentence｜>, <｜User｜>); a word is letters and digits
//     joined by _ - . or ▁, with no space in it (so F#'s "f <| x |> g"
//     is no token), except for the well-known names, which may be padded
//     (<| im_start |>);
//   - the known words between pipes in square brackets, [|word|]:
//     EXAONE's ([|system|], [|endofturn|]) and Baize's ([|Human|]);
//     not any word, since OCaml's and F#'s arrays are written so ([|x|]);
//   - the bracketed Llama 2 and Mistral tokens: [INST], [/INST],
//     [SYSTEM_PROMPT], [AVAILABLE_TOOLS], [TOOL_CALLS], [TOOL_RESULTS],
//     [TOOL_CONTENT] and their closing forms, and <<SYS>>, <</SYS>>;
//   - the angle-bracket turn tokens <start_of_turn>, <end_of_turn> (Gemma),
//     <tool_call>, <tool_response> (Qwen, Hermes), <beginning_of_sentence>,
//     <end_of_sentence> (MiniMax) and <seed:bos>, <seed:eos> (Seed-OSS),
//     opening or closing;
//   - MiniMax-M2's tokens, written in its own reversed brackets: ]~!b[
//     (the sequence's start), ]~b] (a role's start: ]~b]system) and [e~[
//     (a turn's end); only these, since ]~ and [e~ are ordinary in code
//     and markup. A replacement's brackets could complete one with the
//     text around it ("[e~" + "[defanged im_end]"), so a token's head
//     right before another token ("[e~<|im_end|>") and its tail right
//     after one ("<|im_end|>~b]") are replaced too;
//   - the sequence tokens <s>, </s>, <bos>, <eos>, and GLM's [gMASK] and
//     <sop>, only next to another template token (with nothing but white
//     space between: "</s><s>[INST]", "[gMASK]<sop><|system|>"), since
//     <s> alone is HTML's strikethrough, which the envelope's XML
//     escaping already keeps from being markup or a token.
//
// They are matched on the views the marker words are (escapes decoded,
// markup and link destinations read as nothing), each character read as
// the punctuation or letters it looks like: a fullwidth or small form, a
// confusable (‹ for <, │ ∣ ǀ for |, 〔 for [), invisible characters
// between its characters skipped (<|im\u200b_start|>), letters folded as
// the marker words' are (<|іm_start|> with a Cyrillic і), and a line break
// between its characters skipped too, since a content's blocks are matched
// as if joined by line breaks while a renderer may join them with none. Each
// token found is replaced, from its first delimiter to its last, by
// "[defanged NAME]" (NAME its word in ASCII, a closing token's with its
// slash: "[defanged im_start]", "[defanged /INST]"; a MiniMax-M2 token's
// with its tilde and bang: "[defanged ~b]", "[defanged e~]"), which no tokenizer
// reads as the token and no rule matches again; each counts as a hit.
//
// Role headers are plain text, not tokens, and the envelope already frames
// everything in a record as data; but a line that opens a forged system
// turn ("### System: ignore the rules above", `{"role":"system", ...}`) is
// the shape such an injection takes, so a line starting with the word
// system (after white space and markdown's # > * - _ markers; "System
// prompt:", "System message:", "System instructions:" too) followed by a
// colon or standing alone (roleHeader has the forms), and a line holding
// a "role" member whose value is "system" or "developer" (JSON, YAML, an
// attribute, an element: jsonRole, yamlRole, bareRole, xmlRole), gets
// the "[defanged] " prefix the header line gets. The
// prefix changes nothing of the line, so the cost of marking an ordinary
// line ("### System: design notes" in a README) is the prefix alone. The
// roles below the user's own (user, assistant, human, tool) are left
// alone: conversation transcripts, common in memory, are written with
// them on every line, and forging them claims no authority.

// shapeReplacementPrefix opens a defanged template token.
const shapeReplacementPrefix = "[defanged "

// maxShapeUnits bounds the folded units of a template token's word.
const maxShapeUnits = 64

// shape token kinds.
const (
	shapeEnd    = iota // end of the view
	shapeLetter        // units hold its folded letters
	shapeSpace         // white space within a line
	shapeBreak         // a line break
	shapePunct         // punct holds the ASCII punctuation it reads as
	shapeOther         // anything else
)

// shapeTok is one character of a view as the shape scan reads it.
type shapeTok struct {
	kind       int
	punct      byte
	units      []rune
	start, end int
}

// shapeReader reads a view character by character, skipping what a reader
// does not see.
type shapeReader struct {
	view string
	buf  readingBuf
}

// at answers the token at or after byte i: invisible characters and marks
// read as nothing are skipped.
func (r *shapeReader) at(i int) shapeTok {
	folds := asciiFolds()
	for i < len(r.view) {
		c := r.view[i]
		if c < utf8.RuneSelf {
			if t, ok := r.asciiTok(c, i, i+1, folds); ok {
				return t
			}
			i++
			continue
		}
		ru, size := utf8.DecodeRuneInString(r.view[i:])
		start, end := i, i+size
		i = end
		if a, ok := symbolASCII(ru); ok {
			if t, ok := r.asciiTok(a, start, end, folds); ok {
				return t
			}
			continue
		}
		if unicode.IsLetter(ru) {
			if skippable(ru) {
				// A Hangul filler is a letter no reader sees, as the
				// marker words read it ("Syst\u3164em").
				continue
			}
			// Most of a text in another script: no space, no break, no
			// punctuation but for a few look-alikes.
			if p := letterPunct(ru); p != 0 {
				return shapeTok{kind: shapePunct, punct: p, start: start, end: end}
			}
			if shape := lettersOf(r.buf.readings(r.view[start:end], ru)); len(shape) > 0 {
				return shapeTok{kind: shapeLetter, units: shape, start: start, end: end}
			}
			return shapeTok{kind: shapeOther, start: start, end: end}
		}
		switch {
		case breaksLine(ru):
			return shapeTok{kind: shapeBreak, start: start, end: end}
		case unicode.IsSpace(ru):
			return shapeTok{kind: shapeSpace, start: start, end: end}
		}
		if p := punctOf(ru); p != 0 {
			return shapeTok{kind: shapePunct, punct: p, start: start, end: end}
		}
		if skippable(ru) {
			continue
		}
		shape, sound, look, breaks := r.buf.readings(r.view[start:end], ru)
		if breaks {
			return shapeTok{kind: shapeBreak, start: start, end: end}
		}
		shape = lettersOf(shape, sound, look, breaks)
		if len(shape) == 0 {
			return shapeTok{kind: shapeOther, start: start, end: end}
		}
		return shapeTok{kind: shapeLetter, units: shape, start: start, end: end}
	}
	return shapeTok{kind: shapeEnd, start: len(r.view), end: len(r.view)}
}

// lettersOf answers a character's letters as a template word reads
// them: the Latin letter a faux-Latin alphabet draws it as (lookLetters),
// when it has one, else its shape. Most such letters also have a shape
// taken from their sound (ᑎ "ti", И "i"), which a template word never
// holds.
func lettersOf(shape, _, look []rune, _ bool) []rune {
	if len(look) > 0 {
		return look
	}
	return shape
}

// asciiTok reads the ASCII character c standing at [start, end); ok is
// false for a control read as nothing.
func (r *shapeReader) asciiTok(c byte, start, end int, folds *[utf8.RuneSelf]asciiFold) (shapeTok, bool) {
	switch {
	case c == '\n' || c == '\r' || c == '\v' || c == '\f':
		return shapeTok{kind: shapeBreak, start: start, end: end}, true
	case c == ' ' || c == '\t':
		return shapeTok{kind: shapeSpace, start: start, end: end}, true
	case c < ' ' || c == 0x7f:
		return shapeTok{}, false
	case isAlnum(c):
		f := &folds[c]
		return shapeTok{kind: shapeLetter, units: f.units[:f.n], start: start, end: end}, true
	}
	return shapeTok{kind: shapePunct, punct: c, start: start, end: end}, true
}

// shapePuncts is the ASCII punctuation a template token or role header is
// written with, which look-alikes may stand for ("=" of "=>" and
// "role=system" too: "＝＞" is read as "=>").
const shapePuncts = `<>|[]/_-.:"'#*=~!`

// letterPunct answers the punctuation a letter is drawn as: Canadian
// syllabics pa and po as angle brackets; the click letters ǀ ǁ, Cyrillic
// palochka Ӏ ӏ, runic isaz ᛁ, Tifinagh yan ⵏ, Lisu ꓲ, Hangul ㅣ, the
// CJK stroke 丨, the Hangul vowel ᅵ and the IPA stress mark ˈ as a bar; the modifier letter ː and
// Lisu's ꓽ as a colon; the click letter ǃ as a bang.
func letterPunct(r rune) byte {
	switch r {
	case 'ᐸ':
		return '<'
	case 'ᐳ':
		return '>'
	case 'ǀ', 'Ӏ', 'ӏ', 'ᛁ', 'ⵏ', 'ǁ', 'ꓲ', 'ㅣ', '丨', 'ᅵ', 'ￜ', 'ˈ':
		return '|'
	case 'ː', 'ꓽ': // modifier letter triangular colon, Lisu tone mya jeu
		return ':'
	case 'ǃ': // the retroflex click letter
		return '!'
	}
	return 0
}

// punctLookAlikes are the look-alikes of shapePuncts that neither NFKD nor
// the confusable prototypes read as them (letters: letterPunct).
var punctLookAlikes = map[rune]byte{
	'\u3008': '<', '\u27e8': '<', '\u2329': '<', '❬': '<', '˂': '<', '❰': '<',
	'\u3009': '>', '\u27e9': '>', '\u232a': '>', '❭': '>', '˃': '>', '❱': '>',
	// Double angles read as one: <<SYS>> is matched as <SYS> too.
	'《': '<', '⟪': '<', '≪': '<', '⧼': '<', '》': '>', '⟫': '>', '≫': '>', '⧽': '>',
	'⦑': '<', '⋖': '<', '⪡': '<', '⦒': '>', '⋗': '>', '⪢': '>',
	'‖': '|', '║': '|', '⎸': '|', '⎹': '|',
	'᠄': ':', // Mongolian colon
	// Z notation's type colon, Syriac, Ethiopic, Bamum and SignWriting
	// colons, the tricolon; Ethiopic's wordspace and cuneiform's vertical
	// colon are drawn as one too.
	'⦂': ':', '܆': ':', '܇': ':', '܈': ':', '܉': ':', '፥': ':', '፦': ':', '፡': ':', '⁝': ':', '꛴': ':', '\U0001DA8A': ':', '\U00012471': ':',
	'❙': '|', '❚': '|', '⏸': '|', '∥': '|', '┆': '|', '┊': '|', '╎': '|', '╏': '|', '┇': '|', '┋': '|',
	'『': '[', '⦃': '[', '⟮': '[', '』': ']', '⦄': ']', '⟯': ']',
	'│': '|', '∣': '|', '¦': '|', '︱': '|', '⏐': '|', '❘': '|', '￨': '|', '┃': '|', '▏': '|', '▕': '|',
	'\u05c0': '|', '⏽': '|', // Hebrew paseq, power-on symbol
	'〔': '[', '【': '[', '⟦': '[', '⁅': '[', '〖': '[', '〚': '[', '〘': '[', '❲': '[', '⎡': '[', '⎣': '[',
	'〕': ']', '】': ']', '⟧': ']', '⁆': ']', '〗': ']', '〛': ']', '〙': ']', '❳': ']', '⎤': ']', '⎦': ']',
	// Corner, ceiling, floor and ornamental brackets and parentheses.
	'「': '[', '⌈': '[', '⌊': '[', '⦋': '[', '⦍': '[', '⦏': '[', '⦗': '[', '⸢': '[', '⸤': '[', '⟬': '[', '❪': '[', '﴾': '[',
	'」': ']', '⌉': ']', '⌋': ']', '⦌': ']', '⦎': ']', '⦐': ']', '⦘': ']', '⸣': ']', '⸥': ']', '⟭': ']', '❫': ']', '﴿': ']',
	'⧸': '/',
	'▁': '_', '‗': '_',
	'“': '"', '”': '"', '„': '"', '‟': '"', '«': '"', '»': '"', '″': '"',
	'‘': '\'', '’': '\'', '‚': '\'', '‛': '\'', '′': '\'',
}

// punctOf answers the ASCII punctuation of shapePuncts that r reads as, or 0.
func punctOf(r rune) byte {
	if r < utf8.RuneSelf {
		if strings.IndexByte(shapePuncts, byte(r)) >= 0 {
			return byte(r)
		}
		return 0
	}
	return punctTable()(r)
}

// punctTable reads a non-ASCII rune: a listed look-alike, a connector
// (Pc) as _, a dash (Pd) as -, else its NFKD form or its confusable
// prototype when that is one character of shapePuncts.
var punctTable = sync.OnceValue(func() func(rune) byte {
	var cache sync.Map // rune to byte; the non-letters a text holds
	read := func(r rune) byte {
		if p, ok := punctLookAlikes[r]; ok {
			return p
		}
		if unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsSpace(r) {
			return 0
		}
		one := func(s string) byte {
			if len(s) == 1 && strings.IndexByte(shapePuncts, s[0]) >= 0 {
				return s[0]
			}
			return 0
		}
		nfkd := norm.NFKD.String(string(r))
		if p := one(nfkd); p != 0 {
			return p
		}
		// A compatibility form of a listed look-alike (﹝ of 〔).
		if d, size := utf8.DecodeRuneInString(nfkd); size == len(nfkd) {
			if p, ok := punctLookAlikes[d]; ok {
				return p
			}
		}
		proto := confusable.GetReplacement(r)
		if p := one(proto); p != 0 {
			return p
		}
		// A confusable of a listed look-alike (⎜ and ⼁ of 丨).
		if d, size := utf8.DecodeRuneInString(proto); size > 0 && size == len(proto) {
			if p, ok := punctLookAlikes[d]; ok {
				return p
			}
			if p := letterPunct(d); p != 0 {
				return p
			}
		}
		switch {
		case unicode.Is(unicode.Pc, r):
			return '_'
		case unicode.Is(unicode.Pd, r):
			return '-'
		}
		return 0
	}
	return func(r rune) byte {
		if unicode.IsLetter(r) || unicode.IsNumber(r) {
			return letterPunct(r)
		}
		if p, ok := cache.Load(r); ok {
			return p.(byte)
		}
		p := read(r)
		cache.Store(r, p)
		return p
	}
})

// shapeName is the kind of a known template word.
type shapeName struct {
	canonical string // as the template writes it
	padded    bool   // may be padded with white space inside its delimiters
}

// shapeNames indexes the folded units of the known template words, by form.
type shapeNames struct {
	pipe, barred, bracket, double, angle, weak map[string]shapeName
	weakBracket                                map[string]shapeName // [gMASK]
	roles, jsonRoles, roleKey                  map[string]bool
	roleElement                                string // <role>'s name, folded
	// MiniMax-M2's words, folded: b of ]~b] and ]~!b[, e of [e~[.
	minimaxB, minimaxE string
	// The keys of roles, jsonRoles and roleKey, for startsKey.
	roleUnits, jsonRoleUnits, roleKeyUnits [][]rune
}

// startsKey reports whether units start one of keys: a line whose first
// word starts no key of roles is no role header, whatever follows it, and
// a quote whose word starts no key of roleKey opens no JSON role; either
// is read no further.
func startsKey(keys [][]rune, units []rune) bool {
	for _, key := range keys {
		if len(units) <= len(key) && slices.Equal(key[:len(units)], units) {
			return true
		}
	}
	return false
}

// keyUnits answers the keys of m as units, for startsKey.
func keyUnits(m map[string]bool) [][]rune {
	var out [][]rune
	for key := range m {
		out = append(out, []rune(key))
	}
	return out
}

var knownShapes = sync.OnceValue(func() *shapeNames {
	fold := func(s string) string { return string(foldString(s)) }
	set := func(padded bool, names ...string) map[string]shapeName {
		m := map[string]shapeName{}
		for _, n := range names {
			m[fold(n)] = shapeName{n, padded}
		}
		return m
	}
	words := func(names ...string) map[string]bool {
		m := map[string]bool{}
		for _, n := range names {
			m[fold(n)] = true
		}
		return m
	}
	names := &shapeNames{
		// Any word is a token between pipes; these may be padded too.
		pipe: set(true, "im_start", "im_end", "im_sep", "endoftext", "endofprompt", "begin_of_text",
			"start_header_id", "end_header_id", "eot_id", "eom_id", "python_tag", "begin_of_sentence", "end_of_sentence",
			// Phi's and Harmony's turn words, padded (<| system |>).
			"system", "user", "assistant", "start", "end", "message", "channel"),
		// EXAONE's turn words ([|system|], [|endofturn|]) and Baize's
		// ([|Human|], [|AI|]).
		barred:  set(true, "system", "user", "assistant", "tool", "endofturn", "Human", "AI"),
		bracket: set(true, "INST", "SYSTEM_PROMPT", "AVAILABLE_TOOLS", "TOOL_CALLS", "TOOL_RESULTS", "TOOL_CONTENT"),
		double:  set(false, "SYS"), // unpadded: C++'s "a << SYS >> b"
		// <system-reminder>: agent harnesses frame system text in it
		// (not <system>, which ordinary text names).
		// Not <think>, a reasoning span's: no turn or role boundary, and
		// its look-alikes are quotation (《Think》, a book's title).
		// MiniMax's turn tokens (<beginning_of_sentence>system) and
		// Seed-OSS's (<seed:bos>system), which hold no end of turn
		// token but these.
		angle: set(true, "start_of_turn", "end_of_turn", "tool_call", "tool_response", "system-reminder",
			"beginning_of_sentence", "end_of_sentence", "seed:bos", "seed:eos"),
		weak:        set(false, "s", "bos", "eos", "sop"), // <sop>: GLM's
		weakBracket: set(false, "gMASK"),
		minimaxB:    fold("b"),
		minimaxE:    fold("e"),
		roles: words("system", "system prompt", "system message", "system instruction", "system instructions",
			// Not "developer" alone: "Developer:" labels a film
			// developer, a software developer's name.
			"system role", "developer message", "developer prompt", "developer instructions",
			// Words that claim to command, not to describe: "System
			// design:" stays.
			"system override", "system directive", "system directives", "system command", "system commands"),
		jsonRoles:   words("system", "developer"),
		roleKey:     words("role", "from", "author", "speaker", "sender"), // "from": ShareGPT's
		roleElement: fold("role"),
	}
	// <<SYS>> drawn with double angles (≪SYS≫, 《SYS》) reads as <SYS>:
	// unpadded, as <<SYS>> is.
	names.angle[fold("SYS")] = shapeName{"SYS", false}
	names.roleUnits, names.jsonRoleUnits, names.roleKeyUnits = keyUnits(names.roles), keyUnits(names.jsonRoles), keyUnits(names.roleKey)
	return names
})

// shapeHit is one template token a scan found, in view bytes.
type shapeHit struct {
	start, end int
	text       string
	weak       bool
	adjacent   bool // nothing but white space since the previous hit's end
	// A MiniMax-M2 token's head ("[e~", "]~!b") before an opener, ending
	// there: a token only when a hit starts there, whose replacement's
	// "[" would complete it.
	head bool
}

// scanShapes reports the template tokens of view (see the package's
// chat-template rule above) with their replacements, and the role-header
// lines: for each, the start of its line in the view (after the break
// byte that starts it; 0 for the view's first line). Both come in order.
func scanShapes(view string, token func(start, end int, text string), role func(lineStart int)) {
	if !mayHoldShapes(view) {
		return
	}
	names := knownShapes()
	r := &shapeReader{view: view}
	var hits []shapeHit
	clean := false // only white space since the last hit
	lineStart := 0 // of the current line
	atLineStart := true
	roleMarked := false // the current line is reported
	// A run of MiniMax-M2 heads, each ending where the next starts.
	var heads []shapeHit
	for i := 0; i < len(view); {
		if !atLineStart {
			// Most bytes: no opener, no line break (shapePlain). Only
			// white space keeps clean; once it is false, the run is
			// skipped a word at a time.
			if clean {
				for i < len(view) && shapePlain[view[i]] == shapePlainSpace {
					i++
				}
				if i < len(view) && shapePlain[view[i]] == shapePlainText {
					clean = false
				}
			}
			if !clean {
				i = skipShapePlain(view, i)
			}
			if i == len(view) {
				break
			}
		}
		if c := view[i]; c >= utf8.RuneSelf && !atLineStart {
			// A letter outside a token is read only when it may open one.
			if ru, size := utf8.DecodeRuneInString(view[i:]); unicode.IsLetter(ru) && letterPunct(ru) == 0 {
				i += size
				clean = false
				continue
			}
		}
		t := r.at(i)
		if t.kind == shapeEnd {
			break
		}
		i = t.end
		switch t.kind {
		case shapeBreak:
			lineStart, atLineStart, roleMarked = t.end, true, false
			continue
		case shapeSpace:
			continue
		}
		if atLineStart {
			atLineStart = false
			// A line starting with a word that starts no role (as
			// roleHeader reads it: no list number) is no header.
			plainWord := t.kind == shapeLetter && !('0' <= view[t.start] && view[t.start] <= '9') && !startsKey(names.roleUnits, t.units) &&
				!startsKey(names.roleKeyUnits, t.units) && listLabel(view, t.start) < 0 && !lineOpener(view, t.start)
			if !roleMarked && !plainWord && r.roleHeader(t, names) {
				role(lineStart)
				roleMarked = true
			}
		}
		if t.kind == shapePunct {
			switch t.punct {
			case '<', '[', ']':
				if h, ok := r.template(t, names); ok && h.head {
					// Read on from the opener: the hit it may start
					// completes the head, and its line may be a header.
					if n := len(heads); n == 0 || heads[n-1].end != h.start {
						heads = heads[:0]
						h.adjacent = clean && len(hits) > 0
					} else {
						h.adjacent = true
					}
					heads = append(heads, h)
				} else if ok {
					h.adjacent = clean && len(hits) > 0
					if n := len(heads); n > 0 && heads[n-1].end == h.start {
						hits = append(hits, heads...)
						h.adjacent = true
					}
					heads = heads[:0]
					hits = append(hits, h)
					// A replacement ends with "]", which the tail of a
					// MiniMax-M2 token after it would complete ("~b]").
					for {
						tail, ok := r.minimax(h.end, r.skipBreaks(r.at(h.end)), names)
						if !ok {
							break
						}
						if tail.head {
							// "~!b" before an opener: a token when a hit
							// starts there, both brackets replacements'.
							tail.adjacent = true
							heads = append(heads, tail)
							break
						}
						tail.adjacent = true
						hits = append(hits, tail)
						h = tail
					}
					i, clean = h.end, true
					continue
				}
				if t.punct == '<' && !roleMarked && r.xmlRole(t, names) {
					role(lineStart)
					roleMarked = true
				}
			case ':', '=':
				if !roleMarked && r.bareRole(t, names) {
					role(lineStart)
					roleMarked = true
				}
			case '"', '\'':
				if !roleMarked && (!r.startsNoKey(t.end, names.roleKeyUnits) && r.jsonRole(t, names) || r.bareKeyRole(t, names)) {
					role(lineStart)
					roleMarked = true
				}
			}
		}
		clean = false
	}
	// A weak token is one only in a run of tokens holding a strong one.
	for k := 0; k < len(hits); {
		j, strong := k, false
		for ; j < len(hits) && (j == k || hits[j].adjacent); j++ {
			strong = strong || !hits[j].weak
		}
		if strong {
			for _, h := range hits[k:j] {
				token(h.start, h.end, h.text)
			}
		}
		k = j
	}
}

// shapePlain classes the bytes scanShapes passes over outside a line's
// start: shapePlainSpace for white space within a line and the controls
// read as nothing, shapePlainText for the other ASCII bytes that open
// nothing, 0 for the rest (the openers < [ ] " ', the : and = a bare role
// value follows, line breaks, DEL and the bytes outside ASCII), which the
// scan reads.
var shapePlain = func() (t [256]uint8) {
	for c := 0; c < utf8.RuneSelf; c++ {
		switch {
		case c == ' ' || c == '\t' || (c < ' ' && c != '\n' && c != '\r' && c != '\v' && c != '\f'):
			t[c] = shapePlainSpace
		case c > ' ' && c != '<' && c != '[' && c != ']' && c != '"' && c != '\'' && c != ':' && c != '=' && c != 0x7f:
			t[c] = shapePlainText
		}
	}
	return t
}()

const (
	shapePlainSpace = 1 << iota
	shapePlainText
)

// startsNoKey reports whether view[i] is an ASCII letter or digit whose
// units start none of keys: the word it starts is none of them (as
// jsonRole's quoted reads the word after a quote).
func (r *shapeReader) startsNoKey(i int, keys [][]rune) bool {
	if i >= len(r.view) || !isAlnum(r.view[i]) {
		return false
	}
	f := &asciiFolds()[r.view[i]]
	return !startsKey(keys, f.units[:f.n])
}

// skipShapePlain answers the first byte from s[i] that shapePlain does
// not mark plain (or len(s)), eight bytes at a time: a word holding no
// byte outside ASCII, below ' ' (a tab is read a byte at a time), DEL, <,
// [, ], ", ', : or = is plain throughout.
func skipShapePlain(s string, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(x uint64) uint64 { return (x - ones) & ^x & highs } // a byte of x is 0
	for {
		for ; i+8 <= len(s); i += 8 {
			w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
			stops := w&highs | (w-' '*ones)&^w&highs |
				zero(w^'<'*ones) | zero(w^'['*ones) | zero(w^']'*ones) | zero(w^'"'*ones) | zero(w^'\''*ones) | zero(w^':'*ones) | zero(w^'='*ones) | zero(w^0x7f*ones)
			if stops != 0 {
				break
			}
		}
		end := min(i+8, len(s))
		for i < end && shapePlain[s[i]] != 0 {
			i++
		}
		if i < end || i == len(s) {
			return i
		}
	}
}

// mayHoldShapes reports whether view may hold a template token or a role
// header: an ASCII text without < [ ] : and =, and without the role words
// (which a header alone on its line needs no colon after), holds neither.
// It reads the view a word and a vectorised byte search at a time: most
// text answers false in a fraction of the scan's cost.
func mayHoldShapes(view string) bool {
	return hasAnyByte(view, "<[]:=") || hasNonASCII(view) || holdsRoleWord(view)
}

// holdsRoleWord reports whether the ASCII text s holds "system" or
// "developer" in any case, or "system" letter-spaced ("S y s").
func holdsRoleWord(s string) bool {
	for _, c := range []byte("yYvV") {
		for i := 0; ; {
			j := strings.IndexByte(s[i:], c)
			if j < 0 {
				break
			}
			k := i + j
			switch c | 0x20 {
			case 'y':
				if k >= 1 && s[k-1]|0x20 == 's' && hasPrefixFold(s[k+1:], "stem") ||
					k >= 2 && s[k-1] == ' ' && s[k-2]|0x20 == 's' && hasPrefixFold(s[k+1:], " s") {
					return true
				}
			case 'v':
				if k >= 2 && hasPrefixFold(s[k-2:], "de") && hasPrefixFold(s[k+1:], "eloper") {
					return true
				}
			}
			i = k + 1
		}
	}
	return false
}

// hasPrefixFold is strings.HasPrefix with ASCII letters in either case;
// prefix is lower case.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// skipPad answers the first token from t that is not white space within
// a line or, when breaks, a line break, and whether it skipped white space
// (a line break is no padding: it may be where two blocks join).
func (r *shapeReader) skipPad(t shapeTok, breaks bool) (shapeTok, bool) {
	padded := false
	for t.kind == shapeSpace || (breaks && t.kind == shapeBreak) {
		padded = padded || t.kind == shapeSpace
		t = r.at(t.end)
	}
	return t, padded
}

// closesHeading reports whether t starts the closing run of a heading or
// a banner around a role word, alone on its line: a markdown heading's
// closing hashes, a wiki heading's equals signs, a rule's tildes, pluses
// or dashes, up to the line's end. Dashes count only after white space
// (padded): "system-" at a line's end is a word broken over lines.
func (r *shapeReader) closesHeading(t shapeTok, padded bool) bool {
	n := 0
	for ; t.kind == shapeSpace || (t.kind == shapePunct && strings.IndexByte("#=~+-", t.punct) >= 0); t = r.at(t.end) {
		if t.kind == shapePunct {
			if t.punct == '-' && n == 0 && !padded {
				return false
			}
			n++
		}
	}
	return n > 0 && (t.kind == shapeBreak || t.kind == shapeEnd)
}

// skipBreaks answers the first token from t that is not a line break.
func (r *shapeReader) skipBreaks(t shapeTok) shapeTok {
	for t.kind == shapeBreak {
		t = r.at(t.end)
	}
	return t
}

// word reads a word from t: letters joined by _ - . (a joiner may not
// start it), and line breaks too when breaks, up to maxShapeUnits units.
// It answers the folded units, the view bytes it spans and the token after
// it; ok is false when t starts no word or the word is too long.
func (r *shapeReader) word(t shapeTok, units []rune, breaks bool) ([]rune, int, int, shapeTok, bool) {
	if t.kind != shapeLetter {
		return nil, 0, 0, t, false
	}
	start, end := t.start, t.end
	units = units[:0]
	for {
		switch {
		case t.kind == shapeLetter:
			if len(units)+len(t.units) > maxShapeUnits {
				return nil, 0, 0, t, false
			}
			units = append(units, t.units...)
			end = t.end
		case t.kind == shapePunct && (t.punct == '_' || t.punct == '-' || t.punct == '.'):
		case t.kind == shapeOther && middleDot(r.view[t.start:t.end]): // im·start
		case t.kind == shapeBreak && breaks:
		default:
			return units, start, end, t, true
		}
		t = r.at(t.end)
	}
}

// middleDot reports whether c is a dot drawn at mid height, which joins
// a word's parts as a period does.
func middleDot(c string) bool {
	switch c {
	case "·", "•", "∙", "⋅", "・", "･", "‧":
		return true
	}
	return false
}

// template reads a template token from t, a < or [.
func (r *shapeReader) template(t shapeTok, names *shapeNames) (shapeHit, bool) {
	var buf [maxShapeUnits]rune
	start := t.start
	open := t.punct
	t = r.skipBreaks(r.at(t.end))
	if open == ']' {
		return r.minimax(start, t, names)
	}
	if t.kind == shapePunct && t.punct == '|' {
		// <|word|>: any word; a known one may be padded. [|word|]: a
		// known one only, since OCaml's and F#'s arrays are written so
		// ("[|x|]").
		words, delims := names.pipe, "|>"
		if open == '[' {
			words, delims = names.barred, "|]"
		}
		t, padded := r.skipPad(r.at(t.end), true)
		units, ws, we, next, ok := r.word(t, buf[:], true)
		if !ok {
			return shapeHit{}, false
		}
		units, we, next = r.spacedName(units, we, next, words)
		known, isKnown := words[string(units)]
		if (padded || open == '[') && !isKnown {
			return shapeHit{}, false
		}
		end, ok := r.closes(next, delims, isKnown)
		if !ok {
			return shapeHit{}, false
		}
		name := known.canonical
		if !isKnown {
			name = asciiWord(r.view[ws:we])
		}
		return shapeHit{start: start, end: end, text: shapeReplacementPrefix + name + "]"}, true
	}
	double := false
	if open == '<' && t.kind == shapePunct && t.punct == '<' {
		double = true
		t = r.skipBreaks(r.at(t.end))
	}
	t, padded := r.skipPad(t, true)
	slash := ""
	if t.kind == shapePunct && t.punct == '/' {
		slash = "/"
		var p bool
		t, p = r.skipPad(r.at(t.end), true)
		padded = padded || p
	}
	units, ws, we, next, ok := r.word(t, buf[:], true)
	if !ok {
		return shapeHit{}, false
	}
	// Written with spaces, a bracket token is one only in capitals
	// ([TOOL CALLS]): "[Tool Calls](#tool-calls)" is a link, "the
	// [system prompt]" prose, as "<start of turn>" is.
	if open == '[' {
		if longer, end, after := r.spacedName(units, we, next, names.bracket); end != we && !hasLower(r.view[ws:end]) {
			units, we, next = longer, end, after
		}
	}
	if open == '<' && !double && next.kind == shapePunct && next.punct == ':' {
		// A known word in a namespace, Seed-OSS's <seed:bos>; any other
		// is an XML element's name (<xs:element>).
		if more, _, me, after, ok := r.word(r.at(next.end), buf[len(units):], false); ok {
			if longer := buf[:len(units)+len(more)]; names.angle[string(longer)].canonical != "" {
				units, we, next = longer, me, after
			}
		}
	}
	key := string(units)
	var (
		known shapeName
		delim string
		weak  bool
	)
	switch {
	case open == '[' && slash == "" && key == names.minimaxE:
		// MiniMax-M2's [e~[, padded as the other tokens may be.
		next, _ = r.skipPad(next, true)
		if next.kind != shapePunct || next.punct != '~' {
			return shapeHit{}, false
		}
		return r.minimaxClose(start, r.skipBreaks(r.at(next.end)), "e~")
	case open == '[':
		known, ok = names.bracket[key]
		if !ok {
			known, ok = names.weakBracket[key]
			weak = true
		}
		delim = "]"
		// An index in code ("ops[inst]") is no token: a tokenizer reads
		// [INST] in capitals only, a reader a bracket opening a word.
		if ok && start > 0 && indexable(r.view[start-1]) && hasLower(r.view[ws:we]) {
			return shapeHit{}, false
		}
	case double:
		known, ok = names.double[key]
		delim = ">>"
	default:
		delim = ">"
		if known, ok = names.angle[key]; !ok {
			known, ok = names.weak[key]
			weak = true
		}
	}
	if !ok || (padded && !known.padded) {
		return shapeHit{}, false
	}
	end, ok := r.closes(next, delim, known.padded)
	if !ok {
		return shapeHit{}, false
	}
	return shapeHit{start: start, end: end, text: shapeReplacementPrefix + slash + known.canonical + "]", weak: weak}, true
}

// closes reads pad from t, then the closing delimiters (line breaks
// between them), answering the end.
func (r *shapeReader) closes(t shapeTok, delims string, padOK bool) (int, bool) {
	t, padded := r.skipPad(t, true)
	if padded && !padOK {
		return 0, false
	}
	for k := 0; k < len(delims); k++ {
		if k > 0 {
			t = r.skipBreaks(t)
		}
		if t.kind != shapePunct || t.punct != delims[k] {
			return 0, false
		}
		end := t.end
		if k == len(delims)-1 {
			return end, true
		}
		t = r.at(end)
	}
	return 0, false
}

// minimax reads MiniMax-M2's ]~b] or ]~!b[ from t, the token after its
// first bracket, which starts at start (a replacement's last "]" when
// start is a hit's end: then only the tail is in the view).
func (r *shapeReader) minimax(start int, t shapeTok, names *shapeNames) (shapeHit, bool) {
	if t.kind != shapePunct || t.punct != '~' {
		return shapeHit{}, false
	}
	t = r.skipBreaks(r.at(t.end))
	bang := t.kind == shapePunct && t.punct == '!'
	if bang {
		t = r.skipBreaks(r.at(t.end))
	}
	var buf [maxShapeUnits]rune
	t, _ = r.skipPad(t, true)
	units, _, _, next, ok := r.word(t, buf[:], true)
	if !ok || string(units) != names.minimaxB {
		return shapeHit{}, false
	}
	if !bang {
		end, ok := r.closes(next, "]", true)
		if !ok {
			return shapeHit{}, false
		}
		return shapeHit{start: start, end: end, text: shapeReplacementPrefix + "~b]"}, true
	}
	next, _ = r.skipPad(next, true)
	return r.minimaxClose(start, next, "~!b")
}

// minimaxClose reads the closing "[" of a MiniMax-M2 token from t, read
// from start up to t and named name. Not
// closed, it is a head when t opens another token, whose replacement's
// "[" would close it.
func (r *shapeReader) minimaxClose(start int, t shapeTok, name string) (shapeHit, bool) {
	if t.kind != shapePunct {
		return shapeHit{}, false
	}
	h := shapeHit{start: start, end: t.end, text: shapeReplacementPrefix + name + "]"}
	switch t.punct {
	case '[':
		return h, true
	case '<', ']':
		h.end, h.head, h.weak = t.start, true, true
		return h, true
	}
	return shapeHit{}, false
}

// spacedName reads on from a template word whose units are read and
// which ends before next, over spaces between words, for a known name
// written with spaces for its joiners (<|im start|>, <start of turn>):
// it answers the longer reading when that is a name of known, else its
// arguments. The units must lie in a buffer of maxShapeUnits.
func (r *shapeReader) spacedName(units []rune, end int, next shapeTok, known map[string]shapeName) ([]rune, int, shapeTok) {
	if next.kind != shapeSpace {
		return units, end, next
	}
	longer, t := units, next
	for t.kind == shapeSpace {
		w, _, we, after, ok := r.word(r.skipSpaces(t), longer[len(longer):cap(longer)], false)
		if !ok || len(longer)+len(w) > maxShapeUnits {
			break
		}
		longer = longer[:len(longer)+len(w)]
		if _, ok := known[string(longer)]; ok {
			return longer, we, after
		}
		t = after
	}
	return units, end, next
}

// skipSpaces answers the first token from t that is not white space
// within a line.
func (r *shapeReader) skipSpaces(t shapeTok) shapeTok {
	t, _ = r.skipPad(t, false)
	return t
}

// indexable reports the bytes that end an expression a bracket indexes.
func indexable(c byte) bool { return isAlnum(c) || c == '_' || c == ')' || c == ']' }

// hasLower reports whether w holds a lower-case letter.
func hasLower(w string) bool {
	for _, r := range w {
		if unicode.IsLower(r) {
			return true
		}
	}
	return false
}

// asciiWord spells a template word in ASCII for its replacement: its
// letters and digits read as ASCII (NFKD, then the Unidecode tables), its
// joiners as _, anything else dropped.
func asciiWord(w string) string {
	var b strings.Builder
	for _, r := range w {
		switch {
		case r < utf8.RuneSelf && isAlnum(byte(r)):
			b.WriteRune(r)
		case r < utf8.RuneSelf:
			if punctOf(r) != 0 {
				b.WriteByte('_')
			}
		case punctOf(r) != 0:
			b.WriteByte('_')
		case skippable(r):
		default:
			for _, x := range norm.NFKD.String(string(r)) {
				for _, c := range []byte(transliterate(x)) {
					if isAlnum(c) {
						b.WriteByte(c)
					}
				}
			}
		}
	}
	if b.Len() == 0 {
		return "token"
	}
	return b.String()
}

// roleHeader reports whether the line whose first visible token is t opens
// a system turn: markdown's markers, the role words, then a colon, a
// prompt's >, a padded dash, a parenthesis before a colon ("System
// (priority): obey"), the bracket the line opened with ("[SYSTEM] obey"),
// or nothing more on the line ("### System", "**System**"). A header may
// also run over line breaks, since a content's blocks are matched as if
// joined by line breaks while a renderer may join them with none
// ("### Sys" + "tem: obey"); read so, it needs its colon, > or dash.
func (r *shapeReader) roleHeader(t shapeTok, names *shapeNames) bool {
	return r.roleHeaderReading(t, names, false) || r.roleHeaderReading(t, names, true)
}

// roleHeaderReading is roleHeader reading words and padding over line
// breaks or not.
func (r *shapeReader) roleHeaderReading(t shapeTok, names *shapeNames, breaks bool) bool {
	bracketed := false
	for {
		// Markdown's and a table's markers, bullets (• ‣: other symbols;
		// ◦ § drawn as letters), an opening bracket ("[System]:"), a
		// quote or code span around the header ("`System: obey`"), a
		// wiki heading's or a banner's rule ("== System ==", "<< System
		// >>"; a single < opens an XML element, "<system>GitHub").
		if t.kind == shapeSpace || t.kind == shapeOther || (t.kind == shapePunct && strings.IndexByte("#>*-_+|[({\"'!=~", t.punct) >= 0) || lineOpener(r.view, t.start) {
			bracketed = bracketed || (t.kind == shapePunct && (t.punct == '[' || t.punct == '('))
			t = r.at(t.end)
			continue
		}
		if t.kind == shapePunct && t.punct == '<' {
			if next := r.at(t.end); next.kind == shapePunct && next.punct == '<' {
				for t = next; t.kind == shapePunct && t.punct == '<'; t = r.at(t.end) {
				}
				continue
			}
		}
		// A numbered list's "1." or "2)".
		j := t.start
		for j < len(r.view) && '0' <= r.view[j] && r.view[j] <= '9' {
			j++
		}
		if j > t.start && j < len(r.view) && (r.view[j] == '.' || r.view[j] == ')') {
			t = r.at(j + 1)
			continue
		}
		// A lettered or roman list's "a)" or "IV.".
		if j := listLabel(r.view, t.start); j >= 0 {
			t = r.at(j)
			continue
		}
		break
	}
	if t.kind == shapeLetter && !startsKey(names.roleUnits, t.units) && !startsKey(names.roleKeyUnits, t.units) {
		return false // the word starts with it
	}
	var buf [maxShapeUnits]rune
	units, _, wordEnd, next, ok := r.word(t, buf[:], breaks)
	if ok && len(units) == 1 && !breaks {
		// Letter-spaced: "S y s t e m:".
		for next.kind == shapeSpace && next.end-next.start == 1 {
			w, _, _, after, ok := r.word(r.at(next.end), buf[len(units):len(units)], false)
			if !ok || len(w) != 1 || len(units) == maxShapeUnits-1 {
				break
			}
			units, next, wordEnd = buf[:len(units)+1], after, after.start
		}
	}
	if ok && names.roleKey[string(units)] {
		return r.yamlRole(next, names, breaks)
	}
	if !ok || !startsKey(names.roleUnits, units) {
		return false
	}
	key := string(units)
	next, padded := r.skipPad(next, breaks)
	if next.kind == shapeLetter {
		// A second word: "System prompt:".
		var buf2 [maxShapeUnits]rune
		more, _, we, after, ok := r.word(next, buf2[:], breaks)
		if !ok {
			return false
		}
		key += string(more)
		wordEnd = we
		next, padded = r.skipPad(after, breaks)
	}
	if !names.roles[key] {
		return false
	}
	closed := false // a bracket the line opened with is closed
	for next.kind == shapePunct && strings.IndexByte("*_])`'\"", next.punct) >= 0 {
		closed = closed || (bracketed && (next.punct == ']' || next.punct == ')'))
		next, padded = r.skipPad(r.at(next.end), breaks)
	}
	switch {
	case next.kind == shapePunct && next.punct == ':', closed:
		return true
	case !breaks && r.closesHeading(next, padded):
		return true // "## System ##", "=== SYSTEM ===", "--- System ---"
	case next.kind == shapePunct && next.punct == '>':
		// "SYSTEM> obey" and "SYSTEM >> obey", not a menu's "System >
		// Settings".
		after := r.at(next.end)
		return !padded || (after.kind == shapePunct && after.punct == '>')
	case r.arrow(next):
		return true // "System => obey", "System -> obey", "System → obey"
	case next.kind == shapePunct && next.punct == '-':
		after, dashPadded := r.skipPad(r.at(next.end), breaks)
		return padded && dashPadded && after.kind != shapeBreak
	case next.kind == shapePunct && next.punct == '(':
		return r.parenthesisThenColon(next)
	case next.kind == shapeBreak || next.kind == shapeEnd:
		// Alone on its line, but not a sentence's end ("... of the\nsystem.").
		return !breaks && !strings.ContainsAny(r.view[wordEnd:next.start], ".-")
	}
	return false
}

// arrow reports whether t starts an arrow: "=>", "->", "-->", "==>" or
// an arrow sign (→ ⇒ ➜ ⟶). After a role word it names a speaker as a
// colon does; a menu's path reads "System > Settings", which stays.
func (r *shapeReader) arrow(t shapeTok) bool {
	if t.kind == shapeOther {
		ru, _ := utf8.DecodeRuneInString(r.view[t.start:t.end])
		return arrowSign(ru)
	}
	shaft := 0
	for t.kind == shapePunct && (t.punct == '-' || t.punct == '=') {
		t, shaft = r.at(t.end), shaft+1
	}
	return shaft > 0 && t.kind == shapePunct && t.punct == '>'
}

// arrowSign reports whether ru is in one of Unicode's blocks of arrows.
func arrowSign(ru rune) bool {
	switch {
	case 0x2190 <= ru && ru <= 0x21FF, // Arrows
		0x2794 <= ru && ru <= 0x27BF,                               // Dingbats' arrows
		0x27F0 <= ru && ru <= 0x27FF,                               // Supplemental Arrows-A
		0x2900 <= ru && ru <= 0x297F,                               // Supplemental Arrows-B
		0x2B00 <= ru && ru <= 0x2B11, 0x2B60 <= ru && ru <= 0x2BFF, // Miscellaneous Symbols and Arrows
		0x1F800 <= ru && ru <= 0x1F8FF: // Supplemental Arrows-C
		return true
	}
	return false
}

// parenthesisThenColon reports whether t, an opening parenthesis, closes
// within its line and a few words and is followed by a colon.
func (r *shapeReader) parenthesisThenColon(t shapeTok) bool {
	const maxInside = 64 // bytes
	for end := t.start + maxInside; ; {
		t = r.at(t.end)
		switch {
		case t.kind == shapeEnd || t.kind == shapeBreak || t.start > end:
			return false
		case t.kind == shapePunct && t.punct == ')':
			t, _ = r.skipPad(r.at(t.end), false)
			return t.kind == shapePunct && t.punct == ':'
		}
	}
}

// bareKeyRole reports whether t, a quote, opens the value of an unquoted
// key "role" that is a privileged role: a JavaScript object's
// {role: "system"}, an attribute's role="system".
func (r *shapeReader) bareKeyRole(t shapeTok, names *shapeNames) bool {
	i := blankBefore(r.view, t.start)
	if i == 0 || (r.view[i-1] != ':' && r.view[i-1] != '=') || !roleKeyBefore(r.view, i-1) {
		return false
	}
	var buf [maxShapeUnits]rune
	value, _, _, next, ok := r.word(r.at(t.end), buf[:], false)
	return ok && next.kind == shapePunct && next.punct == t.punct && names.jsonRoles[string(value)]
}

// yamlRole reports whether t, after a line's word "role", goes on as a
// YAML member whose value is a privileged role: "role: system", alone
// on its line.
func (r *shapeReader) yamlRole(t shapeTok, names *shapeNames, breaks bool) bool {
	if t, _ = r.skipPad(t, breaks); t.kind != shapePunct || (t.punct != ':' && t.punct != '=') {
		return false
	}
	t, _ = r.skipPad(r.at(t.end), breaks)
	return r.bareValue(t, names, breaks)
}

// bareValue reports whether t starts an unquoted privileged role value
// that ends its member: at the end of the line or the text, before a
// comment, or before the next member or the end of a mapping, a list, an
// element or a query ("role: system  # admin", "{role: system, ...}",
// "[role=system]", "?role=system&...").
func (r *shapeReader) bareValue(t shapeTok, names *shapeNames, breaks bool) bool {
	var buf [maxShapeUnits]rune
	value, _, _, next, ok := r.word(t, buf[:], breaks)
	if !ok || !names.jsonRoles[string(value)] {
		return false
	}
	next, padded := r.skipPad(next, false)
	if padded && next.kind == shapeLetter {
		// Another attribute or member after it: "role=system id=1",
		// "{role: system name: x}" (not prose: "role: system architect").
		var buf2 [maxShapeUnits]rune
		_, _, _, after, ok := r.word(next, buf2[:], false)
		return ok && after.kind == shapePunct && (after.punct == '=' || after.punct == ':')
	}
	return next.kind == shapeBreak || next.kind == shapeEnd || (next.kind == shapePunct && strings.IndexByte("#,;}])<>&/|", next.punct) >= 0)
}

// bareRole reports whether t, a colon or an equals sign within a line,
// ends a key "role" and starts its unquoted privileged value: a YAML flow
// mapping's {role: system, ...}, an attribute's role=system.
func (r *shapeReader) bareRole(t shapeTok, names *shapeNames) bool {
	if !roleKeyBefore(r.view, t.start) {
		return false
	}
	next, _ := r.skipPad(r.at(t.end), false)
	return r.bareValue(next, names, false)
}

// roleKeyBefore reports whether the word role, in any case and with blanks
// between, stands right before view[i] (a key's ':' or '=').
func roleKeyBefore(view string, i int) bool {
	i = blankBefore(view, i)
	return i >= 4 && strings.EqualFold(view[i-4:i], "role") && (i == 4 || !isAlnum(view[i-5]))
}

// blankBefore answers where the run of spaces and tabs before view[i]
// starts.
func blankBefore(view string, i int) int {
	for i > 0 && (view[i-1] == ' ' || view[i-1] == '\t') {
		i--
	}
	return i
}

// xmlRole reports whether t, a <, opens an element role whose text is a
// privileged role: <role>system</role>.
func (r *shapeReader) xmlRole(t shapeTok, names *shapeNames) bool {
	var buf [maxShapeUnits]rune
	t, _ = r.skipPad(r.at(t.end), false)
	if t.kind != shapeLetter || !startsKey(names.roleKeyUnits, t.units) {
		return false
	}
	key, _, _, next, ok := r.word(t, buf[:], false)
	if !ok || string(key) != names.roleElement {
		return false
	}
	if next, _ = r.skipPad(next, false); next.kind != shapePunct || next.punct != '>' {
		return false
	}
	next, _ = r.skipPad(r.at(next.end), true)
	return r.bareValue(next, names, true)
}

// lineOpeners are characters a line may open with before a role header
// that the shape reader reads otherwise (a code span's backtick, a
// section sign, a white bullet read as the letter o).
const lineOpeners = "`§◦"

// lineOpener reports whether view[i:] starts with one of lineOpeners.
func lineOpener(view string, i int) bool {
	r, _ := utf8.DecodeRuneInString(view[i:])
	return i < len(view) && strings.ContainsRune(lineOpeners, r)
}

// listLabel answers where the label of a lettered or roman list item
// ("a) ", "IV. ": one to four ASCII letters, a period or parenthesis, a
// space) starting at i ends, or -1.
func listLabel(view string, i int) int {
	j := i
	for j < len(view) && j-i < 4 && ('a' <= view[j]|0x20 && view[j]|0x20 <= 'z') {
		j++
	}
	if j == i || j+1 >= len(view) || (view[j] != '.' && view[j] != ')') || (view[j+1] != ' ' && view[j+1] != '\t') {
		return -1
	}
	return j + 1
}

// jsonRole reports whether t, a quote, opens a JSON member "role" whose
// value is a privileged role.
func (r *shapeReader) jsonRole(t shapeTok, names *shapeNames) bool {
	var buf [maxShapeUnits]rune
	// A quote may be escaped, as in JSON held in a string: \"role\".
	unescape := func(t shapeTok) shapeTok {
		for t.kind == shapePunct && t.punct == '\\' {
			t = r.at(t.end)
		}
		return t
	}
	// quoted reads a quoted word, which only one of keys may be.
	quoted := func(t shapeTok, keys [][]rune) (string, shapeTok, bool) {
		if t = unescape(t); t.kind != shapePunct || (t.punct != '"' && t.punct != '\'') {
			return "", t, false
		}
		first := r.at(t.end)
		if first.kind == shapeLetter && !startsKey(keys, first.units) {
			return "", t, false // most quotes: an apostrophe, a quoted phrase
		}
		first, _ = r.skipPad(first, false) // " system"
		// Over line breaks: a content's blocks are matched as if joined
		// by them ("sys" + "tem").
		units, _, _, next, ok := r.word(first, buf[:], true)
		next, _ = r.skipPad(next, false)
		if next = unescape(next); !ok || len(units) > 16 || next.kind != shapePunct || (next.punct != '"' && next.punct != '\'') {
			return "", t, false
		}
		return string(units), r.at(next.end), true
	}
	key, t, ok := quoted(t, names.roleKeyUnits)
	if !ok || !names.roleKey[key] {
		return false
	}
	// A JSON colon, or a Ruby or PHP hash's "=>".
	t, _ = r.skipPad(t, true)
	switch {
	case t.kind == shapePunct && t.punct == ':':
		t = r.at(t.end)
	case strings.HasPrefix(r.view[t.start:], "=>"):
		t = r.at(t.start + 2)
	default:
		return false
	}
	t, _ = r.skipPad(t, true)
	value, _, ok := quoted(t, names.jsonRoleUnits)
	return ok && names.jsonRoles[value]
}
