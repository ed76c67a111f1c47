package conformance_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
)

// serveRefEnv makes this test binary serve the reference provider as a
// plugin process, so the kit's binary mode is tested without a build step.
const serveRefEnv = "MEMHOST_CONFORMANCE_SERVE_REF"

func TestMain(m *testing.M) {
	if os.Getenv(serveRefEnv) == "1" {
		sdk.Serve(newRef())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func refConfig(dir string) json.RawMessage {
	cfg, _ := json.Marshal(map[string]string{"dir": dir})
	return cfg
}

// inProcessManifest is a manifest for an in-process target, whose
// executable and digest the kit does not check.
func inProcessManifest(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "memhost-plugin-ref")
	if err := os.WriteFile(exe, []byte("not a real executable"), 0o755); err != nil {
		t.Fatal(err)
	}
	return conformance.WriteManifest(t, newRef().Info(), exe)
}

func TestReferenceInProcess(t *testing.T) {
	conformance.RunProvider(t, conformance.Target{
		New:        func() sdk.Plugin { return newRef() },
		Config:     refConfig,
		Manifest:   inProcessManifest(t),
		BadConfigs: []json.RawMessage{json.RawMessage(`{"dir":""}`), json.RawMessage(`{"dir":7}`)},
	})
}

func TestReferenceBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a plugin process per check")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(serveRefEnv, "1")
	conformance.RunProvider(t, conformance.Target{
		Binary:   exe,
		Config:   refConfig,
		Manifest: conformance.WriteManifest(t, newRef().Info(), exe),
	})
}

// TestSkipsUndeclaredCapabilities: a provider declaring nothing beyond
// Recall has every capability-gated check skipped, with the reason.
func TestSkipsUndeclaredCapabilities(t *testing.T) {
	s, err := conformance.NewSuite(t.Context(), conformance.Target{
		New:    func() sdk.Plugin { p := newRef(); p.caps = nil; return p },
		Config: refConfig,
	})
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{}
	for _, name := range s.Checks() {
		r := s.Run(t.Context(), name, t.TempDir())
		if r.Err != nil {
			t.Errorf("%s failed on a read-only provider: %v", name, r.Err)
		}
		ran[name] = r.Skipped == ""
		if name == "RoundTrip" && !strings.Contains(r.Skipped, "does not declare capability write") {
			t.Errorf("RoundTrip skip reason = %q, want it to name capability write", r.Skipped)
		}
	}
	for _, name := range []string{"Info", "Config", "BadRequests", "UndeclaredCapabilities"} {
		if !ran[name] {
			t.Errorf("%s did not run; it needs no capability", name)
		}
	}
	// Deadline watches writes: a provider that cannot write cannot store
	// one its caller was told failed.
	for _, name := range []string{"RoundTrip", "IdempotentWrite", "ManifestTiers", "Durability", "Manifest", "CrashDurability", "Deadline"} {
		if ran[name] {
			t.Errorf("%s ran; it should be skipped", name)
		}
	}
}

// TestUndeclaredNeighbours: a provider that writes threads but does not
// declare neighbours has the Neighbours check skipped, and passes
// UndeclaredCapabilities, which asks it for neighbours anyway.
func TestUndeclaredNeighbours(t *testing.T) {
	s, err := conformance.NewSuite(t.Context(), conformance.Target{
		New: func() sdk.Plugin {
			p := newRef()
			p.caps = slices.DeleteFunc(slices.Clone(p.caps), func(c sdk.Capability) bool { return c == sdk.CapNeighbours })
			return p
		},
		Config: refConfig,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Run(t.Context(), "Neighbours", t.TempDir()); !strings.Contains(r.Skipped, "neighbours") {
		t.Errorf("Neighbours: skipped %q, err %v; want it skipped for the undeclared capability", r.Skipped, r.Err)
	}
	if r := s.Run(t.Context(), "UndeclaredCapabilities", t.TempDir()); r.Err != nil || r.Skipped != "" {
		t.Errorf("UndeclaredCapabilities: skipped %q, err %v; want it run and passed", r.Skipped, r.Err)
	}
}

// TestCatchesBrokenProviders: each deliberate defect fails the check
// written for it.
func TestCatchesBrokenProviders(t *testing.T) {
	for _, tc := range []struct {
		check string
		bug   func(*refProvider)
		// manifest, when set, is written from the correct Info.
		manifest bool
	}{
		{check: "RealmIsolation", bug: func(p *refProvider) { p.bugs.leakRealms = true }},
		{check: "ScopeIsolation", bug: func(p *refProvider) { p.bugs.ignoreScopes = true }},
		{check: "IdempotentWrite", bug: func(p *refProvider) { p.bugs.duplicateWrites = true }},
		{check: "ConcurrentWriters", bug: func(p *refProvider) { p.bugs.duplicateWrites = true }},
		// BatchAllOrNothing and RecordLimits are not here: sdk.Serve refuses
		// an invalid record before the provider sees it, so a provider
		// served by the SDK cannot store half a bad batch or a truncated
		// title. The kit still checks both, for plugins built otherwise.
		{check: "Supersede", bug: func(p *refProvider) { p.bugs.recallSuperseded = true }},
		{check: "Expiry", bug: func(p *refProvider) { p.bugs.recallExpired = true }},
		{check: "Expiry", bug: func(p *refProvider) { p.bugs.expiryAtWrite = true }},
		{check: "IdempotentForget", bug: func(p *refProvider) { p.bugs.forgetMissingFails = true }},
		{check: "Durability", bug: func(p *refProvider) { p.bugs.noPersist = true }},
		// A write that ignores its deadline lands after the host answered
		// deadline_exceeded (an expired call never reaches the plugin, so
		// only a deadline passing while it works can show this).
		{check: "Deadline", bug: func(p *refProvider) { p.bugs.ignoreDeadline = true }},
		{check: "Config", bug: func(p *refProvider) { p.bugs.looseConfig = true }},
		{check: "ManifestTiers", bug: func(p *refProvider) { p.bugs.unboundedWorkingSet = true }},
		{check: "RecallFilters", bug: func(p *refProvider) { p.bugs.ignoreTags = true }},
		{check: "RecallFilters", bug: func(p *refProvider) { p.bugs.ignoreWindow = true }},
		{check: "RecallFilters", bug: func(p *refProvider) { p.bugs.epochOpen = true }},
		{check: "Relevance", bug: func(p *refProvider) { p.bugs.worstFirst = true }},
		{check: "RoundTrip", bug: func(p *refProvider) { p.bugs.dropExplicitID = true }},
		{check: "Neighbours", bug: func(p *refProvider) { p.bugs.noNeighbours = true }},
		{check: "Manifest", bug: func(p *refProvider) { p.version = "0.2.0" }, manifest: true},
		{check: "Info", bug: func(p *refProvider) { p.caps = append(p.caps, sdk.CapWrite) }},
	} {
		t.Run(tc.check, func(t *testing.T) {
			target := conformance.Target{
				New:    func() sdk.Plugin { p := newRef(); tc.bug(p); return p },
				Config: refConfig,
			}
			if tc.manifest {
				target.Manifest = inProcessManifest(t)
			}
			s, err := conformance.NewSuite(t.Context(), target)
			if err != nil {
				t.Fatal(err)
			}
			r := s.Run(t.Context(), tc.check, t.TempDir())
			if r.Skipped != "" {
				t.Fatalf("skipped: %s", r.Skipped)
			}
			if r.Err == nil {
				t.Fatalf("%s passed a provider built to fail it", tc.check)
			}
			t.Logf("caught: %v", r.Err)
		})
	}
}

func TestTargetNeedsOneWayToStart(t *testing.T) {
	for _, target := range []conformance.Target{
		{},
		{New: func() sdk.Plugin { return newRef() }, Binary: "/bin/true"},
	} {
		if _, err := conformance.NewSuite(t.Context(), target); err == nil {
			t.Errorf("NewSuite(%+v) accepted a target with %s", target, "not exactly one of New and Binary")
		}
	}
}

func TestUnknownCheck(t *testing.T) {
	s, err := conformance.NewSuite(t.Context(), conformance.Target{New: func() sdk.Plugin { return newRef() }, Config: refConfig})
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Run(t.Context(), "NoSuchCheck", t.TempDir()); r.Err == nil {
		t.Fatal("Run of an unknown check did not fail")
	}
}

// plainSelector checks nothing itself, leaving requests to sdk.Serve, and
// never selects: an empty selection is a real verdict (inject nothing).
type plainSelector struct{}

func (plainSelector) Info() sdk.Info {
	return sdk.Info{Name: "plain", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindSelector}, Protocols: []int{sdk.ProtocolVersion}}
}

func (plainSelector) Configure(_ context.Context, raw json.RawMessage) error {
	var cfg struct{}
	return sdk.DecodeConfig(raw, &cfg)
}

func (plainSelector) Select(context.Context, sdk.SelectRequest) (sdk.Selection, error) {
	return sdk.Selection{Coverage: sdk.CoverageSufficient}, nil
}

// TestSelectorSuitePassesAPlainSelector: every request the selector suite
// requires refused (a row without id among them) is refused by sdk.Serve,
// so a selector that validates nothing itself passes.
func TestSelectorSuitePassesAPlainSelector(t *testing.T) {
	conformance.RunSelector(t, conformance.Target{New: func() sdk.Plugin { return plainSelector{} }})
}
