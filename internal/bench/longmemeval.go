package bench

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// LongMemEval is one LongMemEval question with its haystack: about fifty
// chat sessions of one user, a few of which hold the evidence.
type LongMemEval struct {
	ID       string
	Index    int    // position in the whole benchmark
	Type     string // single-session-user, multi-session, temporal-reasoning, …
	Question string
	Answer   string
	Asked    time.Time // when the question is asked: the reference time
	Sessions []LMESession
	// AnswerSessions are the ids of the sessions that hold the evidence.
	AnswerSessions []string
}

// LMESession is one chat session of a haystack.
type LMESession struct {
	ID    string
	Date  time.Time
	Turns []LMETurn
}

// LMETurn is one message of a session; Evidence marks the turns the
// answer needs.
type LMETurn struct {
	Role     string
	Content  string
	Evidence bool
}

// Abstention reports whether the answer is absent from the history; such
// questions have no evidence and are left out of retrieval metrics.
func (q LongMemEval) Abstention() bool { return strings.HasSuffix(q.ID, "_abs") }

// TurnKey names turn i of session s the way evidence is matched.
func TurnKey(session string, i int) string { return fmt.Sprintf("%s#%d", session, i) }

// Evidence lists the keys of the question's evidence turns.
func (q LongMemEval) Evidence() []string {
	var out []string
	for _, s := range q.Sessions {
		for i, t := range s.Turns {
			if t.Evidence {
				out = append(out, TurnKey(s.ID, i))
			}
		}
	}
	return out
}

// lmeTimeLayout is the benchmark's date shape: "2023/05/30 (Tue) 23:40".
const lmeTimeLayout = "2006/01/02 (Mon) 15:04"

// LoadLongMemEval reads the development split (gzipped JSON lines, one
// question per line) from path.
func LoadLongMemEval(path string) ([]LongMemEval, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("longmemeval: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("longmemeval %s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	return readLongMemEval(r, path)
}

func readLongMemEval(r io.Reader, name string) ([]LongMemEval, error) {
	type rawTurn struct {
		Role      string `json:"role"`
		Content   string `json:"content"`
		HasAnswer bool   `json:"has_answer"`
	}
	var raw struct {
		QuestionID     string      `json:"question_id"`
		QuestionType   string      `json:"question_type"`
		Question       string      `json:"question"`
		Answer         any         `json:"answer"`
		QuestionDate   string      `json:"question_date"`
		AnswerSessions []string    `json:"answer_session_ids"`
		Dates          []string    `json:"haystack_dates"`
		SessionIDs     []string    `json:"haystack_session_ids"`
		Sessions       [][]rawTurn `json:"haystack_sessions"`
		Index          int         `json:"index"`
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var out []LongMemEval
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		raw.AnswerSessions, raw.Dates, raw.SessionIDs, raw.Sessions = nil, nil, nil, nil
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			return nil, fmt.Errorf("longmemeval %s line %d: %w", name, line, err)
		}
		if len(raw.Dates) != len(raw.Sessions) || len(raw.SessionIDs) != len(raw.Sessions) {
			return nil, fmt.Errorf("longmemeval %s line %d: %d sessions, %d dates and %d ids", name, line, len(raw.Sessions), len(raw.Dates), len(raw.SessionIDs))
		}
		asked, err := time.Parse(lmeTimeLayout, raw.QuestionDate)
		if err != nil {
			return nil, fmt.Errorf("longmemeval %s line %d: question date: %w", name, line, err)
		}
		q := LongMemEval{ID: raw.QuestionID, Index: raw.Index, Type: raw.QuestionType, Question: raw.Question,
			Answer: fmt.Sprint(raw.Answer), Asked: asked, AnswerSessions: raw.AnswerSessions}
		for i, turns := range raw.Sessions {
			date, err := time.Parse(lmeTimeLayout, raw.Dates[i])
			if err != nil {
				return nil, fmt.Errorf("longmemeval %s line %d: session %d date: %w", name, line, i, err)
			}
			s := LMESession{ID: raw.SessionIDs[i], Date: date, Turns: make([]LMETurn, len(turns))}
			for j, t := range turns {
				s.Turns[j] = LMETurn{Role: t.Role, Content: t.Content, Evidence: t.HasAnswer}
			}
			q.Sessions = append(q.Sessions, s)
		}
		out = append(out, q)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("longmemeval %s: %w", name, err)
	}
	return out, nil
}
