package host

import (
	"testing"

	pb "github.com/memhost/memhost/sdk/internal/pluginpb"
)

func TestInvalidUTF8Field(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  *pb.RememberRequest
		want string
	}{
		{"valid", &pb.RememberRequest{Realm: "default", Records: []*pb.RecordInput{{Title: "café", Tags: []string{"日本"}}}}, ""},
		{"realm", &pb.RememberRequest{Realm: "de\xfffault"}, "realm"},
		{"nested title", &pb.RememberRequest{Realm: "default", Records: []*pb.RecordInput{{Title: "ok"}, {Title: "bad \xc3\x28"}}}, "records[1].title"},
		{"tag", &pb.RememberRequest{Records: []*pb.RecordInput{{Tags: []string{"ok", "\xff"}}}}, "records[0].tags[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := invalidUTF8Field(tc.req.ProtoReflect(), ""); got != tc.want {
				t.Fatalf("invalidUTF8Field = %q, want %q", got, tc.want)
			}
		})
	}
}
