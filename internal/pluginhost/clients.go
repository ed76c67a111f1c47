package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// The types below are what the rest of the host holds: stable values that
// implement the sdk interfaces and route each call to whichever process is
// live, restarting it when it died. A provider is handed out as a
// *host.Provider, whose accessors answer the capabilities its plugin
// declared in Info; every call of every kind is observed in callWithin.

// Compile-time checks that each supervised type is its kind's interface.
var (
	_ sdk.Selector         = (*Selector)(nil)
	_ sdk.Compactor        = (*Compactor)(nil)
	_ sdk.OperatorResolver = (*OperatorResolver)(nil)
	_ sdk.MobResolver      = (*MobResolver)(nil)
	_ sdk.Embedder         = (*Embedder)(nil)
)

// Provider returns the supervised provider instance name. Its accessors
// answer what the live plugin declared, asked at each access, so a
// restarted plugin's declaration is the one that counts.
func (s *Supervisor) Provider(name string) (*host.Provider, error) {
	inst, err := s.lookup(sdk.KindProvider, name)
	if err != nil {
		return nil, err
	}
	return host.ProviderOf(&provider{inst: inst, vectors: &s.vectors}), nil
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

// Embedder returns the supervised embedder instance name.
func (s *Supervisor) Embedder(name string) (*Embedder, error) {
	inst, err := s.lookup(sdk.KindEmbedder, name)
	if err != nil {
		return nil, err
	}
	return &Embedder{inst: inst}, nil
}

// provider is a supervised provider plugin with every capability method;
// Supervisor.Provider hands it out behind a *host.Provider. Each method
// asks the live plugin's own handle for the capability, so a call to one
// the plugin did not declare fails with sdk.ErrUnsupported.
type provider struct {
	inst    *instance
	vectors *atomic.Pointer[VectorHooks]
}

// vectorHooks answers the installed hooks when the plugin stores vectors.
func (p *provider) vectorHooks() *VectorHooks {
	if p.vectors == nil {
		return nil
	}
	if h := p.vectors.Load(); h != nil && p.Capabilities().Has(sdk.CapVectors) {
		return h
	}
	return nil
}

// written tells the hooks of an acknowledged write in realm.
func (p *provider) written(realm string, err error) {
	if h := p.vectorHooks(); h != nil && h.Written != nil && err == nil {
		h.Written(realm)
	}
}

// Capabilities answers what the plugin declared in Info.
func (p *provider) Capabilities() sdk.Capabilities { return p.inst.capabilities() }

// capabilityCall runs f on the live plugin's capability C, which get
// answers when the plugin declared cap, under call's rules.
func capabilityCall[C, T any](ctx context.Context, p *provider, method string, retry bool, cap sdk.Capability, get func(*host.Provider) (C, bool), f func(context.Context, C) (T, error)) (T, error) {
	return callWithin(ctx, p.inst, method, p.inst.opts.CallTimeout, retry, func(ctx context.Context, c *host.Provider) (T, error) {
		v, ok := get(c)
		if !ok {
			var zero T
			return zero, fmt.Errorf("provider does not declare capability %q: %w", cap, sdk.ErrUnsupported)
		}
		return f(ctx, v)
	})
}

// Recall first lets the recall preparer add the query's embedding when
// the plugin stores vectors, unless ctx asks for lexical recall only.
func (p *provider) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	h := p.vectorHooks()
	added := false
	if h != nil && h.PrepareRecall != nil && ctx.Value(lexicalOnlyKey{}) == nil && q.QueryVector == nil {
		h.PrepareRecall(ctx, &q)
		added = q.QueryVector != nil
	}
	recall := func(ctx context.Context, c *host.Provider) ([]sdk.Hit, error) { return c.Recall(ctx, q) }
	hits, err := call(ctx, p.inst, "recall", true, recall)
	if added && errors.Is(err, sdk.ErrInvalid) {
		// The provider refused the vector the host added, not the query
		// its caller sent (vectors of another length stored under the
		// model's id, say): the caller gets the lexical recall it asked
		// for, and the refusal is counted as a fallback.
		if h.VectorRefused != nil {
			h.VectorRefused(q.Realm, err)
		}
		q.QueryVector, q.VectorModel, q.Fusion = nil, "", sdk.Fusion{}
		return call(ctx, p.inst, "recall", true, recall)
	}
	return hits, err
}

// Remember is retried once when the plugin died under it: writes are
// idempotent by content hash, so the client gets the id of a record that
// may already have been stored rather than an error.
func (p *provider) Remember(ctx context.Context, realm string, records []sdk.Record) ([]string, error) {
	ids, err := capabilityCall(ctx, p, "remember", true, sdk.CapWrite, (*host.Provider).Writer, func(ctx context.Context, w sdk.RecordWriter) ([]string, error) {
		return w.Remember(ctx, realm, records)
	})
	p.written(realm, err)
	return ids, err
}

func (p *provider) Get(ctx context.Context, realm string, ids []string) ([]sdk.Record, error) {
	return capabilityCall(ctx, p, "get", true, sdk.CapFetch, (*host.Provider).Getter, func(ctx context.Context, v sdk.RecordGetter) ([]sdk.Record, error) {
		return v.Get(ctx, realm, ids)
	})
}

// Forget is retried like Remember: forgetting an id twice is harmless.
func (p *provider) Forget(ctx context.Context, realm string, ids []string) (int, error) {
	return capabilityCall(ctx, p, "forget", true, sdk.CapForget, (*host.Provider).Forgetter, func(ctx context.Context, v sdk.RecordForgetter) (int, error) {
		return v.Forget(ctx, realm, ids)
	})
}

func (p *provider) Manifest(ctx context.Context, q sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	return capabilityCall(ctx, p, "manifest", true, sdk.CapManifest, (*host.Provider).Lister, func(ctx context.Context, v sdk.ManifestLister) ([]sdk.ManifestRow, error) {
		return v.Manifest(ctx, q)
	})
}

func (p *provider) Supersede(ctx context.Context, realm, oldID string, replacement sdk.Record) (string, error) {
	id, err := capabilityCall(ctx, p, "supersede", false, sdk.CapSupersede, (*host.Provider).Superseder, func(ctx context.Context, v sdk.Superseder) (string, error) {
		return v.Supersede(ctx, realm, oldID, replacement)
	})
	p.written(realm, err)
	return id, err
}

func (p *provider) Export(ctx context.Context, realm, after string, limit int) (sdk.ExportPage, error) {
	return capabilityCall(ctx, p, "export", true, sdk.CapArchive, (*host.Provider).Archiver, func(ctx context.Context, v sdk.Archiver) (sdk.ExportPage, error) {
		return v.Export(ctx, realm, after, limit)
	})
}

// Import is not retried by the supervisor; it is idempotent, so the caller
// may repeat it.
func (p *provider) Import(ctx context.Context, realm string, records []sdk.Record) (sdk.ImportResult, error) {
	res, err := capabilityCall(ctx, p, "import", false, sdk.CapArchive, (*host.Provider).Archiver, func(ctx context.Context, v sdk.Archiver) (sdk.ImportResult, error) {
		return v.Import(ctx, realm, records)
	})
	p.written(realm, err)
	return res, err
}

// PutVectors is retried: storing the same vectors again is harmless.
func (p *provider) PutVectors(ctx context.Context, realm string, vecs []sdk.RecordVector) error {
	_, err := capabilityCall(ctx, p, "put_vectors", true, sdk.CapVectors, (*host.Provider).VectorStore, func(ctx context.Context, v sdk.VectorStore) (struct{}, error) {
		return struct{}{}, v.PutVectors(ctx, realm, vecs)
	})
	return err
}

func (p *provider) MissingVectors(ctx context.Context, realm, model, after string, limit int) ([]string, error) {
	return capabilityCall(ctx, p, "missing_vectors", true, sdk.CapVectors, (*host.Provider).VectorStore, func(ctx context.Context, v sdk.VectorStore) ([]string, error) {
		return v.MissingVectors(ctx, realm, model, after, limit)
	})
}

func (p *provider) MarkUsed(ctx context.Context, realm string, ids []string, at time.Time) error {
	_, err := capabilityCall(ctx, p, "mark_used", false, sdk.CapUsage, (*host.Provider).UsageMarker, func(ctx context.Context, u sdk.UsageMarker) (struct{}, error) {
		return struct{}{}, u.MarkUsed(ctx, realm, ids, at)
	})
	return err
}

func (p *provider) CountUses(ctx context.Context, realm string, uses []sdk.Use, at time.Time) error {
	_, err := capabilityCall(ctx, p, "count_uses", false, sdk.CapUsageCounts, (*host.Provider).UsageCounter, func(ctx context.Context, u sdk.UsageCounter) (struct{}, error) {
		return struct{}{}, u.CountUses(ctx, realm, uses, at)
	})
	return err
}

func (p *provider) WriteLedger(ctx context.Context, entries []sdk.LedgerEntry) error {
	_, err := capabilityCall(ctx, p, "write_ledger", false, sdk.CapLedger, (*host.Provider).Ledger, func(ctx context.Context, l sdk.LedgerWriter) (struct{}, error) {
		return struct{}{}, l.WriteLedger(ctx, entries)
	})
	return err
}

// Reindex runs under the reindex timeout, not the call timeout: a rebuild
// of a large store outlasts any ordinary call. It is not retried when the
// plugin died under it; a restarted plugin rebuilt or reloaded its index
// on open, and the caller may ask again.
func (p *provider) Reindex(ctx context.Context, realm string, progress func(done, total int)) (int, error) {
	return callWithin(ctx, p.inst, "reindex", p.inst.opts.ReindexTimeout, false, func(ctx context.Context, c *host.Provider) (int, error) {
		r, ok := c.Reindexer()
		if !ok {
			return 0, fmt.Errorf("provider does not declare capability %q: %w", sdk.CapReindex, sdk.ErrUnsupported)
		}
		return r.Reindex(ctx, realm, progress)
	})
}

// Selector is a supervised selector plugin.
type Selector struct{ inst *instance }

func (s *Selector) Select(ctx context.Context, req sdk.SelectRequest) (sdk.Selection, error) {
	return call(ctx, s.inst, "select", true, func(ctx context.Context, c sdk.Selector) (sdk.Selection, error) {
		return c.Select(ctx, req)
	})
}

// Compactor is a supervised compactor plugin. Compaction is not retried by
// the supervisor: the host's watermark logic decides.
type Compactor struct{ inst *instance }

// Compact runs under the caller's deadline (its compaction request's) when
// it has one, not the call timeout: a model writing a summary takes longer
// than an ordinary call, and the compactor's own timeout bounds it too.
func (c *Compactor) Compact(ctx context.Context, req sdk.CompactRequest) (sdk.Message, error) {
	timeout := c.inst.opts.CallTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = max(timeout, time.Until(deadline).Round(time.Second))
	}
	return callWithin(ctx, c.inst, "compact", timeout, false, func(ctx context.Context, cl sdk.Compactor) (sdk.Message, error) {
		return cl.Compact(ctx, req)
	})
}

// OperatorResolver is a supervised operator resolver plugin.
type OperatorResolver struct{ inst *instance }

func (r *OperatorResolver) ResolveOperator(ctx context.Context, id sdk.Identity) (string, error) {
	return call(ctx, r.inst, "resolve_operator", true, func(ctx context.Context, c sdk.OperatorResolver) (string, error) {
		return c.ResolveOperator(ctx, id)
	})
}

// MobResolver is a supervised mob resolver plugin.
type MobResolver struct{ inst *instance }

func (r *MobResolver) ResolveMobs(ctx context.Context, id sdk.Identity) ([]string, error) {
	return call(ctx, r.inst, "resolve_mobs", true, func(ctx context.Context, c sdk.MobResolver) ([]string, error) {
		return c.ResolveMobs(ctx, id)
	})
}

// Embedder is a supervised embedder plugin. Its calls are retried when the
// plugin died under them: embedding a text twice has no side effect.
type Embedder struct {
	inst *instance
	mu   sync.Mutex
	// client is the process model was read from: a restarted plugin may
	// make another model.
	client sdk.Embedder
	model  string
}

func (e *Embedder) EmbedderInfo(ctx context.Context) (sdk.EmbedderInfo, error) {
	return call(ctx, e.inst, "embedder_info", true, func(ctx context.Context, c sdk.Embedder) (sdk.EmbedderInfo, error) {
		return c.EmbedderInfo(ctx)
	})
}

func (e *Embedder) Embed(ctx context.Context, req sdk.EmbedRequest) ([][]float32, error) {
	return callWithin(ctx, e.inst, "embed", e.timeout(ctx), true, func(ctx context.Context, c sdk.Embedder) ([][]float32, error) {
		return c.Embed(ctx, req)
	})
}

// EmbedModel is Embed that also answers the model id the answering
// process declares: one restarted with another model between a caller's
// EmbedderInfo and its Embed answers under its own id, so its vectors are
// never stored or compared under the id read before the restart.
func (e *Embedder) EmbedModel(ctx context.Context, req sdk.EmbedRequest) ([][]float32, string, error) {
	type answer struct {
		vecs  [][]float32
		model string
	}
	a, err := callWithin(ctx, e.inst, "embed", e.timeout(ctx), true, func(ctx context.Context, c sdk.Embedder) (answer, error) {
		model, err := e.modelOf(ctx, c)
		if err != nil {
			return answer{}, err
		}
		vecs, err := c.Embed(ctx, req)
		return answer{vecs, model}, err
	})
	return a.vecs, a.model, err
}

// timeout is an embed call's bound: its caller's deadline when it has one
// (a recall's query budget, a backlog step's 30 s), else the call
// timeout. A backlog page sent to a remote endpoint (a CPU-served model,
// a queueing gateway) may take longer than an ordinary plugin call, and
// under the 10 s call timeout a page such an endpoint embeds in 12 s
// failed every step, however long the plugin's own request timeout.
func (e *Embedder) timeout(ctx context.Context) time.Duration {
	timeout := e.inst.opts.CallTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = max(timeout, time.Until(deadline).Round(time.Second))
	}
	return timeout
}

// modelOf answers the model id process c declares, asking it once.
func (e *Embedder) modelOf(ctx context.Context, c sdk.Embedder) (string, error) {
	e.mu.Lock()
	if e.client == c {
		defer e.mu.Unlock()
		return e.model, nil
	}
	e.mu.Unlock()
	info, err := c.EmbedderInfo(ctx)
	if err != nil {
		return "", err
	}
	e.mu.Lock()
	e.client, e.model = c, info.Model
	e.mu.Unlock()
	return info.Model, nil
}
