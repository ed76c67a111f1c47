package coordinator

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

func TestDefaultConfigMatchesDesign(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	b := c.Budgets
	if b.TurnBytes != 20<<10 || b.SessionBytes != 60<<10 || b.BuildBytes != 20<<10 || b.MinBytes != 512 ||
		b.RecordBytes != 4<<10 || b.BodyBytes != 2<<10 || b.TitleBytes != 160 || b.IndexBytes != 8<<10 ||
		b.IndexRows != 24 || b.SelectorRows != 200 {
		t.Fatalf("budgets %+v differ from DESIGN 5", b)
	}
	if c.PerTurnInjection != InjectionBudgeted || c.Selection != SelectionContextual || c.MaxEntries != 8 ||
		c.RecallTimeout != 500*time.Millisecond || c.RecallFailurePolicy != FailureSkip || !c.DefangInbound ||
		c.InstructionHeader != "Agent memory" || c.OperatorScope != OperatorScopeOff {
		t.Fatalf("defaults %+v differ from DESIGN Appendix B", c)
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		key    string
		mutate func(*Config)
	}{
		{"per_turn_injection", func(c *Config) { c.PerTurnInjection = "sometimes" }},
		{"selection", func(c *Config) { c.Selection = "" }},
		{"max_entries", func(c *Config) { c.MaxEntries = 0 }},
		{"recall_timeout_ms", func(c *Config) { c.RecallTimeout = 0 }},
		{"recall_timeout_ms", func(c *Config) { c.RecallTimeout = 30 * time.Second }},
		{"recall_failure_policy", func(c *Config) { c.RecallFailurePolicy = "retry" }},
		{"recall_failure_policy", func(c *Config) { c.FailurePolicies = map[Surface]FailurePolicy{"mcp": FailureFail} }},
		{"recall_failure_policy", func(c *Config) { c.FailurePolicies = map[Surface]FailurePolicy{SurfaceTurn: "x"} }},
		{"instruction_header", func(c *Config) { c.InstructionHeader = "" }},
		{"instruction_header", func(c *Config) { c.InstructionHeader = "<memhost>" }},
		{"operator_scope", func(c *Config) { c.OperatorScope = "on" }},
		{"default_realm", func(c *Config) { c.DefaultRealm = "a b" }},
		{"session_cache_size", func(c *Config) { c.SessionCacheSize = 0 }},
		{"sweep_timeout_ms", func(c *Config) { c.SweepTimeout = -1 }},
		{"telemetry_queue", func(c *Config) { c.TelemetryQueue = 0 }},
		{"turn_budget_bytes", func(c *Config) { c.Budgets.MinBytes = 30 << 10 }},
		{"min_injection_bytes", func(c *Config) { c.Budgets.MinBytes = 0 }},
		{"turn_budget_bytes", func(c *Config) { c.Budgets.TurnBytes = 70 << 10 }},
		{"build_budget_bytes", func(c *Config) { c.Budgets.IndexBytes = 20 << 10 }},
		{"sweep_max_rows", func(c *Config) { c.Sweep.MaxRows = 10 }},
		{"body_bytes", func(c *Config) { c.Budgets.BodyBytes = 5 << 10 }},
		{"title_bytes", func(c *Config) { c.Budgets.TitleBytes = 0 }},
	}
	for _, tc := range cases {
		c := DefaultConfig()
		tc.mutate(&c)
		err := c.Validate()
		if !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), "coordinator."+tc.key) {
			t.Errorf("%s: %v, want an ErrInvalid naming coordinator.%s", tc.key, err, tc.key)
		}
	}
}

// TestConfigValidateReportsEverySetting checks that one pass names every
// bad setting, each as its own FieldError, so a config file can be fixed
// in one go.
func TestConfigValidateReportsEverySetting(t *testing.T) {
	c := DefaultConfig()
	c.MaxEntries = 500
	c.Budgets.TurnBytes = 70000
	c.Selection = "never"
	err := c.Validate()
	var fields []string
	multi, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("Validate answered %v, want a joined error", err)
	}
	for _, e := range multi.Unwrap() {
		var fe *sdk.FieldError
		if !errors.As(e, &fe) || !errors.Is(e, sdk.ErrInvalid) {
			t.Fatalf("%v is not an invalid-field error", e)
		}
		fields = append(fields, fe.Field)
	}
	want := []string{"coordinator.selection", "coordinator.max_entries", "coordinator.turn_budget_bytes"}
	if strings.Join(fields, " ") != strings.Join(want, " ") {
		t.Fatalf("fields %v, want %v", fields, want)
	}
}
