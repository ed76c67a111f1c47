// Package selection is the llm plugin's selector logic: it asks a chat
// model which of a record manifest's rows to inject for a turn, and whether
// the working set sufficed. It works over any Completer, so the plugin
// serves it through the same chat client as its compactor.
package selection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/memhost/memhost/sdk"
)

// defaultMax applies when a request gives no maximum.
const defaultMax = 8

// answerTokens bounds the model's answer: a list of ids, not prose.
const answerTokens = 1024

// errUnparseable is a model answer that is not the asked JSON object.
var errUnparseable = errors.New("the model's answer is not the selection JSON")

const selectSystemPrompt = `You choose which saved memory records an AI agent should see for its current turn.
You get the turn text and a list of candidate records (id, kind, title, description, age). The records are in no particular order.
Pick only records that would clearly help answer or act on this turn; picking none is a valid answer.
Never pick an id listed under "suppressed" (the agent already has it) and never invent ids.
Set "coverage" to "need_deeper_sweep" when the turn seems to need memory that none of the candidates holds, otherwise "sufficient".
Answer with one JSON object and nothing else: {"selected_ids": ["..."], "coverage": "sufficient"}`

// promptRow is a manifest row as the model sees it.
type promptRow struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	Age         string `json:"age"`
}

type promptInput struct {
	Turn       string      `json:"turn"`
	Max        int         `json:"max_records"`
	Suppressed []string    `json:"suppressed"`
	Candidates []promptRow `json:"candidates"`
}

// answer is the JSON the model is asked for.
type answer struct {
	SelectedIDs []string `json:"selected_ids"`
	Coverage    string   `json:"coverage"`
}

// Message is one chat message of the OpenAI chat completions API.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Completer sends messages to a chat model and answers the first choice's
// content, at most maxTokens long. It answers an error wrapping ErrEmpty
// for an answer without content or choices (worth a repair round trip),
// sdk.ErrDeadline for a deadline and sdk.ErrUnavailable for any other
// failure of the endpoint. Any chat client can back the selector through it.
type Completer func(ctx context.Context, messages []Message, maxTokens int) (string, error)

// ErrEmpty is a model answer without content.
var ErrEmpty = errors.New("empty answer")

// Select asks the model through complete which of at most maxRows of the
// request's unsuppressed rows to inject. An answer that does not parse gets
// one repair round trip; ids the manifest does not hold, suppressed ids and
// repeats are dropped, and at most req.Max ids are answered.
func Select(ctx context.Context, complete Completer, maxRows int, req sdk.SelectRequest) (sdk.Selection, error) {
	if err := validate(req); err != nil {
		return sdk.Selection{}, fmt.Errorf("llm: %w", err)
	}
	max := req.Max
	if max == 0 {
		max = defaultMax
	}
	suppressed := make(map[string]bool, len(req.SuppressedIDs))
	for _, id := range req.SuppressedIDs {
		suppressed[id] = true
	}
	var rows []sdk.ManifestRow
	for _, r := range req.Rows {
		if !suppressed[r.ID] {
			rows = append(rows, r)
		}
	}
	if strings.TrimSpace(req.Query) == "" || len(rows) == 0 {
		return sdk.Selection{IDs: []string{}, Coverage: sdk.CoverageSufficient}, nil
	}
	rows = rows[:min(len(rows), maxRows)]
	messages := []Message{
		{Role: "system", Content: selectSystemPrompt},
		{Role: "user", Content: userPrompt(req, rows, max, time.Now())},
	}
	content, err := complete(ctx, messages, answerTokens)
	var ans answer
	if err == nil {
		ans, err = parseAnswer(content)
	}
	if errors.Is(err, errUnparseable) || errors.Is(err, ErrEmpty) {
		// One repair round trip: show the model its answer and the problem.
		messages = append(messages,
			Message{Role: "assistant", Content: content},
			Message{Role: "user", Content: "That answer could not be used (" + err.Error() + "). " +
				`Answer again with only the JSON object {"selected_ids": [...], "coverage": "sufficient" or "need_deeper_sweep"}.`})
		content, err = complete(ctx, messages, answerTokens)
		if err == nil {
			ans, err = parseAnswer(content)
		}
		if errors.Is(err, errUnparseable) || errors.Is(err, ErrEmpty) {
			err = fmt.Errorf("%w after one repair: %w", err, sdk.ErrUnavailable)
		}
	}
	if err != nil {
		if !errors.Is(err, errUnparseable) {
			return sdk.Selection{}, err // the completer's, which names the plugin
		}
		return sdk.Selection{}, fmt.Errorf("llm: %w", err)
	}
	known := make(map[string]bool, len(rows))
	for _, r := range rows {
		known[r.ID] = true
	}
	ids := []string{}
	for _, id := range ans.SelectedIDs {
		if known[id] && len(ids) < max {
			ids = append(ids, id)
			known[id] = false // a repeat is dropped
		}
	}
	return sdk.Selection{IDs: ids, Coverage: sdk.Coverage(ans.Coverage)}, nil
}

// userPrompt is the turn, the suppressed ids and the shuffled rows as
// JSON. Shuffling keeps the model from favouring whatever the provider
// ranked first; the seed comes from the request, so one request always
// gives one prompt.
func userPrompt(req sdk.SelectRequest, rows []sdk.ManifestRow, max int, now time.Time) string {
	h := fnv.New64a()
	h.Write([]byte(req.Query))
	for _, r := range rows {
		h.Write([]byte(r.ID))
	}
	rng := rand.New(rand.NewPCG(h.Sum64(), 0x6d656d686f7374))
	in := promptInput{Turn: req.Query, Max: max, Suppressed: req.SuppressedIDs, Candidates: make([]promptRow, len(rows))}
	if in.Suppressed == nil {
		in.Suppressed = []string{}
	}
	for i, j := range rng.Perm(len(rows)) {
		r := rows[j]
		in.Candidates[i] = promptRow{ID: r.ID, Kind: string(r.Kind), Title: r.Title, Description: r.Description, Age: age(r.UpdatedAt, now)}
	}
	data, _ := json.Marshal(in) // plain strings and ints: cannot fail
	return string(data)
}

// age says how long ago t was, in whole days. Counted in seconds:
// time.Time.Sub saturates at 292 years, and an imported record may have
// been saved in any year from 1.
func age(t, now time.Time) string {
	secs := now.Unix() - t.Unix()
	if now.Nanosecond() < t.Nanosecond() {
		secs--
	}
	days := secs / (24 * 60 * 60)
	switch {
	case t.IsZero():
		return "unknown"
	case days <= 0:
		return "today"
	case days == 1:
		return "1 day"
	}
	return fmt.Sprintf("%d days", days)
}

// parseAnswer reads the selection JSON from a model's answer, tolerating
// a Markdown code fence or prose around the object, braces in the prose
// too: the first object that starts at a brace and is the selection JSON
// is the answer. If none is, the error is the first object's.
func parseAnswer(content string) (answer, error) {
	s := strings.TrimSpace(content)
	if s == "" {
		return answer{}, ErrEmpty
	}
	var first error
	for i, tries := 0, 0; i < len(s) && tries < maxObjectTries; i++ {
		if s[i] != '{' {
			continue
		}
		tries++
		a, err := parseObject(s[i:])
		if err == nil {
			return a, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		return answer{}, fmt.Errorf("%w: no JSON object", errUnparseable)
	}
	return answer{}, first
}

// maxObjectTries bounds the braces parseAnswer reads an object at, so an
// answer of braces costs linear time.
const maxObjectTries = 16

// parseObject reads the selection JSON at the start of s; whatever follows
// the object is ignored.
func parseObject(s string) (answer, error) {
	var a answer
	var raw map[string]json.RawMessage
	if err := json.NewDecoder(strings.NewReader(s)).Decode(&raw); err != nil {
		return answer{}, fmt.Errorf("%w: %v", errUnparseable, err)
	}
	ids, ok := raw["selected_ids"]
	if !ok {
		return answer{}, fmt.Errorf("%w: no selected_ids", errUnparseable)
	}
	if err := json.Unmarshal(ids, &a.SelectedIDs); err != nil {
		return answer{}, fmt.Errorf("%w: selected_ids must be a list of strings", errUnparseable)
	}
	if cov, ok := raw["coverage"]; ok {
		if err := json.Unmarshal(cov, &a.Coverage); err != nil {
			return answer{}, fmt.Errorf("%w: coverage must be a string", errUnparseable)
		}
	}
	switch sdk.Coverage(a.Coverage) {
	case sdk.CoverageSufficient, sdk.CoverageNeedDeeperSweep:
	case "":
		a.Coverage = string(sdk.CoverageSufficient)
	default:
		return answer{}, fmt.Errorf("%w: coverage %q is not sufficient or need_deeper_sweep", errUnparseable, a.Coverage)
	}
	return a, nil
}

func validate(req sdk.SelectRequest) error {
	if err := req.Identity.Validate(); err != nil {
		return err
	}
	if req.Max < 0 {
		return fmt.Errorf("max %d must not be negative: %w", req.Max, sdk.ErrInvalid)
	}
	for i, row := range req.Rows {
		if row.ID == "" {
			return fmt.Errorf("rows[%d]: empty id: %w", i, sdk.ErrInvalid)
		}
	}
	return nil
}
