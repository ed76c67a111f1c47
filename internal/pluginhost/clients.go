package pluginhost

import (
	"context"
	"fmt"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// The types below are what the rest of the host holds: stable values that
// implement the sdk interfaces and route each call to whichever process is
// live, restarting it when it died. A provider implements exactly the
// capability interfaces its plugin declared in Info (host.Narrow), so a
// type assertion or sdk.Supports on it answers truthfully.

// Compile-time checks that each supervised type is its kind's interface.
var (
	_ host.FullProvider    = (*Provider)(nil)
	_ sdk.Selector         = (*Selector)(nil)
	_ sdk.Compactor        = (*Compactor)(nil)
	_ sdk.OperatorResolver = (*OperatorResolver)(nil)
	_ sdk.MobResolver      = (*MobResolver)(nil)
)

// Provider returns the supervised provider instance name, implementing
// the capability interfaces the plugin declared.
func (s *Supervisor) Provider(name string) (sdk.Provider, error) {
	inst, err := s.lookup(sdk.KindProvider, name)
	if err != nil {
		return nil, err
	}
	p := &Provider{inst: inst}
	if s.opts.ObserveCall != nil {
		return host.Narrow(observed{p, name, s.opts.ObserveCall}, p.Capabilities()), nil
	}
	return host.Narrow(p, p.Capabilities()), nil
}

// Selector returns the supervised selector instance name.
func (s *Supervisor) Selector(name string) (*Selector, error) {
	inst, err := s.lookup(sdk.KindSelector, name)
	if err != nil {
		return nil, err
	}
	return &Selector{inst: inst}, nil
}

// Compactor returns the supervised compactor instance name.
func (s *Supervisor) Compactor(name string) (*Compactor, error) {
	inst, err := s.lookup(sdk.KindCompactor, name)
	if err != nil {
		return nil, err
	}
	return &Compactor{inst: inst}, nil
}

// OperatorResolver returns the supervised operator resolver instance name.
func (s *Supervisor) OperatorResolver(name string) (*OperatorResolver, error) {
	inst, err := s.lookup(sdk.KindOperatorResolver, name)
	if err != nil {
		return nil, err
	}
	return &OperatorResolver{inst: inst}, nil
}

// MobResolver returns the supervised mob resolver instance name.
func (s *Supervisor) MobResolver(name string) (*MobResolver, error) {
	inst, err := s.lookup(sdk.KindMobResolver, name)
	if err != nil {
		return nil, err
	}
	return &MobResolver{inst: inst}, nil
}

// Provider is a supervised provider plugin, with every capability method;
// Supervisor.Provider hands it out narrowed to the declared ones.
type Provider struct{ inst *instance }

// Capabilities answers what the plugin declared in Info.
func (p *Provider) Capabilities() sdk.Capabilities { return p.inst.capabilities() }

// Name is the configured instance name.
func (p *Provider) Name() string { return p.inst.spec.Name }

// capability answers the live client as the capability interface C.
func capability[C any](c sdk.Provider, cap sdk.Capability) (C, error) {
	v, ok := c.(C)
	if !ok {
		return v, fmt.Errorf("provider does not declare capability %q: %w", cap, sdk.ErrUnsupported)
	}
	return v, nil
}

func (p *Provider) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	return call(ctx, p.inst, true, func(ctx context.Context, c sdk.Provider) ([]sdk.Hit, error) {
		return c.Recall(ctx, q)
	})
}

// Remember is retried once when the plugin died under it: writes are
// idempotent by content hash, so the client gets the id of a record that
// may already have been stored rather than an error.
func (p *Provider) Remember(ctx context.Context, realm string, records []sdk.Record) ([]string, error) {
	return call(ctx, p.inst, true, func(ctx context.Context, c sdk.Provider) ([]string, error) {
		w, err := capability[sdk.RecordWriter](c, sdk.CapWrite)
		if err != nil {
			return nil, err
		}
		return w.Remember(ctx, realm, records)
	})
}

func (p *Provider) Get(ctx context.Context, realm string, ids []string) ([]sdk.Record, error) {
	return call(ctx, p.inst, true, func(ctx context.Context, c sdk.Provider) ([]sdk.Record, error) {
		g, err := capability[sdk.RecordGetter](c, sdk.CapFetch)
		if err != nil {
			return nil, err
		}
		return g.Get(ctx, realm, ids)
	})
}

// Forget is retried like Remember: forgetting an id twice is harmless.
func (p *Provider) Forget(ctx context.Context, realm string, ids []string) (int, error) {
	return call(ctx, p.inst, true, func(ctx context.Context, c sdk.Provider) (int, error) {
		f, err := capability[sdk.RecordForgetter](c, sdk.CapForget)
		if err != nil {
			return 0, err
		}
		return f.Forget(ctx, realm, ids)
	})
}

func (p *Provider) Manifest(ctx context.Context, q sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	return call(ctx, p.inst, true, func(ctx context.Context, c sdk.Provider) ([]sdk.ManifestRow, error) {
		m, err := capability[sdk.ManifestLister](c, sdk.CapManifest)
		if err != nil {
			return nil, err
		}
		return m.Manifest(ctx, q)
	})
}

func (p *Provider) Supersede(ctx context.Context, realm, oldID string, replacement sdk.Record) (string, error) {
	return call(ctx, p.inst, false, func(ctx context.Context, c sdk.Provider) (string, error) {
		s, err := capability[sdk.Superseder](c, sdk.CapSupersede)
		if err != nil {
			return "", err
		}
		return s.Supersede(ctx, realm, oldID, replacement)
	})
}

func (p *Provider) MarkUsed(ctx context.Context, realm string, ids []string, at time.Time) error {
	_, err := call(ctx, p.inst, false, func(ctx context.Context, c sdk.Provider) (struct{}, error) {
		u, err := capability[sdk.UsageMarker](c, sdk.CapUsage)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, u.MarkUsed(ctx, realm, ids, at)
	})
	return err
}

func (p *Provider) WriteLedger(ctx context.Context, entries []sdk.LedgerEntry) error {
	_, err := call(ctx, p.inst, false, func(ctx context.Context, c sdk.Provider) (struct{}, error) {
		l, err := capability[sdk.LedgerWriter](c, sdk.CapLedger)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, l.WriteLedger(ctx, entries)
	})
	return err
}

func (p *Provider) Export(ctx context.Context, realm, after string, limit int) (sdk.ExportPage, error) {
	return call(ctx, p.inst, true, func(ctx context.Context, c sdk.Provider) (sdk.ExportPage, error) {
		a, err := capability[sdk.Archiver](c, sdk.CapArchive)
		if err != nil {
			return sdk.ExportPage{}, err
		}
		return a.Export(ctx, realm, after, limit)
	})
}

// Import is not retried by the supervisor; it is idempotent, so the caller
// may repeat it.
func (p *Provider) Import(ctx context.Context, realm string, records []sdk.Record) (sdk.ImportResult, error) {
	return call(ctx, p.inst, false, func(ctx context.Context, c sdk.Provider) (sdk.ImportResult, error) {
		a, err := capability[sdk.Archiver](c, sdk.CapArchive)
		if err != nil {
			return sdk.ImportResult{}, err
		}
		return a.Import(ctx, realm, records)
	})
}

// Reindex runs under the reindex timeout, not the call timeout: a rebuild
// of a large store outlasts any ordinary call. It is not retried when the
// plugin died under it; a restarted plugin rebuilt or reloaded its index
// on open, and the caller may ask again.
func (p *Provider) Reindex(ctx context.Context, realm string, progress func(done, total int)) (int, error) {
	return callWithin(ctx, p.inst, p.inst.opts.ReindexTimeout, false, func(ctx context.Context, c sdk.Provider) (int, error) {
		r, err := capability[sdk.Reindexer](c, sdk.CapReindex)
		if err != nil {
			return 0, err
		}
		return r.Reindex(ctx, realm, progress)
	})
}

// Selector is a supervised selector plugin.
type Selector struct{ inst *instance }

func (s *Selector) Select(ctx context.Context, req sdk.SelectRequest) (sel sdk.Selection, err error) {
	defer func(start time.Time) { s.inst.observe("select", start, err) }(time.Now())
	return call(ctx, s.inst, true, func(ctx context.Context, c sdk.Selector) (sdk.Selection, error) {
		return c.Select(ctx, req)
	})
}

// Compactor is a supervised compactor plugin. Compaction is not retried by
// the supervisor: the host's watermark logic decides.
type Compactor struct{ inst *instance }

func (c *Compactor) Compact(ctx context.Context, req sdk.CompactRequest) (msg sdk.Message, err error) {
	defer func(start time.Time) { c.inst.observe("compact", start, err) }(time.Now())
	return call(ctx, c.inst, false, func(ctx context.Context, cl sdk.Compactor) (sdk.Message, error) {
		return cl.Compact(ctx, req)
	})
}

// OperatorResolver is a supervised operator resolver plugin.
type OperatorResolver struct{ inst *instance }

func (r *OperatorResolver) ResolveOperator(ctx context.Context, id sdk.Identity) (op string, err error) {
	defer func(start time.Time) { r.inst.observe("resolve_operator", start, err) }(time.Now())
	return call(ctx, r.inst, true, func(ctx context.Context, c sdk.OperatorResolver) (string, error) {
		return c.ResolveOperator(ctx, id)
	})
}

// MobResolver is a supervised mob resolver plugin.
type MobResolver struct{ inst *instance }

func (r *MobResolver) ResolveMobs(ctx context.Context, id sdk.Identity) (mobs []string, err error) {
	defer func(start time.Time) { r.inst.observe("resolve_mobs", start, err) }(time.Now())
	return call(ctx, r.inst, true, func(ctx context.Context, c sdk.MobResolver) ([]string, error) {
		return c.ResolveMobs(ctx, id)
	})
}
