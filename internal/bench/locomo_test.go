package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestLoadLoCoMoSplitsMalformedEvidence(t *testing.T) {
	doc := `[{"sample_id":"s0","conversation":{"speaker_a":"A","speaker_b":"B",
	  "session_2_date_time":"2 May","session_2":[{"speaker":"B","dia_id":"D2:1","text":"later"}],
	  "session_1_date_time":"1 May","session_1":[{"speaker":"A","dia_id":"D1:1","text":"hi"},{"speaker":"B","dia_id":"D1:2","text":"look","blip_caption":"a cat"}]},
	 "qa":[{"question":"q1","evidence":["D1:1; D2:1"],"category":1},
	       {"question":"q2","evidence":["not an id"],"category":"4"},
	       {"question":"q3","evidence":["D1:2","D1:2"],"category":2}]}]`
	path := filepath.Join(t.TempDir(), "locomo.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	samples, err := LoadLoCoMo(path)
	if err != nil {
		t.Fatal(err)
	}
	s := samples[0]
	// Sessions in number order, whatever the key order; captions kept.
	var ids []string
	for _, turn := range s.Turns {
		ids = append(ids, turn.DiaID)
	}
	if !slices.Equal(ids, []string{"D1:1", "D1:2", "D2:1"}) || s.Turns[1].Text != "look [shares an image: a cat]" || s.Turns[2].Seq != 2 || s.Turns[2].Date != "2 May" {
		t.Fatalf("turns = %+v", s.Turns)
	}
	want := [][]string{{"D1:1", "D2:1"}, nil, {"D1:2"}}
	for i, q := range s.Questions {
		if !slices.Equal(q.Evidence, want[i]) {
			t.Errorf("question %d evidence = %v, want %v", i, q.Evidence, want[i])
		}
	}
	if s.Questions[1].Category != 4 {
		t.Errorf("a quoted category was not read: %d", s.Questions[1].Category)
	}
}

// TestLoadLoCoMoReadsEvidenceAsNumbers: the evidence forms locomo10.json
// holds are read as the turns they name ("D30:05" as D30:5, "D:11:26" as
// D11:26); an id that cannot be read, or names no turn, is reported
// rather than dropped silently.
func TestLoadLoCoMoReadsEvidenceAsNumbers(t *testing.T) {
	doc := `[{"sample_id":"s0","conversation":{"speaker_a":"A","speaker_b":"B",
	  "session_1_date_time":"1 May","session_1":[{"speaker":"A","dia_id":"D1:1","text":"hi"},{"speaker":"B","dia_id":"D1:05","text":"yo"}],
	  "session_11_date_time":"2 May","session_11":[{"speaker":"A","dia_id":"D11:26","text":"later"}]},
	 "qa":[{"question":"leading zero","evidence":["D1:05"],"category":2},
	       {"question":"stray colon","evidence":["D:11:26","D1:1"],"category":1},
	       {"question":"unreadable","evidence":["D","D1:1"],"category":4},
	       {"question":"no such turn","evidence":["D4:36"],"category":1},
	       {"question":"same turn twice","evidence":["D1:5","D01:5"],"category":3},
	       {"question":"adversarial","evidence":["D"],"category":5}]}]`
	path := filepath.Join(t.TempDir(), "locomo.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	samples, err := LoadLoCoMo(path)
	if err != nil {
		t.Fatal(err)
	}
	s := samples[0]
	if s.Turns[1].DiaID != "D1:5" {
		t.Errorf("turn dia id %q, want D1:5", s.Turns[1].DiaID)
	}
	for i, c := range []struct {
		evidence, unreadable, missing []string
	}{
		{[]string{"D1:5"}, nil, nil},
		{[]string{"D11:26", "D1:1"}, nil, nil},
		{[]string{"D1:1"}, []string{"D"}, nil},
		{[]string{"D4:36"}, nil, []string{"D4:36"}},
		{[]string{"D1:5"}, nil, nil},
		{nil, []string{"D"}, nil},
	} {
		q := s.Questions[i]
		if !slices.Equal(q.Evidence, c.evidence) || !slices.Equal(q.Unreadable, c.unreadable) || !slices.Equal(q.Missing, c.missing) {
			t.Errorf("%s: evidence %q, unreadable %q, missing %q; want %q, %q, %q", q.Text, q.Evidence, q.Unreadable, q.Missing, c.evidence, c.unreadable, c.missing)
		}
	}
	// Category 5 is not scored, so not reported.
	unreadable, missing := EvidenceFaults(samples)
	if !slices.Equal(unreadable, []string{`sample 0: "D"`}) || !slices.Equal(missing, []string{"sample 0: D4:36"}) {
		t.Errorf("faults: unreadable %q, missing %q", unreadable, missing)
	}
}

// TestLoCoMoIdenticalTurnsShareARecord: two identical turns are one record
// (content-hash dedup); recalling it finds the evidence of either.
func TestLoCoMoIdenticalTurnsShareARecord(t *testing.T) {
	s := Sample{Turns: []Turn{{DiaID: "D1:1", Text: "see you"}, {DiaID: "D1:2", Text: "other"}, {DiaID: "D2:1", Text: "see you", Session: 2, Seq: 2}},
		Questions: []Question{{Text: "q", Category: 1, Evidence: []string{"D2:1"}}}}
	f := &lmeFake{byBody: map[string]string{}, ranking: []string{"see you"}, injected: []string{"see you"}}
	rows, err := EvaluateLoCoMo(context.Background(), f, []Sample{s}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := rows[0]; r.TurnRecall[5] != 1 || r.SessionRecall[5] != 1 || r.Evidence != 1 {
		t.Errorf("the second of two identical turns: turn R@5 %v, session R@5 %v, evidence %v; want 1", r.TurnRecall[5], r.SessionRecall[5], r.Evidence)
	}
}

func TestShares(t *testing.T) {
	cases := []struct {
		want, got         []string
		turn, sessionHits float64
	}{
		{[]string{"D1:1", "D2:3"}, []string{"D2:3", "D5:1"}, 0.5, 0.5},
		{[]string{"D1:1", "D1:2"}, []string{"D1:9"}, 0, 1},
		{[]string{"D3:1"}, []string{"", "D3:1"}, 1, 1},
		{[]string{"D3:1"}, nil, 0, 0},
	}
	for _, c := range cases {
		if got := share(c.want, c.got); got != c.turn {
			t.Errorf("share(%v, %v) = %v, want %v", c.want, c.got, got, c.turn)
		}
		if got := sessionShare(c.want, c.got); got != c.sessionHits {
			t.Errorf("sessionShare(%v, %v) = %v, want %v", c.want, c.got, got, c.sessionHits)
		}
	}
}

// TestLoCoMoTimes: a turn's record carries its session's date as the time
// it happened, and a sample's questions are asked at its last session.
func TestLoCoMoTimes(t *testing.T) {
	s := Sample{Turns: []Turn{
		{Seq: 0, Date: "1:56 pm on 8 May, 2023"},
		{Seq: 1, Date: "10:37 am on 27 June, 2023"},
		{Seq: 2, Date: "sometime"},
	}}
	if got := TurnRecord("i", "c", s.Turns[0]).OccurredAt; got != "2023-05-08T13:56:00Z" {
		t.Errorf("occurred_at %q, want 2023-05-08T13:56:00Z", got)
	}
	if got := TurnRecord("i", "c", s.Turns[2]).OccurredAt; got != "" {
		t.Errorf("an unreadable date gave occurred_at %q", got)
	}
	if got, want := s.End(), time.Date(2023, 6, 27, 10, 37, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("end %v, want %v", got, want)
	}
}
