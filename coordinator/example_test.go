package coordinator_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// A Go embedder injects memory beside a user's turn.
func ExampleCoordinator_InjectForTurn() {
	provider := coordinatortest.NewProvider() // any sdk.Provider: a launched plugin, or in-process
	provider.MustAdd("default", sdk.Record{
		Scope: sdk.IdentityScope("alice"), Kind: sdk.KindPreference,
		Title: "Coffee", Body: "Alice takes her coffee as a flat white.",
	})
	c, err := coordinator.New(coordinator.DefaultConfig(), coordinator.Options{
		Providers: coordinator.RealmProviders{"default": provider},
	})
	if err != nil {
		panic(err)
	}
	defer c.Close(context.Background())

	alice := sdk.Identity{Realm: "default", ID: "alice"}
	res, err := c.InjectForTurn(context.Background(), alice, "session-1", coordinator.TextContent("order me a coffee"))
	if err != nil {
		panic(err)
	}
	fmt.Println(len(res.InjectedContext), res.SkipReason == coordinator.SkipNone)
	fmt.Println(strings.Contains(res.InjectedContext[0], "flat white"))

	// The same record is not injected twice in one session.
	again, _ := c.InjectForTurn(context.Background(), alice, "session-1", coordinator.TextContent("order me a coffee"))
	fmt.Println(again.SkipReason)
	// Output:
	// 1 true
	// true
	// no_records
}
