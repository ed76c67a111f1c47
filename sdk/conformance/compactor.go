package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// RunCompactor runs the compactor suite as subtests of t, each check on a
// fresh plugin and temporary data directory:
//
//	conformance.RunCompactor(t, conformance.Target{New: func() sdk.Plugin { return mycompactor.New() }})
//
// The plugin is driven through the host-side client (sdk.Compactor
// over real gRPC), in-process (Target.New) or as a built binary
// (Target.Binary). It checks Info (and the manifest when given), config
// validation, a first and a rolling compaction, the byte cap, bad input,
// and concurrent calls. It does not judge summary quality.
//
// It has no deadline check: the caller's gRPC client answers a deadline
// error when the deadline passes whatever the plugin does, and a compaction
// changes nothing, so a plugin that ignores its deadline looks, from
// outside, like one that honours it. Honour ctx anyway: an abandoned call
// holds a core until it ends.
func RunCompactor(t *testing.T, target Target) {
	t.Helper()
	s, err := NewSuite(t.Context(), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("conformance: compactor %s %s", s.info.Name, s.info.Version)
	for _, c := range compactorChecks {
		t.Run(c.name, func(t *testing.T) {
			if c.skip != nil {
				if why := c.skip(s); why != "" {
					t.Skip(why)
				}
			}
			if err := s.runCompactorCheck(t.Context(), &c, t.TempDir()); err != nil {
				t.Error(err)
			}
		})
	}
}

// CompactorChecks names the compactor suite's checks, in run order.
func CompactorChecks() []string {
	out := make([]string, len(compactorChecks))
	for i, c := range compactorChecks {
		out[i] = c.name
	}
	return out
}

type compactorCheck struct {
	name string
	skip func(*Suite) string
	// unopened checks start plugins themselves.
	unopened bool
	run      func(context.Context, *compactorEnv) error
}

var compactorChecks = []compactorCheck{
	{name: "Info", run: checkCompactorInfo},
	{name: "Manifest", unopened: true, skip: needManifest, run: func(ctx context.Context, e *compactorEnv) error {
		return checkManifest(ctx, &env{suite: e.suite, dir: e.dir})
	}},
	{name: "Config", unopened: true, run: checkCompactorConfig},
	{name: "Compact", run: checkCompact},
	{name: "CarryOver", run: checkCarryOver},
	{name: "ByteCap", run: checkByteCap},
	{name: "BadInput", run: checkCompactBadInput},
	{name: "Concurrent", run: checkCompactConcurrent},
}

type compactorEnv struct {
	suite *Suite
	dir   string
	inst  *instance
	c     sdk.Compactor
}

// RunCompactorCheck runs the named compactor check against a fresh plugin
// on dataDir (an empty directory) and answers every problem it found.
func (s *Suite) RunCompactorCheck(ctx context.Context, name, dataDir string) error {
	for i := range compactorChecks {
		if compactorChecks[i].name == name {
			return s.runCompactorCheck(ctx, &compactorChecks[i], dataDir)
		}
	}
	return fmt.Errorf("conformance: no compactor check named %q", name)
}

func (s *Suite) runCompactorCheck(ctx context.Context, c *compactorCheck, dir string) error {
	timeout := s.target.CheckTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	e := &compactorEnv{suite: s, dir: dir}
	if !c.unopened {
		if err := e.open(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	err := c.run(ctx, e)
	if e.inst != nil {
		err = errors.Join(err, e.inst.close())
	}
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	return nil
}

func (e *compactorEnv) open(ctx context.Context) error {
	inst, err := e.suite.launch(ctx, e.dir)
	if err != nil {
		return err
	}
	if err := inst.conn.Configure(ctx, e.suite.config(e.dir)); err != nil {
		inst.close()
		return fmt.Errorf("configure with the target's config for %q: %w", e.dir, err)
	}
	c, err := inst.conn.Compactor()
	if err != nil {
		inst.close()
		return err
	}
	e.inst, e.c = inst, c
	return nil
}

// conversation answers n messages of a small agent conversation.
func conversation(n int, tag string) []sdk.Message {
	roles := []string{"user", "assistant", "tool"}
	out := make([]sdk.Message, n)
	for i := range out {
		out[i] = sdk.Message{Role: roles[i%len(roles)], Content: fmt.Sprintf("%s message %d: please always keep the %s notes tidy.", tag, i, commonWord)}
	}
	return out
}

func compactRequest(conv string, evicted []sdk.Message, carry *sdk.Message, maxBytes int) sdk.CompactRequest {
	return sdk.CompactRequest{ConversationID: conv, Evicted: evicted, CarryOver: carry, IdempotencyKey: "conformance/" + conv, MaxBytes: maxBytes}
}

// checkArtifact is what every successful answer must satisfy.
func checkArtifact(what string, art sdk.Message, maxBytes int) error {
	switch {
	case !sdk.HasVisibleText(art.Content):
		// The host's own rule: it refuses such an artifact as empty.
		return fmt.Errorf("%s answered an artifact with no visible text (%q); an empty summary must be an error", what, shorten(art.Content))
	case maxBytes > 0 && len(art.Content) > maxBytes:
		return fmt.Errorf("%s answered %d bytes, over MaxBytes %d", what, len(art.Content), maxBytes)
	case !utf8.ValidString(art.Content) || !utf8.ValidString(art.Role):
		return fmt.Errorf("%s answered invalid UTF-8", what)
	case art.Role == "":
		return fmt.Errorf("%s answered an artifact with no role", what)
	}
	return nil
}

func checkCompactorInfo(_ context.Context, e *compactorEnv) error {
	info := e.inst.conn.Info()
	var p problems
	if err := host.CheckInfo(info); err != nil {
		p.addf("the host refuses this Info: %v", err)
	}
	if !slices.Contains(info.Kinds, sdk.KindCompactor) {
		p.addf("Info.Kinds %v does not include %q", info.Kinds, sdk.KindCompactor)
	}
	if len(info.ConfigSchema) > 0 {
		var schema map[string]any
		if err := json.Unmarshal(info.ConfigSchema, &schema); err != nil || schema == nil {
			p.addf("Info.ConfigSchema is not a JSON object (a JSON Schema): %s", info.ConfigSchema)
		}
	}
	first := e.suite.info
	if info.Name != first.Name || info.Version != first.Version || !slices.Equal(info.Kinds, first.Kinds) ||
		!bytes.Equal(info.ConfigSchema, first.ConfigSchema) {
		p.addf("Info changed between two starts: %+v, then %+v", first, info)
	}
	return p.err()
}

func checkCompactorConfig(ctx context.Context, e *compactorEnv) error {
	valid := e.suite.config(e.dir)
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(valid, &obj); err != nil || obj == nil {
		return fmt.Errorf("Target.Config must answer a JSON object, got %s", valid)
	}
	if err := e.open(ctx); err != nil {
		return err
	}
	err := e.inst.close()
	e.inst = nil
	if err != nil {
		return err
	}
	return e.suite.refusesBadConfigs(ctx, e.dir, obj)
}

func checkCompact(ctx context.Context, e *compactorEnv) error {
	req := compactRequest("conv-1", conversation(6, "first"), nil, 4096)
	art, err := e.c.Compact(ctx, req)
	if err != nil {
		return fmt.Errorf("compacting 6 messages: %w", err)
	}
	return checkArtifact("Compact of 6 messages", art, 4096)
}

func checkCarryOver(ctx context.Context, e *compactorEnv) error {
	first, err := e.c.Compact(ctx, compactRequest("conv-2", conversation(4, "first"), nil, 4096))
	if err != nil {
		return fmt.Errorf("first Compact: %w", err)
	}
	art, err := e.c.Compact(ctx, compactRequest("conv-2", conversation(4, "second"), &first, 4096))
	if err != nil {
		return fmt.Errorf("compacting with the first artifact as carry-over: %w", err)
	}
	return checkArtifact("Compact with a carry-over", art, 4096)
}

func checkByteCap(ctx context.Context, e *compactorEnv) error {
	var p problems
	big := conversation(300, "long")
	for _, limit := range []int{512, 2048} {
		art, err := e.c.Compact(ctx, compactRequest("conv-cap", big, nil, limit))
		if err != nil {
			if !errors.Is(err, sdk.ErrTooLarge) {
				p.addf("Compact of 300 messages under MaxBytes %d: %v (answer within the cap, or an error wrapping sdk.ErrTooLarge)", limit, err)
			}
			continue
		}
		p.add(checkArtifact(fmt.Sprintf("Compact of 300 messages under MaxBytes %d", limit), art, limit))
	}
	return p.err()
}

func checkCompactBadInput(ctx context.Context, e *compactorEnv) error {
	var p problems
	_, err := e.c.Compact(ctx, compactRequest("conv-bad", nil, nil, 4096))
	p.add(wantErr("Compact of no messages", err, sdk.ErrInvalid))
	_, err = e.c.Compact(ctx, compactRequest("conv-bad", []sdk.Message{{Role: "", Content: "x"}}, nil, 4096))
	p.add(wantErr("Compact of a message with no role", err, sdk.ErrInvalid))
	_, err = e.c.Compact(ctx, compactRequest("conv-bad", conversation(2, "neg"), nil, -1))
	p.add(wantErr("Compact with MaxBytes -1", err, sdk.ErrInvalid))
	if _, err := e.c.Compact(ctx, compactRequest("conv-bad", conversation(2, "after"), nil, 4096)); err != nil {
		p.addf("Compact after bad input: %v", err)
	}
	return p.err()
}

func checkCompactConcurrent(ctx context.Context, e *compactorEnv) error {
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			what := fmt.Sprintf("concurrent Compact %d", i)
			art, err := e.c.Compact(ctx, compactRequest(fmt.Sprintf("conv-par-%d", i), conversation(5, fmt.Sprint(i)), nil, 4096))
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", what, err)
				return
			}
			errs[i] = checkArtifact(what, art, 4096)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
