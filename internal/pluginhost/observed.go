package pluginhost

import (
	"context"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// CallObserver is told the duration and outcome of every plugin call, of
// every kind, by instance and method, for the host's latency metrics.
type CallObserver func(instance, method string, took time.Duration, err error)

// observe reports one call of a selector, compactor or resolver; provider
// calls are timed by observed, which wraps the narrowed provider.
func (i *instance) observe(method string, start time.Time, err error) {
	if i.opts.ObserveCall != nil {
		i.opts.ObserveCall(i.spec.Name, method, time.Since(start), err)
	}
}

// observed times each call of a supervised provider.
type observed struct {
	p    *Provider
	name string
	obs  CallObserver
}

var _ host.FullProvider = observed{}

func (o observed) done(method string, start time.Time, err error) {
	o.obs(o.name, method, time.Since(start), err)
}

func (o observed) Capabilities() sdk.Capabilities { return o.p.Capabilities() }

func (o observed) Recall(ctx context.Context, q sdk.RecallQuery) (h []sdk.Hit, err error) {
	defer func(start time.Time) { o.done("recall", start, err) }(time.Now())
	return o.p.Recall(ctx, q)
}

func (o observed) Remember(ctx context.Context, realm string, records []sdk.Record) (ids []string, err error) {
	defer func(start time.Time) { o.done("remember", start, err) }(time.Now())
	return o.p.Remember(ctx, realm, records)
}

func (o observed) Get(ctx context.Context, realm string, ids []string) (recs []sdk.Record, err error) {
	defer func(start time.Time) { o.done("get", start, err) }(time.Now())
	return o.p.Get(ctx, realm, ids)
}

func (o observed) Forget(ctx context.Context, realm string, ids []string) (n int, err error) {
	defer func(start time.Time) { o.done("forget", start, err) }(time.Now())
	return o.p.Forget(ctx, realm, ids)
}

func (o observed) Manifest(ctx context.Context, q sdk.ManifestQuery) (rows []sdk.ManifestRow, err error) {
	defer func(start time.Time) { o.done("manifest", start, err) }(time.Now())
	return o.p.Manifest(ctx, q)
}

func (o observed) Supersede(ctx context.Context, realm, oldID string, r sdk.Record) (id string, err error) {
	defer func(start time.Time) { o.done("supersede", start, err) }(time.Now())
	return o.p.Supersede(ctx, realm, oldID, r)
}

func (o observed) MarkUsed(ctx context.Context, realm string, ids []string, at time.Time) (err error) {
	defer func(start time.Time) { o.done("mark_used", start, err) }(time.Now())
	return o.p.MarkUsed(ctx, realm, ids, at)
}

func (o observed) WriteLedger(ctx context.Context, entries []sdk.LedgerEntry) (err error) {
	defer func(start time.Time) { o.done("write_ledger", start, err) }(time.Now())
	return o.p.WriteLedger(ctx, entries)
}

func (o observed) Export(ctx context.Context, realm, after string, limit int) (page sdk.ExportPage, err error) {
	defer func(start time.Time) { o.done("export", start, err) }(time.Now())
	return o.p.Export(ctx, realm, after, limit)
}

func (o observed) Reindex(ctx context.Context, realm string, progress func(done, total int)) (n int, err error) {
	defer func(start time.Time) { o.done("reindex", start, err) }(time.Now())
	return o.p.Reindex(ctx, realm, progress)
}

func (o observed) Import(ctx context.Context, realm string, records []sdk.Record) (res sdk.ImportResult, err error) {
	defer func(start time.Time) { o.done("import", start, err) }(time.Now())
	return o.p.Import(ctx, realm, records)
}
