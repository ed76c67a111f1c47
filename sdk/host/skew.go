package host

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/memhost/memhost/sdk"
	pb "github.com/memhost/memhost/sdk/internal/pluginpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Protocol v1 grew a record's occurred_at and recall's since/until after
// its first plugins were built (and Import began to read a record's
// thread). A plugin built before them drops them in silence: a record's
// occurred_at is lost, so a later window judges it by
// the day it was stored, and a window is applied after the plugin's limit
// or not at all. Nothing in a plugin's Info says which it is, so the host
// asks once per plugin process, the first time a call carries one of
// them: a recall whose window holds no instant, which a plugin that reads
// windows refuses (the SDKs do, and the conformance kit's BadFilters check
// holds every plugin to it) and one built before them answers as a plain
// recall.

const (
	timeFieldsUnknown int32 = iota
	timeFieldsRead
	timeFieldsIgnored
)

// reaskOutdated is how long a plugin found built before the time fields
// is taken to be so before it is asked again.
var reaskOutdated = time.Minute

// ErrOutdatedPlugin marks a call refused before it reached the plugin
// because the plugin was built before a field the call carries, which it
// would drop in silence. It names the mismatch and what to do.
var ErrOutdatedPlugin = errors.New("the plugin was built before protocol 1 gained occurred_at, recall's since/until and import's thread, " +
	"so it would drop them in silence; rebuild or upgrade it against a current memhost SDK")

// errIgnoresTime is the call's failure on a plugin built before the time
// fields.
var errIgnoresTime = fmt.Errorf("%w: %w", ErrOutdatedPlugin, sdk.ErrUnsupported)

// readsTime answers nil when the plugin reads occurred_at and since/until,
// errIgnoresTime when it was built before them, and the probe's failure
// (not remembered) when it could not tell.
func (c *providerClient) readsTime(ctx context.Context, realm string) error {
	switch c.timeFields.Load() {
	case timeFieldsRead:
		return nil
	case timeFieldsIgnored:
		// Asked again now and then: a remote plugin upgraded in place
		// answers on the same connection, and the refusal tells its
		// operator to upgrade it.
		if time.Since(time.Unix(0, c.timeFieldsAt.Load())) < reaskOutdated {
			return errIgnoresTime
		}
	}
	if sdk.ValidateRealm(realm) != nil {
		// The plugin refuses the call for its realm; the probe, refused
		// for the same reason, would tell nothing.
		return nil
	}
	_, err := c.rpc.Recall(ctx, &pb.RecallRequest{Realm: realm, Query: "memhost", Limit: 1, SinceUnixMs: 1, UntilUnixMs: 1})
	switch {
	case err == nil:
		c.timeFieldsAt.Store(time.Now().UnixNano())
		c.timeFields.Store(timeFieldsIgnored)
		return errIgnoresTime
	case status.Code(err) == codes.InvalidArgument:
		c.timeFields.Store(timeFieldsRead)
		return nil
	default:
		return fromStatus(ctx, err)
	}
}

// importCarriesThread reports whether any of records imported holds a
// thread: a plugin built before the time fields dropped an imported
// record's thread too (it came in the same change).
func importCarriesThread(records []sdk.Record) bool {
	for i := range records {
		if records[i].Thread != nil {
			return true
		}
	}
	return false
}

// carriesTime reports whether any of records holds an occurred_at.
func carriesTime(records []sdk.Record) bool {
	for i := range records {
		if !records[i].OccurredAt.IsZero() {
			return true
		}
	}
	return false
}

// timeFieldsState is the per-process answer readsTime keeps.
type timeFieldsState = atomic.Int32
