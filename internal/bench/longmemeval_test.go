package bench

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestLoadLongMemEval(t *testing.T) {
	qs, err := LoadLongMemEval(filepath.Join("testdata", "longmemeval_tiny.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 2 {
		t.Fatalf("got %d questions, want 2", len(qs))
	}
	q := qs[0]
	if q.Abstention() || !qs[1].Abstention() {
		t.Errorf("abstention: %v %v, want false true", q.Abstention(), qs[1].Abstention())
	}
	if want := time.Date(2023, 5, 30, 10, 18, 0, 0, time.UTC); !q.Asked.Equal(want) {
		t.Errorf("asked %v, want %v", q.Asked, want)
	}
	if got := q.Sessions[1].Date.Weekday(); got != time.Saturday {
		t.Errorf("session date weekday %v, want Saturday", got)
	}
	if got, want := q.Evidence(), []string{TurnKey("s2", 0)}; !slices.Equal(got, want) {
		t.Errorf("evidence %v, want %v", got, want)
	}
	if qs[1].Answer != "3" {
		t.Errorf("a numeric answer reads %q, want \"3\"", qs[1].Answer)
	}
}

func TestLoadLongMemEvalRejectsMismatchedSessions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	line := `{"question_id":"q","question_date":"2023/05/30 (Tue) 10:18","haystack_dates":["2023/05/20 (Sat) 07:47"],"haystack_session_ids":["a","b"],"haystack_sessions":[[],[]]}` + "\n"
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadLongMemEval(path); err == nil {
		t.Fatal("a haystack with fewer dates than sessions loaded without error")
	}
}

// TestLoadLongMemEvalDevSplit reads the real development split when the
// shared data is present beside the repository.
func TestLoadLongMemEvalDevSplit(t *testing.T) {
	path := filepath.Join("..", "..", "..", "shared", "data", "longmemeval", "longmemeval_s_dev.jsonl.gz")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("development split not present: %v", err)
	}
	qs, err := LoadLongMemEval(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 100 {
		t.Errorf("dev split has %d questions, want 100", len(qs))
	}
	withEvidence := 0
	for _, q := range qs {
		if !q.Abstention() && len(q.Evidence()) > 0 {
			withEvidence++
		}
	}
	if withEvidence < 90 {
		t.Errorf("only %d questions carry evidence turns", withEvidence)
	}
}
