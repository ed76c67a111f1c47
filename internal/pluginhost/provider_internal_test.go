package pluginhost

import (
	"reflect"
	"testing"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// TestSupervisedProviderHasEveryCapability: the supervised provider
// implements every interface host.Provider's accessors answer; one it
// lacked would be answered false even when its plugin declared it.
func TestSupervisedProviderHasEveryCapability(t *testing.T) {
	if n := len(accessorInterfaces()); n != len(sdk.AllCapabilities()) {
		t.Fatalf("host.Provider has %d accessors, want one per capability (%d)", n, len(sdk.AllCapabilities()))
	}
	for _, it := range accessorInterfaces() {
		if !reflect.TypeFor[*provider]().Implements(it) {
			t.Errorf("the supervised provider does not implement %s", it)
		}
	}
}

// accessorInterfaces answers the interface each accessor of host.Provider
// answers (a method of no arguments answering an interface and a bool).
func accessorInterfaces() []reflect.Type {
	var out []reflect.Type
	for m := range reflect.TypeFor[*host.Provider]().Methods() {
		ft := m.Type
		if ft.NumIn() == 1 && ft.NumOut() == 2 && ft.Out(0).Kind() == reflect.Interface && ft.Out(1).Kind() == reflect.Bool {
			out = append(out, ft.Out(0))
		}
	}
	return out
}
