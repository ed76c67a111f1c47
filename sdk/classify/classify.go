// Package classify sorts the messages of a conversation into the classes a
// compactor keeps them by: standing instructions, decisions, open items,
// facts and chatter. The rules are deterministic and look at how a sentence
// is built, not at single keywords, so "that's important lol" in ordinary
// chatter is chatter, while "from now on, answer in French" is a standing
// instruction until a later "stop answering in French" retires it. The
// template and llm compactors share it; a third-party compactor may too.
package classify

import (
	"slices"
	"strings"
	"unicode"

	"github.com/memhost/memhost/sdk/tokenize"
)

// Class is what a message is kept as, most important first.
type Class int

const (
	Instruction Class = iota // a standing instruction or constraint from the user
	Decision                 // something decided or agreed
	OpenItem                 // something still to do or to answer
	Fact                     // a statement of fact (names, numbers, "my … is …")
	Chatter                  // everything else, tool output among it
)

// Classes lists every class in order of importance.
var Classes = []Class{Instruction, Decision, OpenItem, Fact, Chatter}

func (c Class) String() string {
	return [...]string{"instruction", "decision", "open item", "fact", "chatter"}[c]
}

// Message is one message classified.
type Message struct {
	Class Class
	// Sentences are the sentences that made the class (for an instruction,
	// the directive sentences alone); all of them for chatter.
	Sentences []string
	// Retraction marks an instruction that withdraws an earlier one
	// ("stop answering in French").
	Retraction bool
	topic      []string
	slot       string
}

// Topic is what an instruction is about: its stemmed content words without
// the directive and persistence words.
func (m Message) Topic() []string { return m.topic }

// Text is the message's kept sentences as one line.
func (m Message) Text() string { return strings.Join(m.Sentences, " ") }

// speaksForUser reports whether a role's words can instruct the agent: the
// user's, the system's or the developer's. An assistant restating a rule
// is not the user setting one, and text a tool returned never instructs.
func speaksForUser(role string) bool {
	switch strings.ToLower(strings.TrimSpace(role)) {
	case "user", "human", "system", "developer":
		return true
	}
	return false
}

// isTool reports whether a message is tool traffic.
func isTool(role, text string) bool {
	switch strings.ToLower(strings.TrimSpace(role)) {
	case "tool", "function", "tool_result":
		return true
	}
	return strings.HasPrefix(text, "[tool call") || strings.HasPrefix(text, "[tool result")
}

// QuotedRun reports whether line opens a non-text block of a flattened
// message, as the host's compaction writes each: "[tool call: ls] …",
// "[tool result] …", or a block's type as its JSON names it, lower case
// with underscores ("[document] …", "[search_result] …"), its further
// lines indented. A user's own "[Important] …" or "[x] …" is no block.
func QuotedRun(line string) bool {
	if strings.HasPrefix(line, "[tool call") || strings.HasPrefix(line, "[tool result]") {
		return true
	}
	end := strings.IndexByte(line, ']')
	if !strings.HasPrefix(line, "[") || end < 5 {
		return false
	}
	for _, r := range line[1:end] {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// ownSentences answers the sentences of text outside its quoted runs,
// or nil when it holds none: a tool result, a document or a search result
// in a user's message is text the user passed on, not the user's words.
func ownSentences(text string) map[string]bool {
	var own []string
	quoted, any := false, false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case QuotedRun(line):
			quoted, any = true, true
		case quoted && line != "" && (line[0] == ' ' || line[0] == '\t'):
			// the quoted block's further line
		default:
			quoted = false
			own = append(own, line)
		}
	}
	if !any {
		return nil
	}
	set := map[string]bool{}
	for _, s := range Sentences(strings.Join(strings.Fields(strings.Join(own, "\n")), " ")) {
		set[s] = true
	}
	return set
}

// Classify sorts one message.
func Classify(role, text string) Message {
	speaks := speaksForUser(role)
	var own map[string]bool
	if speaks {
		own = ownSentences(text)
	}
	text = strings.Join(strings.Fields(text), " ")
	if text == "" || isTool(role, text) {
		return Message{Class: Chatter, Sentences: nonEmpty(text)}
	}
	sentences := Sentences(text)
	best := Message{Class: Chatter, Sentences: sentences}
	var instr, decided, open, facts []string
	retraction := false
	for _, s := range sentences {
		w := words(s)
		// A sentence that is not wholly the speaker's own (one of a quoted
		// run, or running into one) does not instruct.
		user := speaks && (own == nil || own[s])
		switch {
		case user && isRetraction(w):
			instr, retraction = append(instr, s), true
		case user && isDirective(w):
			instr = append(instr, s)
		case isDecision(w):
			decided = append(decided, s)
		case isOpen(s, w):
			open = append(open, s)
		case isFact(s, w):
			facts = append(facts, s)
		}
	}
	switch {
	case len(instr) > 0:
		best = Message{Class: Instruction, Sentences: instr, Retraction: retraction && len(instr) == 1}
		best.topic, best.slot = topicOf(instr)
	case len(decided) > 0:
		best = Message{Class: Decision, Sentences: decided}
	case len(open) > 0:
		best = Message{Class: OpenItem, Sentences: sentences}
	case len(facts) > 0:
		best = Message{Class: Fact, Sentences: sentences}
	}
	return best
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// Sentences cuts text at sentence ends (. ! ? ; and a colon that ends a
// lead-in such as "Important:").
func Sentences(text string) []string {
	var out []string
	start := 0
	rs := []rune(text)
	for i, r := range rs {
		end := false
		switch r {
		case '.', '!', '?', ';', ':', '\n':
			// A period inside a number or a name (3.5, e.g.) does not end one.
			end = i+1 == len(rs) || unicode.IsSpace(rs[i+1])
		}
		if end {
			if s := strings.TrimSpace(string(rs[start : i+1])); s != "" {
				out = append(out, s)
			}
			start = i + 1
		}
	}
	if s := strings.TrimSpace(string(rs[start:])); s != "" {
		out = append(out, s)
	}
	return out
}

// words lower-cases a sentence into its words, apostrophes kept, with a
// leading "please", "ok" or "and" dropped so the verb comes first.
func words(s string) []string {
	w := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'' || r == '’')
	})
	for i := range w {
		w[i] = strings.ReplaceAll(w[i], "’", "'")
	}
	for len(w) > 0 && slices.Contains([]string{"please", "ok", "okay", "and", "also", "so", "oh", "hey", "important", "note", "but", "then"}, w[0]) {
		w = w[1:]
	}
	return w
}

// has reports whether phrase (words) occurs in w.
func has(w []string, phrase ...string) bool {
	for i := 0; i+len(phrase) <= len(w); i++ {
		if slices.Equal(w[i:i+len(phrase)], phrase) {
			return true
		}
	}
	return false
}

func hasAny(w []string, phrases [][]string) bool {
	for _, p := range phrases {
		if has(w, p...) {
			return true
		}
	}
	return false
}

func split(phrases ...string) [][]string {
	out := make([][]string, len(phrases))
	for i, p := range phrases {
		out[i] = strings.Fields(p)
	}
	return out
}

var (
	// persistent phrases make a sentence a standing instruction wherever
	// they stand in it.
	persistent = split("from now on", "going forward", "from here on", "henceforth", "for the rest of this conversation",
		"for the rest of our conversation", "until i say otherwise", "in the future", "in future", "by default", "every time you", "each time you", "whenever you")
	// openers start a sentence addressed to the agent as a rule.
	openers = split("always", "never", "don't", "dont", "do not", "make sure", "be sure", "remember to", "only use", "use only",
		"avoid", "stop", "no more", "you must", "you should always", "you should never", "you need to always", "you will always", "you'll always",
		"you always", "you never", "you may not", "you must not", "you are not allowed")
	// retractions withdraw an earlier instruction.
	retractions = split("stop", "no longer", "anymore", "any more", "not anymore", "cancel", "forget about", "forget what i said", "never mind",
		"disregard", "ignore my earlier", "ignore what i said", "scrap that", "instead of")
	decisions = split("we decided", "we've decided", "we have decided", "i decided", "i've decided", "decided to", "let's go with", "lets go with",
		"we'll go with", "we will go with", "we agreed", "agreed to", "the decision is", "we're going with", "we are going with", "settled on",
		"we chose", "i chose", "final decision")
	openItems = split("todo", "to do", "remind me", "follow up", "next step", "next steps", "still need", "still needs", "haven't yet", "not yet",
		"pending", "open question", "tbd", "need to", "needs to", "have to", "will get back", "later today", "tomorrow", "by friday", "deadline")
)

// isDirective: a sentence that sets a standing rule for the agent.
func isDirective(w []string) bool {
	if len(w) == 0 {
		return false
	}
	if hasAny(w, persistent) {
		return true
	}
	for _, o := range openers {
		if len(w) > len(o) && slices.Equal(w[:len(o)], o) {
			return true
		}
	}
	return false
}

// isRetraction: a sentence that withdraws a standing rule ("stop answering
// in French", "you no longer need to cc Bob", "don't use tabs anymore").
func isRetraction(w []string) bool {
	if len(w) < 2 || !hasAny(w, retractions) {
		return false
	}
	// "stop" must lead ("please stop …"), not stand in chatter ("the bus
	// stop"); the other phrases are retractions wherever they stand.
	if w[0] == "stop" || w[0] == "cancel" || w[0] == "disregard" {
		return true
	}
	for _, r := range retractions {
		if r[0] != "stop" && r[0] != "cancel" && r[0] != "disregard" && has(w, r...) {
			return true
		}
	}
	return false
}

func isDecision(w []string) bool { return hasAny(w, decisions) }

func isOpen(s string, w []string) bool {
	return hasAny(w, openItems) || strings.HasSuffix(strings.TrimSpace(s), "?") && len(w) > 3
}

// isFact: numbers, a possessive statement, or a name past the first word.
func isFact(s string, w []string) bool {
	if len(w) < 3 {
		return false
	}
	if strings.IndexFunc(s, unicode.IsDigit) >= 0 || has(w, "my") || has(w, "i", "am") || has(w, "i'm") || has(w, "i", "live") || has(w, "i", "work") {
		return true
	}
	fields := strings.Fields(s)
	for _, f := range fields[1:] {
		r := []rune(f)
		if len(r) > 1 && unicode.IsUpper(r[0]) && unicode.IsLower(r[1]) && f != "I" {
			return true
		}
	}
	return false
}

// markerTerms are the stemmed words of directives and retractions, left
// out of a topic.
var markerTerms = func() map[string]bool {
	m := map[string]bool{}
	for _, group := range [][][]string{persistent, openers, retractions} {
		for _, p := range group {
			for _, t := range tokenize.Terms(strings.Join(p, " ")) {
				m[t] = true
			}
		}
	}
	for _, t := range tokenize.Terms("please again instead now ever any more anymore longer want like need") {
		m[t] = true
	}
	return m
}()

// prepositions that make "verb + preposition" a slot one value fills
// ("answer in French", "reply with bullet points").
var prepositions = []string{"in", "with", "using", "as", "to", "into", "at"}

// maxTopicTerms bounds a topic to its instruction's first distinct words:
// enough to tell one rule from another, and it keeps weighing two
// instructions cheap however long either is.
const maxTopicTerms = 64

func topicOf(sentences []string) (topic []string, slot string) {
	seen := map[string]bool{}
	for _, s := range sentences {
		for _, t := range tokenize.Terms(s) {
			if len(topic) == maxTopicTerms {
				break
			}
			if !markerTerms[t] && !seen[t] {
				seen[t] = true
				topic = append(topic, t)
			}
		}
		if slot == "" {
			w := words(s)
			for i := 0; i+1 < len(w); i++ {
				if slices.Contains(prepositions, w[i+1]) {
					if v := tokenize.Terms(w[i]); len(v) == 1 && !markerTerms[v[0]] {
						slot = v[0] + " " + w[i+1]
						break
					}
				}
			}
		}
	}
	return topic, slot
}

// Retires reports whether newer withdraws or replaces older, both
// instructions: a retraction about the same thing ("stop answering in
// French" after "always answer in French"), a directive that reverses a
// retraction about the same thing, or a directive that fills the same slot
// with another value ("answer in English" after "answer in French").
func Retires(newer, older Message) bool { return retires(newer, older, termSet(older.topic)) }

// retires is Retires with the older instruction's topic as a set.
func retires(newer, older Message, olderTopic map[string]bool) bool {
	if newer.Class != Instruction || older.Class != Instruction || len(newer.topic) == 0 {
		return false
	}
	shared := 0
	for _, t := range newer.topic {
		if olderTopic[t] {
			shared++
		}
	}
	if newer.Retraction != older.Retraction {
		return 2*shared >= len(newer.topic) && shared > 0
	}
	return !newer.Retraction && newer.slot != "" && newer.slot == older.slot && shared < len(newer.topic)
}

func termSet(terms []string) map[string]bool {
	set := make(map[string]bool, len(terms))
	for _, t := range terms {
		set[t] = true
	}
	return set
}

// maxWeighed bounds the instructions Retired weighs against each other to
// the latest ones, as every pair is weighed: a conversation of thousands
// of rules would otherwise cost minutes. Earlier ones stand as said.
const maxWeighed = 512

// Retired reports, for instructions in the order they were said, which
// ones a later one withdrew or replaced, and which retractions did their
// work (withdrew something) and need not stand either. Messages of other
// classes are never retired; of the instructions, the latest maxWeighed
// are weighed.
func Retired(kinds []Message) []bool {
	dropped := make([]bool, len(kinds))
	var weighed []int
	for i := range kinds {
		if kinds[i].Class == Instruction {
			weighed = append(weighed, i)
		}
	}
	weighed = weighed[max(0, len(weighed)-maxWeighed):]
	topics := make([]map[string]bool, len(weighed))
	for n, i := range weighed {
		topics[n] = termSet(kinds[i].topic)
		for m, j := range weighed[:n] {
			if !dropped[j] && retires(kinds[i], kinds[j], topics[m]) {
				dropped[j] = true
				if kinds[i].Retraction {
					dropped[i] = true
				}
			}
		}
	}
	return dropped
}

// Said is one message of a conversation.
type Said struct{ Role, Text string }

// Standing answers the instructions still standing after a conversation:
// each directive sentence of the user's, the system's or the developer's,
// in the order said, less those a later one retired.
func Standing(conversation []Said) []Message {
	var units []Message
	for _, s := range conversation {
		m := Classify(s.Role, s.Text)
		if m.Class != Instruction {
			continue
		}
		for _, sentence := range m.Sentences {
			units = append(units, Classify(s.Role, sentence))
		}
	}
	dropped := Retired(units)
	out := units[:0:0]
	for i, u := range units {
		if !dropped[i] && !u.Retraction {
			out = append(out, u)
		}
	}
	return out
}

// Covers reports whether text states instruction: some line of it holds
// every word of the instruction's topic (a paraphrase counts, a dropped
// object does not).
func Covers(text string, instruction Message) bool {
	if len(instruction.topic) == 0 {
		return true
	}
	for _, l := range strings.Split(text, "\n") {
		terms := tokenize.Terms(l)
		all := true
		for _, t := range instruction.topic {
			if !slices.Contains(terms, t) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
