package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// The suites below cover the kinds beside providers: selectors and the two
// resolvers. They share the provider suite's Target and harness (in-process
// or binary, manifest check, fresh plugin per check) and differ in checks.

// SelectorPageRows is the largest manifest page a selector must take in
// one Select: the host's background sweep sends the full manifest in pages
// of at most this many rows.
const SelectorPageRows = 4000

// Bindings are identity bindings a resolver check needs the plugin to hold.
type Bindings struct {
	Mobs      map[sdk.Identity][]string
	Operators map[sdk.Identity]string
}

// ResolverTarget is a resolver under test. Bind, when set, answers the
// configuration under which the plugin holds exactly b for a data
// directory (a file resolver writes b there); the checks of answers need
// it and are skipped without it. Target.Config is used when Bind is nil.
type ResolverTarget struct {
	Target
	Bind func(dataDir string, b Bindings) json.RawMessage
}

// kindCheck is one check of a non-provider suite.
type kindCheck struct {
	name string
	// skip answers a reason to skip, or "".
	skip func(*kindSuite) string
	run  func(context.Context, *kindEnv) error
}

type kindSuite struct {
	*Suite
	kind sdk.PluginKind
	bind func(dataDir string, b Bindings) json.RawMessage
}

// kindEnv is one check's world: a fresh data directory and, once opened,
// the plugin configured on it.
type kindEnv struct {
	s    *kindSuite
	dir  string
	inst *instance
}

// fixture is the bindings every resolver check configures: two realms
// with an identity of one name, so a realm mix-up shows.
var fixture = Bindings{
	Mobs: map[sdk.Identity][]string{
		{Realm: realmA, ID: "alice"}: {"team", "oncall"},
		{Realm: realmB, ID: "alice"}: {"stranger-mob"},
		{Realm: realmA, ID: "bob"}:   {"team"},
	},
	Operators: map[sdk.Identity]string{
		{Realm: realmA, ID: "alice"}: "carol",
		{Realm: realmB, ID: "alice"}: "stranger-operator",
	},
}

func (s *kindSuite) config(dir string) json.RawMessage {
	if s.bind != nil {
		return s.bind(dir, fixture)
	}
	return s.Suite.config(dir)
}

// open starts the plugin and configures it with cfg.
func (e *kindEnv) open(ctx context.Context, cfg json.RawMessage) error {
	inst, err := e.s.launch(ctx, e.dir)
	if err != nil {
		return err
	}
	if err := inst.conn.Configure(ctx, cfg); err != nil {
		inst.close()
		return fmt.Errorf("configure: %w", err)
	}
	e.inst = inst
	return nil
}

func (e *kindEnv) close() error {
	if e.inst == nil {
		return nil
	}
	err := e.inst.close()
	e.inst = nil
	if err != nil {
		return fmt.Errorf("closing the plugin: %w", err)
	}
	return nil
}

func (e *kindEnv) selector() (sdk.Selector, error) { return e.inst.conn.Selector() }

func (e *kindEnv) mobs() (sdk.MobResolver, error) { return e.inst.conn.MobResolver() }

func (e *kindEnv) operators() (sdk.OperatorResolver, error) {
	return e.inst.conn.OperatorResolver()
}

// runKind runs checks as subtests of t, each against a fresh plugin.
func runKind(t *testing.T, target Target, kind sdk.PluginKind, bind func(string, Bindings) json.RawMessage, checks []kindCheck) {
	t.Helper()
	s, err := NewSuite(t.Context(), target)
	if err != nil {
		t.Fatal(err)
	}
	ks := &kindSuite{Suite: s, kind: kind, bind: bind}
	t.Logf("conformance: %s %s as %s", s.info.Name, s.info.Version, kind)
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.skip != nil {
				if reason := c.skip(ks); reason != "" {
					t.Skip(reason)
				}
			}
			if err := ks.run(t.Context(), c, t.TempDir()); err != nil {
				t.Error(err)
			}
		})
	}
}

// run runs one check against a fresh plugin on dir, within the target's
// check timeout.
func (s *kindSuite) run(ctx context.Context, c kindCheck, dir string) error {
	timeout := s.target.CheckTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	e := &kindEnv{s: s, dir: dir}
	err := c.run(ctx, e)
	if err = errors.Join(err, e.close()); err != nil {
		return fmt.Errorf("%s: %v", s.name, err)
	}
	return nil
}

// RunSelector runs the selector suite: Info and manifest, configuration,
// bad requests, the selection contract (only offered, unsuppressed ids,
// at most Max, no repeats, a known coverage), an empty manifest, a page of
// SelectorPageRows rows and concurrent calls.
//
// It has no deadline check: the caller's gRPC client answers a deadline
// error when the deadline passes whatever the plugin does, and a selection
// changes nothing, so a plugin that ignores its deadline looks, from
// outside, like one that honours it. Honour ctx anyway: an abandoned call
// holds a core until it ends.
func RunSelector(t *testing.T, target Target) {
	t.Helper()
	runKind(t, target, sdk.KindSelector, nil, kindChecks([]kindCheck{
		{name: "BadRequests", run: checkSelectorBadRequests},
		{name: "Contract", run: checkSelectorContract},
		{name: "EmptyManifest", run: checkSelectorEmpty},
		{name: "Pagination", run: checkSelectorPage},
		{name: "Concurrency", run: checkSelectorConcurrency},
	}))
}

// RunMobResolver runs the mob resolver suite: Info and manifest,
// configuration, bad identities, the fixture's answers with realm
// isolation, a large binding answered whole, and concurrency. Like the
// selector suite, it has no deadline check: a resolution changes nothing,
// so ignoring a deadline cannot be seen from outside.
func RunMobResolver(t *testing.T, target ResolverTarget) {
	t.Helper()
	runKind(t, target.Target, sdk.KindMobResolver, target.Bind, kindChecks([]kindCheck{
		{name: "BadRequests", run: checkResolverBadRequests},
		{name: "Answers", skip: needBind, run: checkMobAnswers},
		{name: "Pagination", skip: needBind, run: checkMobPage},
		{name: "Concurrency", skip: needBind, run: checkResolverConcurrency},
	}))
}

// RunOperatorResolver runs the operator resolver suite, as RunMobResolver
// does for mobs.
func RunOperatorResolver(t *testing.T, target ResolverTarget) {
	t.Helper()
	runKind(t, target.Target, sdk.KindOperatorResolver, target.Bind, kindChecks([]kindCheck{
		{name: "BadRequests", run: checkResolverBadRequests},
		{name: "Answers", skip: needBind, run: checkOperatorAnswers},
		{name: "Concurrency", skip: needBind, run: checkResolverConcurrency},
	}))
}

// kindChecks answers the checks every kind's suite starts with (Info,
// Manifest, Config), then the kind's own.
func kindChecks(own []kindCheck) []kindCheck {
	return append([]kindCheck{
		{name: "Info", run: checkKindInfo},
		{name: "Manifest", skip: kindNeedManifest, run: checkKindManifest},
		{name: "Config", run: checkKindConfig},
	}, own...)
}

func kindNeedManifest(s *kindSuite) string { return needManifest(s.Suite) }

func needBind(s *kindSuite) string {
	if s.bind == nil {
		return "ResolverTarget.Bind is not set: the kit cannot give the plugin bindings to answer"
	}
	return ""
}

// checkKindInfo: Info is well formed, declares the suite's kind and only
// known kinds, and is stable across starts.
func checkKindInfo(ctx context.Context, e *kindEnv) error {
	if err := e.open(ctx, e.s.config(e.dir)); err != nil {
		return err
	}
	info := e.inst.conn.Info()
	var p problems
	if err := host.CheckInfo(info); err != nil {
		p.addf("the host refuses this Info: %v", err)
	}
	if !slices.Contains(info.Kinds, e.s.kind) {
		p.addf("Info.Kinds %v does not include %q", info.Kinds, e.s.kind)
	}
	for i, k := range info.Kinds {
		if !slices.Contains(sdk.Kinds(), k) {
			p.addf("Info.Kinds names unknown kind %q", k)
		}
		if slices.Contains(info.Kinds[:i], k) {
			p.addf("Info.Kinds lists %q twice", k)
		}
	}
	if len(info.Capabilities) > 0 && !slices.Contains(info.Kinds, sdk.KindProvider) {
		p.addf("Info.Capabilities %v: capabilities are provider features; this plugin serves no provider", info.Capabilities)
	}
	if len(info.ConfigSchema) > 0 {
		var schema map[string]any
		if err := json.Unmarshal(info.ConfigSchema, &schema); err != nil || schema == nil {
			p.addf("Info.ConfigSchema is not a JSON object (a JSON Schema): %s", info.ConfigSchema)
		}
	}
	if first := e.s.info; info.Name != first.Name || info.Version != first.Version || !slices.Equal(info.Kinds, first.Kinds) {
		p.addf("Info changed between two starts: %+v, then %+v", first, info)
	}
	return p.err()
}

func checkKindManifest(ctx context.Context, e *kindEnv) error {
	return checkManifest(ctx, &env{suite: e.s.Suite, dir: e.dir})
}

// checkKindConfig: the target's config is accepted; an unknown key, a
// non-object and Target.BadConfigs are refused with sdk.ErrInvalid.
func checkKindConfig(ctx context.Context, e *kindEnv) error {
	valid := e.s.config(e.dir)
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(valid, &obj); err != nil || obj == nil {
		return fmt.Errorf("the target's config must be a JSON object, got %s", valid)
	}
	if err := e.open(ctx, valid); err != nil {
		return err
	}
	if err := e.close(); err != nil {
		return err
	}
	return e.s.refusesBadConfigs(ctx, e.dir, obj)
}

// --- selectors ---

var selAlice = sdk.Identity{Realm: realmA, ID: "alice"}

// selectorRows are n manifest rows about deployments and other things,
// newest first, so any selector finds something relevant to the query.
func selectorRows(n int) []sdk.ManifestRow {
	topics := []string{"deploy production database", "lunch order sandwich", "deploy staging cluster", "holiday calendar", "conformance release notes"}
	now := time.Now().UTC().Truncate(time.Millisecond)
	rows := make([]sdk.ManifestRow, n)
	for i := range rows {
		rows[i] = sdk.ManifestRow{
			ID: fmt.Sprintf("row-%05d", i), Scope: scopeAlice, Kind: sdk.KindFact,
			Title: fmt.Sprintf("%s %d", topics[i%len(topics)], i), Description: "conformance row " + topics[(i+1)%len(topics)],
			UpdatedAt: now.Add(-time.Duration(i) * time.Hour), Rank: float64(n-i) / float64(n) * float64(i%2),
		}
	}
	return rows
}

const selectQuery = "how do we deploy the production database?"

// checkSelection checks one answer against the request that asked for it.
func checkSelection(what string, req sdk.SelectRequest, sel sdk.Selection) error {
	var p problems
	offered := map[string]bool{}
	for _, r := range req.Rows {
		offered[r.ID] = true
	}
	seen := map[string]bool{}
	for _, id := range sel.IDs {
		switch {
		case !offered[id]:
			p.addf("%s: answered id %q, which the manifest did not offer", what, id)
		case slices.Contains(req.SuppressedIDs, id):
			p.addf("%s: answered suppressed id %q", what, id)
		case seen[id]:
			p.addf("%s: answered id %q twice", what, id)
		}
		seen[id] = true
	}
	if req.Max > 0 && len(sel.IDs) > req.Max {
		p.addf("%s: answered %d ids, more than max %d", what, len(sel.IDs), req.Max)
	}
	if sel.Coverage != sdk.CoverageSufficient && sel.Coverage != sdk.CoverageNeedDeeperSweep {
		p.addf("%s: coverage %q is neither %q nor %q", what, sel.Coverage, sdk.CoverageSufficient, sdk.CoverageNeedDeeperSweep)
	}
	return p.err()
}

func (e *kindEnv) openSelector(ctx context.Context) (sdk.Selector, error) {
	if err := e.open(ctx, e.s.config(e.dir)); err != nil {
		return nil, err
	}
	return e.selector()
}

func checkSelectorBadRequests(ctx context.Context, e *kindEnv) error {
	sel, err := e.openSelector(ctx)
	if err != nil {
		return err
	}
	rows := selectorRows(5)
	var p problems
	for what, req := range map[string]sdk.SelectRequest{
		"an empty realm":    {Identity: sdk.Identity{ID: "alice"}, Query: selectQuery, Rows: rows},
		"an empty identity": {Identity: sdk.Identity{Realm: realmA}, Query: selectQuery, Rows: rows},
		"a negative max":    {Identity: selAlice, Query: selectQuery, Rows: rows, Max: -1},
		"a row without id":  {Identity: selAlice, Query: selectQuery, Rows: append(rows, sdk.ManifestRow{Title: "deploy"})},
	} {
		_, err := sel.Select(ctx, req)
		p.add(wantErr("Select with "+what, err, sdk.ErrInvalid))
	}
	req := sdk.SelectRequest{Identity: selAlice, Query: selectQuery, Rows: rows, Max: 3}
	if s, err := sel.Select(ctx, req); err != nil {
		p.addf("Select after bad requests: %v", err)
	} else {
		p.add(checkSelection("Select after bad requests", req, s))
	}
	return p.err()
}

func checkSelectorContract(ctx context.Context, e *kindEnv) error {
	sel, err := e.openSelector(ctx)
	if err != nil {
		return err
	}
	rows := selectorRows(60)
	// Duplicate a row: a provider may list one id in two tiers.
	rows = append(rows, rows[0])
	var p problems
	for what, req := range map[string]sdk.SelectRequest{
		"max 3":             {Identity: selAlice, Query: selectQuery, Rows: rows, Max: 3},
		"max 1, suppressed": {Identity: selAlice, Query: selectQuery, Rows: rows, Max: 1, SuppressedIDs: []string{"row-00000", "row-00002", "row-00005"}},
		"default max":       {Identity: selAlice, Query: selectQuery, Rows: rows},
		"all suppressed":    {Identity: selAlice, Query: selectQuery, Rows: rows[:3], SuppressedIDs: rowIDs(rows[:3])},
		"no query":          {Identity: selAlice, Query: "", Rows: rows, Max: 3},
	} {
		s, err := sel.Select(ctx, req)
		if err != nil {
			p.addf("Select (%s): %v", what, err)
			continue
		}
		p.add(checkSelection("Select ("+what+")", req, s))
		if what == "all suppressed" && len(s.IDs) > 0 {
			p.addf("Select with every row suppressed answered %v", s.IDs)
		}
	}
	return p.err()
}

func checkSelectorEmpty(ctx context.Context, e *kindEnv) error {
	sel, err := e.openSelector(ctx)
	if err != nil {
		return err
	}
	req := sdk.SelectRequest{Identity: selAlice, Query: selectQuery, Max: 3}
	s, err := sel.Select(ctx, req)
	if err != nil {
		return fmt.Errorf("selecting over an empty manifest: %v", err)
	}
	if len(s.IDs) != 0 {
		return fmt.Errorf("selecting over an empty manifest answered %v", s.IDs)
	}
	return checkSelection("Select over an empty manifest", req, s)
}

// checkSelectorPage: a full page of rows is taken in one call, twice over
// (a sweep sends page after page), and answered within the contract.
func checkSelectorPage(ctx context.Context, e *kindEnv) error {
	sel, err := e.openSelector(ctx)
	if err != nil {
		return err
	}
	rows := selectorRows(2 * SelectorPageRows)
	var p problems
	for page := range 2 {
		req := sdk.SelectRequest{Identity: selAlice, Query: selectQuery, Rows: rows[page*SelectorPageRows : (page+1)*SelectorPageRows], Max: 8}
		s, err := sel.Select(ctx, req)
		if err != nil {
			p.addf("Select of page %d (%d rows): %v", page, SelectorPageRows, err)
			continue
		}
		p.add(checkSelection(fmt.Sprintf("Select of page %d", page), req, s))
	}
	return p.err()
}

func checkSelectorConcurrency(ctx context.Context, e *kindEnv) error {
	sel, err := e.openSelector(ctx)
	if err != nil {
		return err
	}
	rows := selectorRows(200)
	const workers, calls = 8, 5
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var p problems
			for i := range calls {
				req := sdk.SelectRequest{Identity: selAlice, Query: selectQuery, Rows: rows, Max: 1 + (w+i)%5, SuppressedIDs: rowIDs(rows[:w])}
				s, err := sel.Select(ctx, req)
				if err != nil {
					p.addf("worker %d call %d: %v", w, i, err)
					continue
				}
				p.add(checkSelection(fmt.Sprintf("worker %d call %d", w, i), req, s))
			}
			errs[w] = p.err()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// --- resolvers ---

func (e *kindEnv) openResolver(ctx context.Context) error {
	return e.open(ctx, e.s.config(e.dir))
}

// resolve asks the suite's kind for id, as a comparable string list
// (mobs, or the operator as a list of zero or one).
func (e *kindEnv) resolve(ctx context.Context, id sdk.Identity) ([]string, error) {
	if e.s.kind == sdk.KindMobResolver {
		c, err := e.mobs()
		if err != nil {
			return nil, err
		}
		return c.ResolveMobs(ctx, id)
	}
	c, err := e.operators()
	if err != nil {
		return nil, err
	}
	op, err := c.ResolveOperator(ctx, id)
	if op == "" {
		return nil, err
	}
	return []string{op}, err
}

func checkResolverBadRequests(ctx context.Context, e *kindEnv) error {
	if err := e.openResolver(ctx); err != nil {
		return err
	}
	var p problems
	for what, id := range map[string]sdk.Identity{
		"an empty realm":        {ID: "alice"},
		"an empty identity":     {Realm: realmA},
		"a realm with a space":  {Realm: "bad realm", ID: "alice"},
		"an identity with a /":  {Realm: realmA, ID: "a/b"},
		"an oversized identity": {Realm: realmA, ID: fill("x", sdk.MaxIDBytes+1)},
	} {
		_, err := e.resolve(ctx, id)
		p.add(wantErr(fmt.Sprintf("%s for %s", e.s.kind, what), err, sdk.ErrInvalid))
	}
	if _, err := e.resolve(ctx, sdk.Identity{Realm: realmA, ID: "alice"}); err != nil {
		p.addf("%s after bad requests: %v", e.s.kind, err)
	}
	return p.err()
}

func checkMobAnswers(ctx context.Context, e *kindEnv) error {
	if err := e.openResolver(ctx); err != nil {
		return err
	}
	var p problems
	ids := []sdk.Identity{{Realm: realmA, ID: "alice"}, {Realm: realmB, ID: "alice"}, {Realm: realmA, ID: "bob"}, {Realm: realmA, ID: "nobody"}, {Realm: "conformance-unknown", ID: "alice"}}
	for _, id := range ids {
		got, err := e.resolve(ctx, id)
		if err != nil {
			p.addf("ResolveMobs(%s/%s): %v", id.Realm, id.ID, err)
			continue
		}
		if want := fixture.Mobs[id]; !sameSet(got, want) {
			p.addf("ResolveMobs(%s/%s) = %v, want %v", id.Realm, id.ID, got, want)
		}
	}
	return p.err()
}

func checkOperatorAnswers(ctx context.Context, e *kindEnv) error {
	if err := e.openResolver(ctx); err != nil {
		return err
	}
	c, err := e.operators()
	if err != nil {
		return err
	}
	var p problems
	ids := []sdk.Identity{{Realm: realmA, ID: "alice"}, {Realm: realmB, ID: "alice"}, {Realm: realmA, ID: "bob"}, {Realm: "conformance-unknown", ID: "alice"}}
	for _, id := range ids {
		got, err := c.ResolveOperator(ctx, id)
		if err != nil {
			p.addf("ResolveOperator(%s/%s): %v", id.Realm, id.ID, err)
			continue
		}
		if want := fixture.Operators[id]; got != want {
			p.addf("ResolveOperator(%s/%s) = %q, want %q", id.Realm, id.ID, got, want)
		}
	}
	return p.err()
}

// checkMobPage: an identity bound to many mobs gets them all in one answer.
func checkMobPage(ctx context.Context, e *kindEnv) error {
	many := Bindings{Mobs: map[sdk.Identity][]string{}, Operators: map[sdk.Identity]string{}}
	big := sdk.Identity{Realm: realmA, ID: "crowd"}
	for i := range 2000 {
		many.Mobs[big] = append(many.Mobs[big], fmt.Sprintf("mob-%04d", i))
	}
	if err := e.open(ctx, e.s.bind(e.dir, many)); err != nil {
		return err
	}
	got, err := e.resolve(ctx, big)
	if err != nil {
		return fmt.Errorf("ResolveMobs of an identity with %d mobs: %w", len(many.Mobs[big]), err)
	}
	if !sameSet(got, many.Mobs[big]) {
		return fmt.Errorf("ResolveMobs of an identity with %d mobs answered %d of them", len(many.Mobs[big]), len(got))
	}
	return nil
}

func checkResolverConcurrency(ctx context.Context, e *kindEnv) error {
	if err := e.openResolver(ctx); err != nil {
		return err
	}
	ids := []sdk.Identity{{Realm: realmA, ID: "alice"}, {Realm: realmB, ID: "alice"}, {Realm: realmA, ID: "bob"}}
	want := make([][]string, len(ids))
	for i, id := range ids {
		got, err := e.resolve(ctx, id)
		if err != nil {
			return err
		}
		want[i] = got
	}
	const workers, calls = 16, 20
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var p problems
			for i := range calls {
				k := (w + i) % len(ids)
				got, err := e.resolve(ctx, ids[k])
				if err != nil {
					p.addf("worker %d: %v", w, err)
				} else if !sameSet(got, want[k]) {
					p.addf("worker %d: %s/%s answered %v, then %v", w, ids[k].Realm, ids[k].ID, want[k], got)
				}
			}
			errs[w] = p.err()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
