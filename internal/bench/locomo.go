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
	diaIDRE      = regexp.MustCompile(`D\d+:\d+`)
)

// LoadLoCoMo reads locomo10.json. Malformed evidence strings ("D8:6; D9:17")
// are split into their ids; strings with no id are skipped.
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
				text := t.Text
				if t.Caption != "" {
					text += " [shares an image: " + t.Caption + "]"
				}
				s.Turns = append(s.Turns, Turn{DiaID: t.DiaID, Session: n, Seq: len(s.Turns), Speaker: t.Speaker, Date: date, Text: text})
			}
		}
		for _, q := range r.QA {
			cat, _ := strconv.Atoi(strings.Trim(string(q.Category), `"`))
			var ev []string
			for _, e := range q.Evidence {
				ev = append(ev, diaIDRE.FindAllString(e, -1)...)
			}
			s.Questions = append(s.Questions, Question{Text: q.Question, Category: cat, Evidence: slices.Compact(ev)})
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
