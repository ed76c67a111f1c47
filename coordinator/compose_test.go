package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

func TestSplitBudget(t *testing.T) {
	cases := []struct {
		total   int
		weights []int
		want    []int
	}{
		{8192, []int{4, 2, 1, 1}, []int{4096, 2048, 1024, 1024}},
		{8192, []int{4, 1}, []int{6554, 1638}},                  // 6553.6 / 1638.4
		{8192, []int{4, 2, 1}, []int{4681, 2341, 1170}},         // 4681.14 / 2340.57 / 1170.29
		{8192, []int{4, 2, 2, 1}, []int{3641, 1821, 1820, 910}}, // 3640.89 / 1820.44 x2 (tie: the earlier) / 910.22
		{8192, []int{4, 2, 2, 2, 1, 1}, []int{2731, 1365, 1365, 1365, 683, 683}},
		{10, []int{1, 1, 1}, []int{4, 3, 3}}, // ties go to the earlier scope
		{7, []int{4}, []int{7}},
		{0, []int{4, 1}, []int{0, 0}},
		{100, nil, []int{}},
	}
	for _, tc := range cases {
		got := splitBudget(tc.total, tc.weights)
		if !slices.Equal(got, tc.want) {
			t.Errorf("splitBudget(%d, %v) = %v, want %v", tc.total, tc.weights, got, tc.want)
		}
		sum := 0
		for _, n := range got {
			sum += n
		}
		if len(tc.weights) > 0 && sum != tc.total {
			t.Errorf("splitBudget(%d, %v) sums to %d", tc.total, tc.weights, sum)
		}
	}
}

func TestOperatorActivationMatrix(t *testing.T) {
	resolver := coordinatortest.OperatorFunc(func(_ context.Context, id sdk.Identity) (string, error) {
		if id.Realm == "default" {
			return " ops ", nil
		}
		return "", nil // other realms have no operator for this identity
	})
	cases := []struct {
		name      string
		mode      OperatorScopeMode
		resolver  sdk.OperatorResolver
		id        sdk.Identity
		want      []sdk.Scope
		wantCalls bool
	}{
		{"provisional with resolver", OperatorScopeProvisional, resolver, alice,
			[]sdk.Scope{"identity:alice", "operator:ops", "realm"}, true},
		{"provisional alone", OperatorScopeProvisional, nil, alice, []sdk.Scope{"identity:alice", "realm"}, false},
		{"off with resolver", OperatorScopeOff, resolver, alice, []sdk.Scope{"identity:alice", "realm"}, false},
		{"other realm", OperatorScopeProvisional, resolver, sdk.Identity{Realm: "acme", ID: "alice"}, []sdk.Scope{"identity:alice", "realm"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			var r sdk.OperatorResolver
			if tc.resolver != nil {
				r = coordinatortest.OperatorFunc(func(ctx context.Context, id sdk.Identity) (string, error) {
					calls++
					return tc.resolver.ResolveOperator(ctx, id)
				})
			}
			acme := coordinatortest.NewProvider()
			f := newFixture(t, func(c *Config, o *Options) {
				c.OperatorScope = tc.mode
				o.OperatorResolver = r
				o.Providers = RealmProviders{"default": o.Providers.(RealmProviders)["default"], "acme": acme}
			})
			got, err := f.c.Scopes(context.Background(), tc.id)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("scopes %v, want %v", got, tc.want)
			}
			if (calls > 0) != tc.wantCalls {
				t.Fatalf("resolver called %d times", calls)
			}
			// The turn's recall carries the same composition.
			p := f.p
			if tc.id.Realm == "acme" {
				p = acme
			}
			p.MustAdd(tc.id.Realm, scoped(sdk.OperatorScope("ops"), "Coffee policy", "operator says decaf"))
			res, err := f.c.InjectForTurn(context.Background(), tc.id, "", TextContent("coffee"))
			if err != nil {
				t.Fatal(err)
			}
			if q := p.RecallQueries()[0]; !slices.Equal(q.Scopes, tc.want) || q.Realm != tc.id.Realm {
				t.Fatalf("recall scopes %v realm %q, want %v %q", q.Scopes, q.Realm, tc.want, tc.id.Realm)
			}
			if injected := res.SkipReason == SkipNone; injected != slices.Contains(tc.want, sdk.OperatorScope("ops")) {
				t.Fatalf("operator record injected %v with scopes %v", injected, tc.want)
			}
		})
	}
}

func TestMobComposition(t *testing.T) {
	cases := []struct {
		name string
		mobs []string
		err  error
		want []sdk.Scope
	}{
		{"none", nil, nil, []sdk.Scope{"identity:alice", "realm"}},
		{"trimmed, deduplicated, blanks dropped", []string{" eng ", "", "eng", "  ", "ops"}, nil, []sdk.Scope{"identity:alice", "mob:eng", "mob:ops", "realm"}},
		{"unusable names dropped", []string{"good", "bad name", "../x"}, nil, []sdk.Scope{"identity:alice", "mob:good", "realm"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config, o *Options) {
				c.OperatorScope = OperatorScopeProvisional
				o.OperatorResolver = coordinatortest.OperatorFunc(func(context.Context, sdk.Identity) (string, error) { return "", nil })
				o.MobResolver = coordinatortest.MobsFunc(func(context.Context, sdk.Identity) ([]string, error) { return tc.mobs, tc.err })
			})
			got, err := f.c.Scopes(context.Background(), alice)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("scopes %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("resolver failure follows the recall policy", func(t *testing.T) {
		f := newFixture(t, func(c *Config, o *Options) {
			o.MobResolver = coordinatortest.MobsFunc(func(context.Context, sdk.Identity) ([]string, error) {
				return nil, sdk.ErrUnavailable
			})
		})
		f.add(rec("Coffee", "x"))
		if res := f.turn(alice, "s", "coffee"); res.SkipReason != SkipRecallFailed {
			t.Fatalf("skip %q, want recall_failed", res.SkipReason)
		}
		if _, err := f.c.Scopes(context.Background(), alice); !errors.Is(err, sdk.ErrUnavailable) {
			t.Fatalf("Scopes: %v", err)
		}
	})
}

// TestSplitBudgetManyScopes: a mob resolver may answer 100,000 mobs, and
// the split still hands out every byte by the largest remainders (its
// cost, computed on every build: BenchmarkSplitBudgetManyScopes).
func TestSplitBudgetManyScopes(t *testing.T) {
	weights := manyScopeWeights()
	shares := splitBudget(8192, weights)
	sum := 0
	for _, n := range shares {
		sum += n
	}
	if sum != 8192 || shares[0] != 1 || shares[1] != 1 || shares[len(shares)-1] != 0 {
		t.Errorf("shares sum to %d, first %v, last %d", sum, shares[:3], shares[len(shares)-1])
	}
}

func BenchmarkSplitBudgetManyScopes(b *testing.B) {
	weights := manyScopeWeights()
	for b.Loop() {
		splitBudget(8192, weights)
	}
}

// manyScopeWeights are the weights of 100,002 scopes, the first heavier
// and the last lighter than the rest.
func manyScopeWeights() []int {
	weights := make([]int, 100_002)
	for i := range weights {
		weights[i] = 2
	}
	weights[0], weights[len(weights)-1] = 4, 1
	return weights
}

// TestUnusableMobNamesLogOnce: a resolver's answer is cached and composed
// on every turn; a thousand unusable names in it are not a thousand log
// lines a turn, but one line, rate-limited, that counts them.
func TestUnusableMobNamesLogOnce(t *testing.T) {
	mobs := []string{"good"}
	for i := range 1000 {
		mobs = append(mobs, fmt.Sprintf("../bad-%d", i))
	}
	f := newFixture(t, func(c *Config, o *Options) {
		o.MobResolver = coordinatortest.MobsFunc(func(context.Context, sdk.Identity) ([]string, error) { return mobs, nil })
	})
	for range 10 {
		got, err := f.c.Scopes(context.Background(), alice)
		if err != nil {
			t.Fatal(err)
		}
		if want := []sdk.Scope{"identity:alice", "mob:good", "realm"}; !slices.Equal(got, want) {
			t.Fatalf("scopes %v, want %v", got, want)
		}
	}
	logs := f.logs.String()
	if n := strings.Count(logs, "\n"); n != 1 || !strings.Contains(logs, "names=1000") || !strings.Contains(logs, "../bad-0") {
		t.Fatalf("%d log lines for 10 compositions of 1000 unusable names:\n%.2000s", n, logs)
	}
}
