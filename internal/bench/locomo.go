// Package bench measures memhost the way a team choosing a memory layer
// asks: how good (LoCoMo retrieval through the public API) and how fast
// (latency and throughput at scale, through the plugin and through HTTP).
// It drives an abstract Target, so the same runs measure any provider
// behind a real memhost.
package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Sample is one LoCoMo conversation: its turns and its questions.
type Sample struct {
	ID        string
	Index     int
	Turns     []Turn
	Questions []Question
}

// Turn is one utterance of a conversation session.
type Turn struct {
	DiaID   string // "D3:7"
	Session int
	Seq     int // position within the whole conversation
	Speaker string
	Date    string
	Text    string
}

// Question is a LoCoMo question with the turns that answer it.
type Question struct {
	Text     string
	Category int
	Evidence []string // dia ids
	// Unreadable are the evidence strings that name no dia id ("D"),
	// left out of Evidence; Missing the ids of Evidence that name no turn
	// of the sample, kept (never retrieved). The report counts both.
	Unreadable, Missing []string
}

// locomoTimeLayout is a LoCoMo session's date: "1:56 pm on 8 May, 2023".
const locomoTimeLayout = "3:04 pm on 2 January, 2006"

// locomoTime reads a session date; false when it has another shape.
func locomoTime(date string) (time.Time, bool) {
	t, err := time.Parse(locomoTimeLayout, date)
	return t, err == nil
}

// End is when the conversation's last dated session took place: the
// reference time its questions are asked at (zero when no date reads).
func (s Sample) End() time.Time {
	var end time.Time
	for _, t := range s.Turns {
		if at, ok := locomoTime(t.Date); ok && at.After(end) {
			end = at
		}
	}
	return end
}

// Split names the LoCoMo split a sample belongs to: samples 0-4 are the
// development split (the only one tuned on), 5-9 are held out.
func Split(index int) string {
	if index < 5 {
		return "dev"
	}
	return "held-out"
}

var (
	sessionKeyRE = regexp.MustCompile(`^session_(\d+)$`)
	// diaIDRE reads a dia id in the forms the data holds: "D3:7", and in
	// evidence "D30:05" and "D:11:26".
	diaIDRE = regexp.MustCompile(`D\s*:?\s*(\d+)\s*:\s*(\d+)`)
)

// readDiaIDs answers the dia ids s names, each as "D<session>:<turn>"
// with its numbers as numbers ("D30:05" is D30:5, "D:11:26" D11:26).
func readDiaIDs(s string) []string {
	var out []string
	for _, m := range diaIDRE.FindAllStringSubmatch(s, -1) {
		session, err1 := strconv.Atoi(m[1])
		turn, err2 := strconv.Atoi(m[2])
		if err1 == nil && err2 == nil {
			out = append(out, fmt.Sprintf("D%d:%d", session, turn))
		}
	}
	return out
}

// LoadLoCoMo reads locomo10.json. Dia ids are read as numbers (see
// readDiaIDs); malformed evidence strings ("D8:6; D9:17") are split into
// their ids, and strings with no id are kept apart (Question.Unreadable).
func LoadLoCoMo(path string) ([]Sample, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("locomo: %w", err)
	}
	var raw []struct {
		SampleID     string                     `json:"sample_id"`
		Conversation map[string]json.RawMessage `json:"conversation"`
		QA           []struct {
			Question string          `json:"question"`
			Evidence []string        `json:"evidence"`
			Category json.RawMessage `json:"category"`
		} `json:"qa"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("locomo %s: %w", path, err)
	}
	out := make([]Sample, 0, len(raw))
	for i, r := range raw {
		s := Sample{ID: r.SampleID, Index: i}
		var sessions []int
		for k := range r.Conversation {
			if m := sessionKeyRE.FindStringSubmatch(k); m != nil {
				n, _ := strconv.Atoi(m[1])
				sessions = append(sessions, n)
			}
		}
		sort.Ints(sessions)
		for _, n := range sessions {
			var date string
			_ = json.Unmarshal(r.Conversation[fmt.Sprintf("session_%d_date_time", n)], &date)
			var turns []struct {
				Speaker string `json:"speaker"`
				DiaID   string `json:"dia_id"`
				Text    string `json:"text"`
				Caption string `json:"blip_caption"`
			}
			if err := json.Unmarshal(r.Conversation[fmt.Sprintf("session_%d", n)], &turns); err != nil {
				return nil, fmt.Errorf("locomo sample %d session %d: %w", i, n, err)
			}
			for _, t := range turns {
				if ids := readDiaIDs(t.DiaID); len(ids) == 1 {
					t.DiaID = ids[0]
				}
				text := t.Text
				if t.Caption != "" {
					text += " [shares an image: " + t.Caption + "]"
				}
				s.Turns = append(s.Turns, Turn{DiaID: t.DiaID, Session: n, Seq: len(s.Turns), Speaker: t.Speaker, Date: date, Text: text})
			}
		}
		turnIDs := map[string]bool{}
		for _, t := range s.Turns {
			turnIDs[t.DiaID] = true
		}
		for _, q := range r.QA {
			cat, _ := strconv.Atoi(strings.Trim(string(q.Category), `"`))
			out := Question{Text: q.Question, Category: cat}
			for _, e := range q.Evidence {
				ids := readDiaIDs(e)
				if len(ids) == 0 {
					out.Unreadable = append(out.Unreadable, e)
				}
				for _, id := range ids {
					if !slices.Contains(out.Evidence, id) {
						out.Evidence = append(out.Evidence, id)
					}
				}
			}
			for _, id := range out.Evidence {
				if !turnIDs[id] {
					out.Missing = append(out.Missing, id)
				}
			}
			s.Questions = append(s.Questions, out)
		}
		out = append(out, s)
	}
	return out, nil
}

// sessionOf answers the session number of a dia id ("D3:7" → 3).
func sessionOf(diaID string) int {
	s, _, _ := strings.Cut(strings.TrimPrefix(diaID, "D"), ":")
	n, _ := strconv.Atoi(s)
	return n
}

// EvidenceFaults lists, over the questions of categories 1-4, the evidence
// strings that name no dia id (left out) and the ids that name no turn of
// their sample (kept, never retrieved), each as "sample N: id", so a
// report can say what its figures count rather than drop them silently.
func EvidenceFaults(samples []Sample) (unreadable, missing []string) {
	for _, s := range samples {
		for _, q := range s.Questions {
			if q.Category < 1 || q.Category > 4 {
				continue
			}
			for _, e := range q.Unreadable {
				unreadable = append(unreadable, fmt.Sprintf("sample %d: %q", s.Index, e))
			}
			for _, id := range q.Missing {
				missing = append(missing, fmt.Sprintf("sample %d: %s", s.Index, id))
			}
		}
	}
	return unreadable, missing
}
