package bench

import (
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
