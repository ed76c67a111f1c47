package sdk

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// declarer is a provider that declares whatever kinds and capabilities it
// is given, implementing only Recall.
type declarer struct {
	kinds []PluginKind
	caps  Capabilities
}

func (d *declarer) Info() Info {
	return Info{Name: "declarer", Version: "1.0.0", Protocols: []int{ProtocolVersion}, Kinds: d.kinds, Capabilities: d.caps}
}
func (d *declarer) Configure(context.Context, json.RawMessage) error { return nil }
func (d *declarer) Recall(context.Context, RecallQuery) ([]Hit, error) {
	return nil, nil
}

// TestCheckPluginSaysWhatIsMissing: a plugin declaring what it does not
// implement is refused naming the kind or capability, never its Go type
// (the refusal reaches the host's operator, not only the author).
func TestCheckPluginSaysWhatIsMissing(t *testing.T) {
	cases := []struct {
		d    *declarer
		want string
	}{
		{&declarer{kinds: []PluginKind{KindProvider}}, ""},
		{&declarer{kinds: []PluginKind{KindProvider}, caps: Capabilities{CapFetch}}, `declares "fetch"`},
		{&declarer{kinds: []PluginKind{KindProvider, KindSelector}}, `declares "selector"`},
	}
	for _, c := range cases {
		err := CheckPlugin(c.d)
		if c.want == "" {
			if err != nil {
				t.Errorf("CheckPlugin(%v) = %v, want nil", c.d.Info(), err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckPlugin(%v) = %v, want it to say %s", c.d.Info(), err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "*") || strings.Contains(err.Error(), "sdk.") || strings.Contains(err.Error(), "declarer") {
			t.Errorf("CheckPlugin's refusal names a Go type: %v", err)
		}
	}
}
