package markdown

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestPluginProcess drives the real binary the way the host does: built
// here, started with its sha256 checked, configured over gRPC.
func TestPluginProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the plugin binary")
	}
	conn := launchPlugin(t)
	defer conn.Close()
	if got, want := conn.Info(), New().Info(); !reflect.DeepEqual(got.Capabilities, want.Capabilities) || got.Name != want.Name || got.Version != want.Version || string(got.ConfigSchema) != string(want.ConfigSchema) {
		t.Fatalf("Info over the wire = %+v, want %+v", got, want)
	}
	if err := conn.Configure(ctx, []byte(`{"root": "md", "bogus": 1}`)); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("bad config: err = %v, want ErrInvalid", err)
	}
	root := t.TempDir()
	prov := configureConn(t, conn, root)
	if sdk.Supports(prov, sdk.CapManifest) {
		t.Fatal("the markdown provider must not offer a record manifest")
	}
	ids, err := prov.Remember(ctx, "default", []sdk.Record{rec(alice, "Deploy notes", "ship on fridays", "ops")})
	if err != nil {
		t.Fatal(err)
	}
	hits, err := prov.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "deploy ops"})
	if err != nil || len(hits) != 1 || hits[0].Record.ID != ids[0] || !(hits[0].Score > 0) {
		t.Fatalf("Recall = %+v, %v", hits, err)
	}
	if _, err := os.Stat(filepath.Join(root, "default", "identity", "alice", ids[0]+".md")); err != nil {
		t.Fatalf("record file not under the configured root: %v", err)
	}
	newID, err := prov.Supersede(ctx, "default", ids[0], sdk.Record{Title: "Deploy notes", Body: "ship on mondays"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := prov.Get(ctx, "default", []string{ids[0], newID})
	if err != nil || len(got) != 2 || got[0].Status != sdk.StatusSuperseded || got[1].Supersedes != ids[0] {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, err := prov.Remember(ctx, "default", []sdk.Record{{ID: "../../etc/passwd", Scope: alice, Kind: sdk.KindFact, Title: "x"}}); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("bad id over the wire: err = %v, want ErrInvalid", err)
	}
	if n, err := prov.Forget(ctx, "default", []string{ids[0], newID, ids[0]}); err != nil || n != 2 {
		t.Fatalf("Forget = %d, %v", n, err)
	}
	if hits, _ := prov.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "deploy"}); len(hits) != 0 {
		t.Fatalf("forgotten records recalled: %v", hitIDs(hits))
	}
}
