// Package lexical is memhost's deterministic selector: it re-ranks a record
// manifest by how many of the turn's terms each row's title and description
// carry, breaks ties by recency and usage rank, and asks for a deeper sweep
// when even its best row matches the turn weakly.
package lexical

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/tokenize"
)

// Version is the plugin's semantic version, reported in Info.
const Version = "0.1.0"

// Field weights: a query term in the title says more about a row than the
// same term in its one-line description.
const (
	titleWeight       = 1.0
	descriptionWeight = 0.6
)

// fullMatchTerms is how many title hits make a row a full match.
const fullMatchTerms = 3

// defaultMax applies when a request gives no maximum.
const defaultMax = 8

// Config is the plugin's configuration; every key is optional.
type Config struct {
	// MinScore is the best row's term coverage (0..1], under which the
	// selector answers need_deeper_sweep. Coverage 1 is three of the turn's
	// terms in the title (or all of a shorter turn's); a description hit
	// counts 0.6 of a title hit.
	MinScore float64 `json:"min_score"`
	// RecencyHalfLifeDays halves the recency bonus of a row every so
	// many days since its last update.
	RecencyHalfLifeDays float64 `json:"recency_half_life_days"`
	// RecencyWeight scales the recency bonus; it only reorders rows that
	// share terms with the turn, never selects a row on its own.
	RecencyWeight float64 `json:"recency_weight"`
}

// DefaultConfig is what an empty configuration means.
func DefaultConfig() Config {
	return Config{MinScore: 0.5, RecencyHalfLifeDays: 30, RecencyWeight: 0.1}
}

const configSchema = `{"type":"object","additionalProperties":false,"properties":{` +
	`"min_score":{"type":"number","exclusiveMinimum":0,"maximum":1},` +
	`"recency_half_life_days":{"type":"number","exclusiveMinimum":0},` +
	`"recency_weight":{"type":"number","minimum":0,"maximum":1}}}`

// Selector is the lexical selector plugin.
type Selector struct {
	cfg Config
	now func() time.Time
}

// New answers an unconfigured selector with the default configuration.
func New() *Selector { return &Selector{cfg: DefaultConfig(), now: time.Now} }

func (s *Selector) Info() sdk.Info {
	return sdk.Info{
		Name: "lexical", Version: Version, Kinds: []sdk.PluginKind{sdk.KindSelector},
		Protocols: []int{sdk.ProtocolVersion}, ConfigSchema: json.RawMessage(configSchema),
	}
}

func (s *Selector) Configure(_ context.Context, raw json.RawMessage) error {
	cfg := DefaultConfig()
	if err := sdk.DecodeConfig(raw, &cfg); err != nil {
		return fmt.Errorf("lexical: %w", err)
	}
	switch {
	case !(cfg.MinScore > 0 && cfg.MinScore <= 1):
		return fmt.Errorf("lexical: min_score %v must be in (0, 1]: %w", cfg.MinScore, sdk.ErrInvalid)
	case !(cfg.RecencyHalfLifeDays > 0) || math.IsInf(cfg.RecencyHalfLifeDays, 0):
		return fmt.Errorf("lexical: recency_half_life_days %v must be positive: %w", cfg.RecencyHalfLifeDays, sdk.ErrInvalid)
	case !(cfg.RecencyWeight >= 0 && cfg.RecencyWeight <= 1):
		return fmt.Errorf("lexical: recency_weight %v must be in [0, 1]: %w", cfg.RecencyWeight, sdk.ErrInvalid)
	}
	s.cfg = cfg
	return nil
}

// scored is one candidate row with its term coverage and final score.
type scored struct {
	row      sdk.ManifestRow
	coverage float64
	score    float64
}

// Select ranks the rows sharing terms with the query, highest first, and
// answers at most req.Max of them. Rows without a shared term are never
// selected; an empty answer with need_deeper_sweep means the working set
// held nothing for this turn.
func (s *Selector) Select(ctx context.Context, req sdk.SelectRequest) (sdk.Selection, error) {
	if err := ctx.Err(); err != nil {
		return sdk.Selection{}, fmt.Errorf("lexical: %w", err)
	}
	if err := validate(req); err != nil {
		return sdk.Selection{}, fmt.Errorf("lexical: %w", err)
	}
	max := req.Max
	if max == 0 {
		max = defaultMax
	}
	terms := tokenize.Terms(req.Query)
	if len(terms) == 0 {
		return sdk.Selection{IDs: []string{}, Coverage: sdk.CoverageSufficient}, nil
	}
	suppressed := make(map[string]bool, len(req.SuppressedIDs))
	for _, id := range req.SuppressedIDs {
		suppressed[id] = true
	}
	now := s.now()
	q := newQuery(terms)
	seen := make(map[string]bool, len(req.Rows))
	var cands []scored
	for _, row := range req.Rows {
		if suppressed[row.ID] || seen[row.ID] {
			continue
		}
		seen[row.ID] = true
		cov := q.coverage(row)
		if cov == 0 {
			continue
		}
		cands = append(cands, scored{row: row, coverage: cov, score: cov + s.bonus(row, now)})
	}
	slices.SortFunc(cands, func(a, b scored) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		if c := b.row.UpdatedAt.Compare(a.row.UpdatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.row.ID, b.row.ID)
	})
	best := 0.0
	for _, c := range cands {
		best = math.Max(best, c.coverage)
	}
	ids := make([]string, 0, min(max, len(cands)))
	for _, c := range cands[:min(max, len(cands))] {
		ids = append(ids, c.row.ID)
	}
	cov := sdk.CoverageSufficient
	if best < s.cfg.MinScore {
		cov = sdk.CoverageNeedDeeperSweep
	}
	return sdk.Selection{IDs: ids, Coverage: cov}, nil
}

// coverage is the weighted count of the query's terms the row carries, as
// a share of fullMatchTerms (or of the whole query when shorter), capped at
// 1: a turn is long text, so a row is a strong match when it carries a few
// of its terms in the title, not all of them. hit is scratch space, one
// entry per query term, reused across rows.
func (q *query) coverage(row sdk.ManifestRow) float64 {
	clear(q.hit)
	for _, t := range tokenize.Tokens(row.Title) {
		if i, ok := q.index[t]; ok {
			q.hit[i] = titleWeight
		}
	}
	for _, t := range tokenize.Tokens(row.Description) {
		if i, ok := q.index[t]; ok && q.hit[i] == 0 {
			q.hit[i] = descriptionWeight
		}
	}
	sum := 0.0
	for _, w := range q.hit {
		sum += w
	}
	return math.Min(1, sum/(titleWeight*float64(min(len(q.hit), fullMatchTerms))))
}

// query is a turn's distinct terms, indexed for scoring rows.
type query struct {
	index map[string]int
	hit   []float64
}

func newQuery(terms []string) *query {
	q := &query{index: make(map[string]int, len(terms)), hit: make([]float64, len(terms))}
	for i, t := range terms {
		q.index[t] = i
	}
	return q
}

// bonus orders rows of similar coverage: newer and more used first. It is
// below one query term's weight for any realistic query length, and bounded
// by the recency weight.
func (s *Selector) bonus(row sdk.ManifestRow, now time.Time) float64 {
	age := now.Sub(row.UpdatedAt).Hours() / 24
	if age < 0 {
		age = 0
	}
	recency := math.Exp2(-age / s.cfg.RecencyHalfLifeDays)
	usage := 0.0
	if row.Rank > 0 {
		usage = row.Rank / (1 + row.Rank)
	}
	return s.cfg.RecencyWeight * (0.75*recency + 0.25*usage)
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
