package host

import (
	"context"
	"time"

	"github.com/memhost/memhost/sdk"
)

// FullProvider implements sdk.Provider and every capability interface,
// refusing with sdk.ErrUnsupported whatever its plugin did not declare,
// and says what was declared. Host-side wrappers (a live client, a
// supervised instance) are written once as a FullProvider and handed out
// through Narrow.
type FullProvider interface {
	sdk.Provider
	sdk.RecordWriter
	sdk.RecordGetter
	sdk.RecordForgetter
	sdk.ManifestLister
	sdk.Superseder
	sdk.UsageMarker
	sdk.LedgerWriter
	sdk.Archiver
	sdk.Reindexer
	Capabilities() sdk.Capabilities
}

// narrowOrder gives each capability its bit in narrowers' index.
var narrowOrder = [...]sdk.Capability{
	sdk.CapWrite, sdk.CapFetch, sdk.CapForget, sdk.CapManifest, sdk.CapSupersede, sdk.CapUsage, sdk.CapLedger, sdk.CapArchive, sdk.CapReindex,
}

// Narrow answers full as a value that implements sdk.Provider and exactly
// the capability interfaces in caps, so a type assertion on it answers
// what the plugin declared. Go cannot build a method set at run time, so
// narrow_gen.go holds one small type per combination (TestNarrowGen
// regenerates it).
func Narrow(full FullProvider, caps sdk.Capabilities) sdk.Provider {
	mask := 0
	for i, c := range narrowOrder {
		if caps.Has(c) {
			mask |= 1 << i
		}
	}
	return narrowers[mask](full)
}

// narrowBase carries the methods every narrowed provider has.
type narrowBase struct{ full FullProvider }

func (b narrowBase) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	return b.full.Recall(ctx, q)
}
func (b narrowBase) Capabilities() sdk.Capabilities { return b.full.Capabilities() }

// One type per capability, each forwarding its one interface's method.
type (
	capWrite     struct{ full FullProvider }
	capFetch     struct{ full FullProvider }
	capForget    struct{ full FullProvider }
	capManifest  struct{ full FullProvider }
	capSupersede struct{ full FullProvider }
	capUsage     struct{ full FullProvider }
	capLedger    struct{ full FullProvider }
	capArchive   struct{ full FullProvider }
	capReindex   struct{ full FullProvider }
)

func (c capWrite) Remember(ctx context.Context, realm string, records []sdk.Record) ([]string, error) {
	return c.full.Remember(ctx, realm, records)
}
func (c capFetch) Get(ctx context.Context, realm string, ids []string) ([]sdk.Record, error) {
	return c.full.Get(ctx, realm, ids)
}
func (c capForget) Forget(ctx context.Context, realm string, ids []string) (int, error) {
	return c.full.Forget(ctx, realm, ids)
}
func (c capManifest) Manifest(ctx context.Context, q sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	return c.full.Manifest(ctx, q)
}
func (c capSupersede) Supersede(ctx context.Context, realm, oldID string, r sdk.Record) (string, error) {
	return c.full.Supersede(ctx, realm, oldID, r)
}
func (c capUsage) MarkUsed(ctx context.Context, realm string, ids []string, at time.Time) error {
	return c.full.MarkUsed(ctx, realm, ids, at)
}
func (c capLedger) WriteLedger(ctx context.Context, entries []sdk.LedgerEntry) error {
	return c.full.WriteLedger(ctx, entries)
}
func (c capArchive) Export(ctx context.Context, realm, after string, limit int) (sdk.ExportPage, error) {
	return c.full.Export(ctx, realm, after, limit)
}
func (c capArchive) Import(ctx context.Context, realm string, records []sdk.Record) (sdk.ImportResult, error) {
	return c.full.Import(ctx, realm, records)
}
func (c capReindex) Reindex(ctx context.Context, realm string, progress func(done, total int)) (int, error) {
	return c.full.Reindex(ctx, realm, progress)
}
