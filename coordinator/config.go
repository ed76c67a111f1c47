package coordinator

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk"
	"golang.org/x/text/unicode/norm"
)

// InjectionMode turns per-turn injection on (budgeted) or off.
type InjectionMode string

const (
	InjectionBudgeted InjectionMode = "budgeted"
	InjectionOff      InjectionMode = "off"
)

// SelectionMode says whether a turn without query terms still recalls.
type SelectionMode string

const (
	// SelectionContextual injects only what the turn's text asks for: a
	// turn without query terms injects nothing.
	SelectionContextual SelectionMode = "contextual"
	// SelectionAlways recalls even for a turn without query terms; the
	// provider answers its best records for an empty query.
	SelectionAlways SelectionMode = "always"
)

// FailurePolicy says what a failed or timed-out recall does to the call.
type FailurePolicy string

const (
	// FailureSkip injects nothing, logs, and answers SkipRecallFailed.
	FailureSkip FailurePolicy = "skip"
	// FailureFail returns the recall error to the caller.
	FailureFail FailurePolicy = "fail"
)

// OperatorScopeMode gates operator scope in composition (DESIGN 5.3).
type OperatorScopeMode string

const (
	OperatorScopeOff         OperatorScopeMode = "off"
	OperatorScopeProvisional OperatorScopeMode = "provisional"
)

// Surface names the call a recall or an injection belongs to; it labels
// ledger rows, metrics and failure policies.
type Surface string

const (
	SurfaceTurn  Surface = "turn"
	SurfaceBuild Surface = "build"
	SurfaceGuide Surface = "guide"
	SurfaceSweep Surface = "sweep"
)

// Budgets are the byte and row limits of DESIGN 5.1, 5.2 and 5.4.
type Budgets struct {
	TurnBytes    int // one per-turn injection, header included (20 KiB)
	SessionBytes int // all per-turn injections of one session (60 KiB)
	BuildBytes   int // one build injection (20 KiB)
	MinBytes     int // a turn with less budget left injects nothing (512 B)
	RecordBytes  int // one rendered observation, tags included (4 KiB)
	BodyBytes    int // a body is cut to this before escaping (2 KiB)
	TitleBytes   int // a title is cut to this (160 B)
	IndexBytes   int // the build index, split across scopes by weight (8 KiB)
	IndexRows    int // working-set rows listed per scope in the index (24)
	SelectorRows int // working-set rows handed to the selector (200)
}

// SweepLimits bound the background full sweep (DESIGN 5.1 step 4).
type SweepLimits struct {
	PageRows int // manifest rows per Select call (2,000)
	WarnRows int // a full manifest above this many rows is logged (4,000)
	MaxRows  int // rows kept beyond this: ranked first, then newest (16,000)
}

// Config mirrors the coordinator block of the deployment config
// (DESIGN Appendix B). Start from DefaultConfig: the zero value is invalid
// on purpose, so a half-filled struct cannot silently turn defanging off.
type Config struct {
	PerTurnInjection InjectionMode
	Selection        SelectionMode
	// SelectorFallback injects the recall ranking when the selector
	// chooses nothing although recall found records; off, the turn
	// answers selector_empty.
	SelectorFallback bool
	MaxEntries       int // records per injection; recall asks for a quarter more (turnCandidates)
	// ThreadNeighbours is how many places before and after each injected
	// conversation turn its thread's records are shown beside it, in the
	// turn budget the records leave (0: none; needs CapNeighbours).
	ThreadNeighbours    int
	RecallTimeout       time.Duration // bounds every recall path (composition, manifest, selector, fetch)
	RecallFailurePolicy FailurePolicy
	// FailurePolicies overrides RecallFailurePolicy per surface (turn,
	// build). The guide has its own rule: fatal at session start, logged
	// before an iteration.
	FailurePolicies   map[Surface]FailurePolicy
	DefangInbound     bool   // false is the kill switch for defanging and the scope/trust labels
	InstructionHeader string // the envelope header's first words
	OperatorScope     OperatorScopeMode
	DefaultRealm      string // the realm of an identity that names none

	SessionCacheSize int           // sessions kept per realm by the default in-memory store
	SweepTimeout     time.Duration // bounds one background full sweep
	// ResolverCacheTTL keeps each resolver answer (per realm and identity)
	// this long, so a turn does not pay two extra blocking calls; 0 asks
	// the resolvers every time.
	ResolverCacheTTL time.Duration
	Sweep            SweepLimits
	TelemetryQueue   int // pending ledger/usage batches before new ones are dropped
	Budgets          Budgets
}

// DefaultConfig answers the settings DESIGN prescribes.
func DefaultConfig() Config {
	return Config{
		PerTurnInjection:    InjectionBudgeted,
		Selection:           SelectionContextual,
		SelectorFallback:    true,
		MaxEntries:          8,
		ThreadNeighbours:    2,
		RecallTimeout:       500 * time.Millisecond,
		RecallFailurePolicy: FailureSkip,
		DefangInbound:       true,
		InstructionHeader:   "Agent memory",
		OperatorScope:       OperatorScopeOff,
		DefaultRealm:        sdk.DefaultRealm,
		SessionCacheSize:    10000,
		SweepTimeout:        10 * time.Second,
		ResolverCacheTTL:    5 * time.Second,
		Sweep:               SweepLimits{PageRows: 2000, WarnRows: 4000, MaxRows: 16000},
		TelemetryQueue:      1024,
		Budgets: Budgets{
			TurnBytes:    20 << 10,
			SessionBytes: 60 << 10,
			BuildBytes:   20 << 10,
			MinBytes:     512,
			RecordBytes:  4 << 10,
			BodyBytes:    2 << 10,
			TitleBytes:   160,
			IndexBytes:   8 << 10,
			IndexRows:    24,
			SelectorRows: 200,
		},
	}
}

// maxHeaderBytes bounds the instruction header.
const maxHeaderBytes = 200

// Validate reports every bad setting, each as an *sdk.FieldError naming
// its config key ("coordinator.max_entries"), joined with errors.Join so a
// config loader can point at each one. The error wraps sdk.ErrInvalid.
// These are the only rules for these settings: internal/config applies
// them at load rather than keeping its own copy.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, problem string, args ...any) {
		errs = append(errs, &sdk.FieldError{Field: "coordinator." + key, Problem: fmt.Sprintf(problem, args...), Err: sdk.ErrInvalid})
	}
	switch c.PerTurnInjection {
	case InjectionBudgeted, InjectionOff:
	default:
		bad("per_turn_injection", "%q is not budgeted or off", c.PerTurnInjection)
	}
	switch c.Selection {
	case SelectionContextual, SelectionAlways:
	default:
		bad("selection", "%q is not contextual or always", c.Selection)
	}
	if c.MaxEntries < 1 || c.MaxEntries > maxEntriesLimit {
		bad("max_entries", "%d is outside 1..%d", c.MaxEntries, maxEntriesLimit)
	}
	if c.ThreadNeighbours < 0 || c.ThreadNeighbours > sdk.MaxNeighbours {
		bad("thread_neighbours", "%d is outside 0..%d", c.ThreadNeighbours, sdk.MaxNeighbours)
	}
	if c.RecallTimeout <= 0 {
		bad("recall_timeout_ms", "%d ms must be positive", c.RecallTimeout.Milliseconds())
	} else if c.RecallTimeout > MaxRecallTimeout {
		bad("recall_timeout_ms", "%d ms is over %d: an HTTP request's work ends at 30 s, so a slower recall would answer 504 rather than follow recall_failure_policy", c.RecallTimeout.Milliseconds(), MaxRecallTimeout.Milliseconds())
	}
	if !c.RecallFailurePolicy.valid() {
		bad("recall_failure_policy", "%q is not skip or fail", c.RecallFailurePolicy)
	}
	for s, p := range c.FailurePolicies {
		switch s {
		case SurfaceTurn, SurfaceBuild:
			if !p.valid() {
				bad("recall_failure_policy", "%q for surface %s is not skip or fail", p, s)
			}
		default:
			bad("recall_failure_policy", "unknown surface %q (want turn or build)", s)
		}
	}
	if err := ValidateHeader(c.InstructionHeader); err != nil {
		bad("instruction_header", "%v", err)
	}
	switch c.OperatorScope {
	case OperatorScopeOff, OperatorScopeProvisional:
	default:
		bad("operator_scope", "%q is not off or provisional", c.OperatorScope)
	}
	if err := sdk.ValidateRealm(c.DefaultRealm); err != nil {
		bad("default_realm", "%v", err)
	}
	if c.SessionCacheSize < 1 {
		bad("session_cache_size", "%d must be at least 1", c.SessionCacheSize)
	}
	if c.SweepTimeout <= 0 {
		bad("sweep_timeout_ms", "%d ms must be positive", c.SweepTimeout.Milliseconds())
	}
	if c.ResolverCacheTTL < 0 {
		bad("resolver_cache_ms", "%d ms must not be negative (0 asks the resolvers on every turn)", c.ResolverCacheTTL.Milliseconds())
	}
	sw := c.Sweep
	if sw.PageRows < 1 {
		bad("sweep_page_rows", "%d must be positive", sw.PageRows)
	}
	if sw.WarnRows < 1 {
		bad("sweep_warn_rows", "%d must be positive", sw.WarnRows)
	}
	if sw.PageRows >= 1 && sw.MaxRows < sw.PageRows {
		bad("sweep_max_rows", "%d is below sweep_page_rows %d", sw.MaxRows, sw.PageRows)
	}
	if c.TelemetryQueue < 1 {
		bad("telemetry_queue", "%d must be at least 1", c.TelemetryQueue)
	}
	c.Budgets.validate(bad)
	return errors.Join(errs...)
}

// MaxRecallTimeout bounds recall_timeout_ms below the HTTP API's 30 s
// request timeout, leaving the rest of a turn (the session store, the
// rendering) time to answer within it.
const MaxRecallTimeout = 25 * time.Second

// maxEntriesLimit bounds max_entries: recall asks for a quarter more rows.
const maxEntriesLimit = 100

func (b Budgets) validate(bad func(key, problem string, args ...any)) {
	positive := true
	for _, f := range []struct {
		key string
		v   int
	}{
		{"turn_budget_bytes", b.TurnBytes}, {"session_budget_bytes", b.SessionBytes},
		{"build_budget_bytes", b.BuildBytes}, {"min_injection_bytes", b.MinBytes},
		{"record_bytes", b.RecordBytes}, {"body_bytes", b.BodyBytes}, {"title_bytes", b.TitleBytes},
		{"index_bytes", b.IndexBytes}, {"index_rows", b.IndexRows}, {"selector_rows", b.SelectorRows},
	} {
		if f.v < 1 {
			bad(f.key, "%d must be positive", f.v)
			positive = false
		}
	}
	if !positive {
		return // the relations below would only repeat the same problem
	}
	// A turn budget below the minimum would skip every turn as
	// budget_exhausted; one above the session budget could never be spent.
	if b.TurnBytes < b.MinBytes {
		bad("turn_budget_bytes", "%d is below min_injection_bytes %d (every turn would be skipped as budget_exhausted)", b.TurnBytes, b.MinBytes)
	}
	if b.TurnBytes > b.SessionBytes {
		bad("turn_budget_bytes", "%d exceeds session_budget_bytes %d", b.TurnBytes, b.SessionBytes)
	}
	if b.IndexBytes >= b.BuildBytes {
		bad("build_budget_bytes", "%d must exceed index_bytes %d, which the build index may take", b.BuildBytes, b.IndexBytes)
	}
	if b.BodyBytes > b.RecordBytes {
		bad("body_bytes", "%d exceeds record_bytes %d", b.BodyBytes, b.RecordBytes)
	}
}

func (p FailurePolicy) valid() bool { return p == FailureSkip || p == FailureFail }

// failurePolicy answers the policy of one surface.
func (c *Config) failurePolicy(s Surface) FailurePolicy {
	if p, ok := c.FailurePolicies[s]; ok {
		return p
	}
	return c.RecallFailurePolicy
}

// ValidateHeader checks an instruction header: one non-blank line of at
// most 200 bytes of UTF-8, without control characters or the envelope's
// structural characters (< > [ ] and the backtick), which would let the
// header blur into the markers it frames.
func ValidateHeader(h string) error {
	switch {
	case strings.TrimSpace(h) == "":
		return fmt.Errorf("must not be blank")
	case len(h) > maxHeaderBytes:
		return fmt.Errorf("is %d bytes, the limit is %d", len(h), maxHeaderBytes)
	case !utf8.ValidString(h):
		return fmt.Errorf("is not valid UTF-8")
	}
	for _, r := range h {
		if unicode.IsControl(r) {
			return fmt.Errorf("must be one line without control characters")
		}
		// The backtick is checked before folding: its confusable
		// prototype is the apostrophe, which a header may hold.
		if strings.ContainsRune(norm.NFKC.String(string(r)), '`') {
			return fmt.Errorf("%q must not hold %q (or a look-alike): the envelope's markers use it", h, r)
		}
		if lookAlikeOf(r, "<>[]") {
			return fmt.Errorf("%q must not hold %q (or a look-alike): the envelope's markers use it", h, r)
		}
	}
	return nil
}
