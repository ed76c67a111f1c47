package sdk

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	pb "github.com/memhost/memhost/sdk/internal/pluginpb"
)

// hostSeer records the HostInfo its Configure sees.
type hostSeer struct {
	seen HostInfo
	ok   bool
}

func (h *hostSeer) Info() Info { return Info{Name: "seer"} }
func (h *hostSeer) Configure(ctx context.Context, _ json.RawMessage) error {
	h.seen, h.ok = HostFrom(ctx)
	return nil
}

// TestHostFromIsTyped: the host's capabilities reach Configure as
// HostCapability values, a newer host's unknown one included.
func TestHostFromIsTyped(t *testing.T) {
	p := &hostSeer{}
	s := &pluginServer{impl: p}
	_, err := s.Configure(context.Background(), &pb.ConfigureRequest{Host: &pb.HostInfo{
		Version: "9.9.9", ProtocolVersions: []int32{1}, Capabilities: []string{"field_errors", "select_stream", "from_the_future"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := HostCapabilities{HostFieldErrors, HostSelectStream, "from_the_future"}
	if !p.ok || p.seen.Version != "9.9.9" || !slices.Equal(p.seen.Capabilities, want) || !slices.Equal(p.seen.Protocols, []int{1}) {
		t.Fatalf("HostFrom = %+v, %v", p.seen, p.ok)
	}
	if !p.seen.Capabilities.Has(HostFieldErrors) || p.seen.Capabilities.Has(HostManifestStream) {
		t.Fatalf("Has answers wrongly for %v", p.seen.Capabilities)
	}
}
