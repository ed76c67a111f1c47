package host

import (
	"context"
	"time"

	"github.com/memhost/memhost/sdk"
)

// Provider is the host's handle on a provider: Recall, the declared
// capabilities, and one accessor per capability that answers the
// capability's interface, and true, only when the plugin declared it (and
// the value behind the handle implements it). Provider itself implements
// no capability interface, so a type assertion cannot get around the
// declaration; host code asks the accessor. Adding a capability adds one
// accessor here, nothing per combination.
type Provider struct {
	impl sdk.Provider
	caps func() sdk.Capabilities
	// local: impl is an in-process plugin, whose recall answers no
	// neighbours unless Recall attaches them as Serve would.
	local bool
}

// declarer is a value that says what its plugin declared: a connection's
// client, or a supervised instance whose plugin may be replaced by a
// restarted one.
type declarer interface {
	Capabilities() sdk.Capabilities
}

// ProviderOf answers the host's handle on v. A *Provider is answered as
// is. A value with a Capabilities method (a host-side client) declares
// what that method answers, asked at each access. An in-process plugin
// (an sdk.Plugin) declares the capabilities of its Info that it
// implements, read once. Any other value declares none: capabilities are
// declared, never guessed from the methods a value happens to have.
func ProviderOf(v sdk.Provider) *Provider {
	switch d := v.(type) {
	case *Provider:
		return d
	case declarer:
		return &Provider{impl: v, caps: d.Capabilities}
	case sdk.Plugin:
		caps := sdk.CapabilitiesOf(d)
		return &Provider{impl: v, caps: func() sdk.Capabilities { return caps }, local: true}
	default:
		return &Provider{impl: v, caps: func() sdk.Capabilities { return nil }}
	}
}

// Recall asks the provider for the records most relevant to q, with their
// thread neighbours when q asks for them and the provider declared
// sdk.CapNeighbours (a plugin's server attaches them; an in-process one
// gets them attached here, the same way).
func (p *Provider) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	reader, declared := capability[sdk.ThreadReader](p, sdk.CapNeighbours)
	if !declared && !p.caps().Has(sdk.CapNeighbours) {
		q.Neighbours = 0
	}
	hits, err := p.impl.Recall(ctx, q)
	if err != nil || !p.local || !declared {
		return hits, err
	}
	// As Serve answers: a failed read of the neighbours leaves the hits,
	// without any.
	if err := sdk.AttachNeighbours(ctx, reader, q, hits, time.Now()); err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return hits, nil
}

// Capabilities answers what the plugin declared.
func (p *Provider) Capabilities() sdk.Capabilities { return p.caps() }

// Writer answers the provider's sdk.RecordWriter when it declared sdk.CapWrite.
func (p *Provider) Writer() (sdk.RecordWriter, bool) {
	return capability[sdk.RecordWriter](p, sdk.CapWrite)
}

// Getter answers the provider's sdk.RecordGetter when it declared sdk.CapFetch.
func (p *Provider) Getter() (sdk.RecordGetter, bool) {
	g, ok := capability[sdk.RecordGetter](p, sdk.CapFetch)
	if ok && p.local {
		return localGetter{g}, true
	}
	return g, ok
}

// Forgetter answers the provider's sdk.RecordForgetter when it declared sdk.CapForget.
func (p *Provider) Forgetter() (sdk.RecordForgetter, bool) {
	return capability[sdk.RecordForgetter](p, sdk.CapForget)
}

// Lister answers the provider's sdk.ManifestLister when it declared sdk.CapManifest.
func (p *Provider) Lister() (sdk.ManifestLister, bool) {
	return capability[sdk.ManifestLister](p, sdk.CapManifest)
}

// Superseder answers the provider's sdk.Superseder when it declared sdk.CapSupersede.
func (p *Provider) Superseder() (sdk.Superseder, bool) {
	return capability[sdk.Superseder](p, sdk.CapSupersede)
}

// UsageMarker answers the provider's sdk.UsageMarker when it declared sdk.CapUsage.
func (p *Provider) UsageMarker() (sdk.UsageMarker, bool) {
	return capability[sdk.UsageMarker](p, sdk.CapUsage)
}

// UsageCounter answers the provider's sdk.UsageCounter when it declared sdk.CapUsageCounts.
func (p *Provider) UsageCounter() (sdk.UsageCounter, bool) {
	return capability[sdk.UsageCounter](p, sdk.CapUsageCounts)
}

// Ledger answers the provider's sdk.LedgerWriter when it declared sdk.CapLedger.
func (p *Provider) Ledger() (sdk.LedgerWriter, bool) {
	return capability[sdk.LedgerWriter](p, sdk.CapLedger)
}

// Archiver answers the provider's sdk.Archiver when it declared sdk.CapArchive.
func (p *Provider) Archiver() (sdk.Archiver, bool) {
	a, ok := capability[sdk.Archiver](p, sdk.CapArchive)
	if ok && p.local {
		return localArchiver{a}, true
	}
	return a, ok
}

// localGetter holds an in-process plugin's fetch to the realm and ids
// asked, as a client holds a plugin's answer over the wire: every caller
// of Get (a record by id, a forget's or an approval's look first) acts
// on what it answers, so another realm's record for an id must not
// reach them.
type localGetter struct{ sdk.RecordGetter }

func (g localGetter) Get(ctx context.Context, realm string, ids []string) ([]sdk.Record, error) {
	recs, err := g.RecordGetter.Get(ctx, realm, ids)
	if err != nil {
		return nil, err
	}
	if err := checkRecords("get", realm, recs, ids); err != nil {
		return nil, err
	}
	return recs, nil
}

// localArchiver is localGetter for an in-process plugin's export pages
// (an export, a listing, the scope counts).
type localArchiver struct{ sdk.Archiver }

func (a localArchiver) Export(ctx context.Context, realm, after string, limit int) (sdk.ExportPage, error) {
	page, err := a.Archiver.Export(ctx, realm, after, limit)
	if err != nil {
		return sdk.ExportPage{}, err
	}
	if err := checkRecords("export", realm, page.Records, nil); err != nil {
		return sdk.ExportPage{}, err
	}
	return page, nil
}

// Reindexer answers the provider's sdk.Reindexer when it declared sdk.CapReindex.
func (p *Provider) Reindexer() (sdk.Reindexer, bool) {
	return capability[sdk.Reindexer](p, sdk.CapReindex)
}

// VectorStore answers the provider's sdk.VectorStore when it declared sdk.CapVectors.
func (p *Provider) VectorStore() (sdk.VectorStore, bool) {
	return capability[sdk.VectorStore](p, sdk.CapVectors)
}

// capability answers p's implementation as C when p declared c. This is
// the one place host code turns a provider into a capability interface.
func capability[C any](p *Provider, c sdk.Capability) (C, bool) {
	var zero C
	if !p.Capabilities().Has(c) {
		return zero, false
	}
	v, ok := p.impl.(C)
	if !ok {
		return zero, false
	}
	return v, true
}

// fullProvider is every method a provider can have; a host-side client
// implements it, refusing what its plugin did not declare.
type fullProvider interface {
	declarer
	sdk.Provider
	sdk.RecordWriter
	sdk.RecordGetter
	sdk.RecordForgetter
	sdk.ManifestLister
	sdk.Superseder
	sdk.UsageMarker
	sdk.UsageCounter
	sdk.LedgerWriter
	sdk.Archiver
	sdk.Reindexer
	sdk.VectorStore
}
