package coordinator

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/memhost/memhost/sdk"
)

// scopeWeight is each scope class's share of the build index (DESIGN 5.2).
var scopeWeight = map[sdk.ScopeClass]int{
	sdk.ScopeIdentity: 4,
	sdk.ScopeMob:      2,
	sdk.ScopeOperator: 1,
	sdk.ScopeRealm:    1,
}

// Scopes answers the scopes an identity reads, in order: its own, its
// bound mobs, its operator (only with operator_scope = "provisional" and
// an operator resolver), and the realm (DESIGN 5.3). Resolvers run
// concurrently; a resolver failure fails the composition.
func (c *Coordinator) Scopes(ctx context.Context, id sdk.Identity) ([]sdk.Scope, error) {
	id, err := c.identity(id)
	if err != nil {
		return nil, err
	}
	return c.compose(ctx, id)
}

func (c *Coordinator) compose(ctx context.Context, id sdk.Identity) ([]sdk.Scope, error) {
	useOperator := c.cfg.OperatorScope == OperatorScopeProvisional && c.operators != nil
	var (
		mobs           []string
		operator       string
		mobErr, opErr  error
		wg             sync.WaitGroup
		resolveMobs    = func() { mobs, mobErr = c.mobs.ResolveMobs(ctx, id) }
		resolveOperate = func() { operator, opErr = c.operators.ResolveOperator(ctx, id) }
	)
	switch {
	case c.mobs != nil && useOperator:
		wg.Add(1)
		go func() { defer wg.Done(); resolveMobs() }()
		resolveOperate()
		wg.Wait()
	case c.mobs != nil:
		resolveMobs()
	case useOperator:
		resolveOperate()
	}
	if mobErr != nil {
		return nil, fmt.Errorf("mob resolver: %w", mobErr)
	}
	if opErr != nil {
		return nil, fmt.Errorf("operator resolver: %w", opErr)
	}
	scopes := make([]sdk.Scope, 0, len(mobs)+3)
	scopes = append(scopes, id.Scope())
	bad, example := 0, ""
	for _, m := range cleanNames(mobs) {
		if s := sdk.MobScope(m); s.Validate() == nil {
			scopes = append(scopes, s)
		} else if bad++; bad == 1 {
			example = m
		}
	}
	c.unusableNames(ctx, id, faultMobResolver, bad, example)
	if op := strings.TrimSpace(operator); op != "" {
		if s := sdk.OperatorScope(op); s.Validate() == nil {
			scopes = append(scopes, s)
		} else {
			c.unusableNames(ctx, id, faultOperatorResolver, 1, op)
		}
	}
	return append(scopes, sdk.RealmScope), nil
}

// unusableNames notes that a resolver answered n names that are no scope
// name, which were ignored. The answer is cached and composed on every
// turn, and may hold any number of names: the line is one per
// composition at most, rate-limited as the scope faults are.
func (c *Coordinator) unusableNames(ctx context.Context, id sdk.Identity, resolver string, n int, example string) {
	if n == 0 {
		return
	}
	names, compositions, held, due := c.scopeFaults.add(c.now(), [2]string{id.Realm, resolver}, n)
	if !due {
		return
	}
	c.log(ctx).Warn("a resolver answered names that are no usable scope name; they were ignored (fix the resolver or its bindings)",
		append([]any{"realm", id.Realm, "resolver", resolver, "identity", id.ID, "example", example, "names", names, "compositions", compositions}, heldArgs(held)...)...)
}

// cleanNames trims names, drops blanks and repeats, keeping first-seen
// order.
func cleanNames(names []string) []string {
	out := make([]string, 0, len(names))
	seen := make(map[string]struct{}, len(names))
	for _, n := range names {
		n = strings.TrimSpace(n)
		if _, dup := seen[n]; n == "" || dup {
			continue
		}
		seen[n] = struct{}{}
		out = append(out, n)
	}
	return out
}

// splitBudget divides total across weights by the largest remainder
// method: each share is floor(total*w/sum), and the bytes left over go one
// each to the largest fractional parts (earlier entries win ties), so the
// shares always sum to exactly total. The weights are as many as the
// scopes a resolver answered, so the leftovers are handed out by one sort,
// not a scan of all weights per byte.
func splitBudget(total int, weights []int) []int {
	shares := make([]int, len(weights))
	sum := 0
	for _, w := range weights {
		sum += w
	}
	if sum <= 0 || total <= 0 {
		return shares
	}
	rem := make([]int, len(weights))
	order := make([]int, len(weights))
	given := 0
	for i, w := range weights {
		shares[i] = total * w / sum
		rem[i] = total * w % sum
		order[i] = i
		given += shares[i]
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rem[b], rem[a]) })
	for _, i := range order[:total-given] {
		shares[i]++
	}
	return shares
}
