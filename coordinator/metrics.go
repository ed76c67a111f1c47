package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/memhost/memhost/sdk"
)

// SkipReason says why a call injected nothing. It is empty when something
// was injected, and encodes as JSON null then.
type SkipReason string

const (
	SkipNone              SkipReason = ""
	SkipInjectionOff      SkipReason = "per_turn_injection_off"
	SkipEmptyQuery        SkipReason = "contextual_with_empty_query"
	SkipBudgetExhausted   SkipReason = "budget_exhausted"
	SkipNoRecords         SkipReason = "no_records"
	SkipNothingRenderable SkipReason = "nothing_renderable"
	// SkipRecallFailed: the recall failed or timed out under the skip
	// policy.
	SkipRecallFailed SkipReason = "recall_failed"
	// SkipSelectorEmpty: the selector chose nothing while recall had
	// hits, and the fallback to the recall ranking is off.
	SkipSelectorEmpty SkipReason = "selector_empty"
)

// SkipReasons lists every reason, for metrics that pre-register labels.
var SkipReasons = []SkipReason{SkipInjectionOff, SkipEmptyQuery, SkipBudgetExhausted, SkipNoRecords, SkipNothingRenderable, SkipRecallFailed, SkipSelectorEmpty}

// MarshalJSON writes null for SkipNone.
func (r SkipReason) MarshalJSON() ([]byte, error) {
	if r == SkipNone {
		return []byte("null"), nil
	}
	return []byte(`"` + string(r) + `"`), nil
}

// UnmarshalJSON reads null as SkipNone.
func (r *SkipReason) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*r = SkipNone
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return &sdk.FieldError{Field: "skip_reason", Problem: "must be a string or null", Err: sdk.ErrInvalid}
	}
	*r = SkipReason(b[1 : len(b)-1])
	return nil
}

// Telemetry kinds.
const (
	TelemetryLedger = "ledger"
	TelemetryUsage  = "usage"
)

// Metrics receives the coordinator's counters; the host wires it to
// Prometheus. Labels are bounded: surfaces, configured realms, skip
// reasons and sdk error codes. Nothing passed here ever holds a nonce.
// Methods are called on the request path and must be quick. Embed
// NopMetrics to implement only some.
type Metrics interface {
	// Injected counts one injection and its rendered size.
	Injected(surface Surface, realm string, bytes, records int)
	// Skipped counts one empty answer and its reason.
	Skipped(surface Surface, realm string, reason SkipReason)
	// Recalled observes one recall path: its latency and outcome
	// (sdk.CodeOK on success, MetricCode of its error otherwise).
	Recalled(surface Surface, realm string, took time.Duration, code sdk.Code)
	// Defanged counts markers neutralised in inbound content.
	Defanged(realm string, hits int)
	// TelemetryDropped counts ledger rows or usage marks dropped because
	// the writer's queue was full; TelemetryFailed those a provider
	// refused or failed to write.
	TelemetryDropped(kind string, n int)
	TelemetryFailed(kind string, n int)
}

// CodeCanceled is the outcome MetricCode gives a call its caller gave up
// on (the client went away): no failure of the plugin, whose unavailable
// it would otherwise read as.
const CodeCanceled sdk.Code = "canceled"

// MetricCode is the outcome label of a call that answered err: its
// sdk.CodeOf, except CodeCanceled for a call its caller gave up on, which
// sdk.CodeOf calls unavailable (as an answer to a caller that is gone, it
// is never read).
func MetricCode(err error) sdk.Code {
	if errors.Is(err, context.Canceled) && !errors.Is(err, sdk.ErrUnavailable) {
		return CodeCanceled
	}
	return sdk.CodeOf(err)
}

// NopMetrics discards everything.
type NopMetrics struct{}

func (NopMetrics) Injected(Surface, string, int, int)                {}
func (NopMetrics) Skipped(Surface, string, SkipReason)               {}
func (NopMetrics) Recalled(Surface, string, time.Duration, sdk.Code) {}
func (NopMetrics) Defanged(string, int)                              {}
func (NopMetrics) TelemetryDropped(string, int)                      {}
func (NopMetrics) TelemetryFailed(string, int)                       {}
