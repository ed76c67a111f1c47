package host_test

import (
	"context"
	"errors"
	"io/fs"
	"syscall"
	"testing"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// fullProvider refuses every write with the system error named by the
// record's title.
type fullProvider struct{ echoProvider }

func (p *fullProvider) Remember(_ context.Context, _ string, recs []sdk.Record) ([]string, error) {
	errno := map[string]syscall.Errno{"enospc": syscall.ENOSPC, "erofs": syscall.EROFS}[recs[0].Title]
	return nil, sdk.StorageError(&fs.PathError{Op: "write", Path: "/data/x", Err: errno})
}

// The storage sentinels cross the plugin boundary intact and stay apart
// from too_large, which shares gRPC's ResourceExhausted.
func TestStorageSentinelsCrossTheBoundary(t *testing.T) {
	ctx := context.Background()
	conn, err := host.ServeInProcess(ctx, &fullProvider{echoProvider{records: map[string]sdk.Record{}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	p, err := conn.Provider()
	if err != nil {
		t.Fatal(err)
	}
	w, ok := p.Writer()
	if !ok {
		t.Fatal("Writer answers false, but the plugin declared write")
	}
	for _, tc := range []struct {
		title string
		want  error
		code  sdk.Code
	}{
		{"enospc", sdk.ErrNoSpace, sdk.CodeStorageFull},
		{"erofs", sdk.ErrReadOnly, sdk.CodeReadOnly},
	} {
		_, err := w.Remember(ctx, "default", []sdk.Record{{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: tc.title}})
		if !errors.Is(err, tc.want) || sdk.CodeOf(err) != tc.code || errors.Is(err, sdk.ErrTooLarge) {
			t.Fatalf("%s: err = %v (code %s), want %v", tc.title, err, sdk.CodeOf(err), tc.want)
		}
	}
}
