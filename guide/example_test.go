package guide_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/guide"
	"github.com/memhost/memhost/sdk"
)

// A Go agent loop with a memory guide: one recall at session start, one
// before each model call, and the block replaced as the topic drifts.
func Example() {
	provider := coordinatortest.NewProvider() // in production: a provider plugin's client
	provider.MustAdd("default",
		sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindPreference, Title: "Coffee", Body: "Alice drinks flat whites."},
		sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "Tea", Body: "Alice keeps green tea at work.", Tags: []string{"office"}},
	)
	coord, err := coordinator.New(coordinator.DefaultConfig(), coordinator.Options{
		Providers: coordinator.RealmProviders{"default": provider},
	})
	if err != nil {
		panic(err)
	}
	defer coord.Close(context.Background())

	alice := sdk.Identity{Realm: "default", ID: "alice"}
	g := guide.New(coord, alice, "session-1").WithTopK(3).WithMinScore(0.5)
	ctx := context.Background()
	agent := &guide.Context{Task: "order Alice's usual coffee"}

	// Session start: errors here are fatal.
	if err := g.Apply(ctx, agent); err != nil {
		panic(err)
	}
	show := func() {
		for _, b := range agent.Guides {
			fmt.Printf("%s: coffee=%v tea=%v\n", b.Source, strings.Contains(b.Text, "flat whites"), strings.Contains(b.Text, "green tea"))
		}
	}
	show()

	for _, msg := range []string{"what tea is at the office?", "what tea is at the office?"} {
		agent.History = append(agent.History, guide.Message{Role: "user", Content: msg})
		changed := g.ApplyBeforeIteration(ctx, agent) // errors are logged, never fatal
		fmt.Println("changed:", changed)
		show()
		// ... call the model with agent.Guides in the prompt ...
	}
	// Output:
	// memory: coffee=true tea=false
	// changed: true
	// memory: coffee=false tea=true
	// changed: false
	// memory: coffee=false tea=true
}
