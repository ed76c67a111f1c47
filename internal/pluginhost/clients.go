package pluginhost

import (
	"context"
	"time"

	"github.com/memhost/memhost/sdk"
)

// The types below are what the rest of the host holds: stable values that
// implement the sdk interfaces and route each call to whichever process is
// live, restarting it when it died. Capabilities are the ones the plugin
// declared in Info, so sdk.Supports works on them as on any provider.

// Provider returns the supervised provider instance name.
func (s *Supervisor) Provider(name string) (*Provider, error) {
	inst, err := s.lookup(sdk.KindProvider, name)
	if err != nil {
		return nil, err
	}
	return &Provider{inst: inst}, nil
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

// Provider is a supervised provider plugin.
type Provider struct{ inst *instance }

// Capabilities answers what the plugin declared in Info.
func (p *Provider) Capabilities() sdk.Capabilities { return p.inst.capabilities() }

// Name is the configured instance name.
func (p *Provider) Name() string { return p.inst.spec.Name }

func (p *Provider) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	return call(ctx, p.inst, true, func(ctx context.Context, c *sdk.ProviderClient) ([]sdk.Hit, error) {
		return c.Recall(ctx, q)
	})
}

func (p *Provider) Remember(ctx context.Context, realm string, records []sdk.Record) ([]string, error) {
	return call(ctx, p.inst, false, func(ctx context.Context, c *sdk.ProviderClient) ([]string, error) {
		return c.Remember(ctx, realm, records)
	})
}

func (p *Provider) Get(ctx context.Context, realm string, ids []string) ([]sdk.Record, error) {
	return call(ctx, p.inst, true, func(ctx context.Context, c *sdk.ProviderClient) ([]sdk.Record, error) {
		return c.Get(ctx, realm, ids)
	})
}

func (p *Provider) Forget(ctx context.Context, realm string, ids []string) (int, error) {
	return call(ctx, p.inst, false, func(ctx context.Context, c *sdk.ProviderClient) (int, error) {
		return c.Forget(ctx, realm, ids)
	})
}

func (p *Provider) Manifest(ctx context.Context, q sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	return call(ctx, p.inst, true, func(ctx context.Context, c *sdk.ProviderClient) ([]sdk.ManifestRow, error) {
		return c.Manifest(ctx, q)
	})
}

func (p *Provider) Supersede(ctx context.Context, realm, oldID string, replacement sdk.Record) (string, error) {
	return call(ctx, p.inst, false, func(ctx context.Context, c *sdk.ProviderClient) (string, error) {
		return c.Supersede(ctx, realm, oldID, replacement)
	})
}

func (p *Provider) MarkUsed(ctx context.Context, realm string, ids []string, at time.Time) error {
	_, err := call(ctx, p.inst, false, func(ctx context.Context, c *sdk.ProviderClient) (struct{}, error) {
		return struct{}{}, c.MarkUsed(ctx, realm, ids, at)
	})
	return err
}

func (p *Provider) WriteLedger(ctx context.Context, entries []sdk.LedgerEntry) error {
	_, err := call(ctx, p.inst, false, func(ctx context.Context, c *sdk.ProviderClient) (struct{}, error) {
		return struct{}{}, c.WriteLedger(ctx, entries)
	})
	return err
}

// Selector is a supervised selector plugin.
type Selector struct{ inst *instance }

func (s *Selector) Select(ctx context.Context, req sdk.SelectRequest) (sdk.Selection, error) {
	return call(ctx, s.inst, true, func(ctx context.Context, c *sdk.SelectorClient) (sdk.Selection, error) {
		return c.Select(ctx, req)
	})
}

// Compactor is a supervised compactor plugin. Compaction is not retried by
// the supervisor: the host's watermark logic decides.
type Compactor struct{ inst *instance }

func (c *Compactor) Compact(ctx context.Context, req sdk.CompactRequest) (sdk.Message, error) {
	return call(ctx, c.inst, false, func(ctx context.Context, cl *sdk.CompactorClient) (sdk.Message, error) {
		return cl.Compact(ctx, req)
	})
}

// OperatorResolver is a supervised operator resolver plugin.
type OperatorResolver struct{ inst *instance }

func (r *OperatorResolver) ResolveOperator(ctx context.Context, id sdk.Identity) (string, error) {
	return call(ctx, r.inst, true, func(ctx context.Context, c *sdk.OperatorResolverClient) (string, error) {
		return c.ResolveOperator(ctx, id)
	})
}

// MobResolver is a supervised mob resolver plugin.
type MobResolver struct{ inst *instance }

func (r *MobResolver) ResolveMobs(ctx context.Context, id sdk.Identity) ([]string, error) {
	return call(ctx, r.inst, true, func(ctx context.Context, c *sdk.MobResolverClient) ([]string, error) {
		return c.ResolveMobs(ctx, id)
	})
}
