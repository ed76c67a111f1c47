package conformance

import (
	"reflect"
	"testing"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// TestClientHasEveryCapability: the kit's Client has a method for every
// interface host.Provider's accessors answer, so a check can call any
// capability, and checkUndeclared tries each.
func TestClientHasEveryCapability(t *testing.T) {
	n := 0
	for m := range reflect.TypeFor[*host.Provider]().Methods() {
		ft := m.Type
		if ft.NumIn() != 1 || ft.NumOut() != 2 || ft.Out(0).Kind() != reflect.Interface || ft.Out(1).Kind() != reflect.Bool {
			continue
		}
		n++
		if !reflect.TypeFor[*Client]().Implements(ft.Out(0)) {
			t.Errorf("Client does not implement %s (answered by %s)", ft.Out(0), m.Name)
		}
	}
	// Neighbours ride on Recall (RecallQuery.Neighbours): no accessor, and
	// nothing for the Client to call but Recall.
	if want := len(sdk.AllCapabilities()) - 1; n != want {
		t.Fatalf("host.Provider has %d accessors, want %d: one per capability but %s", n, want, sdk.CapNeighbours)
	}
}
