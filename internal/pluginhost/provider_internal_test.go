package pluginhost

import (
	"reflect"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// TestSupervisedProviderHasEveryCapability: the supervised provider
// implements every interface host.Provider's accessors answer; one it
// lacked would be answered false even when its plugin declared it.
func TestSupervisedProviderHasEveryCapability(t *testing.T) {
	// neighbours has no accessor: they arrive in Recall's answer.
	if n := len(accessorInterfaces()); n != len(sdk.AllCapabilities())-1 {
		t.Fatalf("host.Provider has %d accessors, want one per capability but neighbours (%d)", n, len(sdk.AllCapabilities())-1)
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

// TestInstanceStartTimeout: the supervisor bounds a start by its own
// setting, else by the SDK's default for a binary or for a script.
func TestInstanceStartTimeout(t *testing.T) {
	script := Entry{Interpreted: &host.Interpreted{Path: "/usr/bin/node"}}
	for _, tc := range []struct {
		name  string
		entry Entry
		set   time.Duration
		want  time.Duration
	}{
		{"binary", Entry{}, 0, host.DefaultStartTimeout},
		{"script", script, 0, host.DefaultInterpretedStartTimeout},
		{"script, set", script, 4 * time.Second, 4 * time.Second},
	} {
		opts := &Options{}
		opts.StartTimeout = tc.set
		opts.defaults()
		if got := newInstance(Spec{Name: "p"}, tc.entry, opts).startTimeout(); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
