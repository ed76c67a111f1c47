package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// Client drives a plugin's provider the way a test wants to: every
// capability method callable, each going through the host's accessor, so
// a call to a capability the plugin did not declare fails with
// sdk.ErrUnsupported without reaching the plugin. Host code holds a
// *host.Provider and asks its accessors instead.
type Client struct{ *host.Provider }

// ClientOf answers the Client of conn's provider.
func ClientOf(conn *host.Conn) (*Client, error) {
	p, err := conn.Provider()
	if err != nil {
		return nil, err
	}
	return &Client{p}, nil
}

func undeclared(c sdk.Capability) error {
	return fmt.Errorf("provider does not declare capability %q: %w", c, sdk.ErrUnsupported)
}

func (c *Client) Remember(ctx context.Context, realm string, records []sdk.Record) ([]string, error) {
	v, ok := c.Writer()
	if !ok {
		return nil, undeclared(sdk.CapWrite)
	}
	return v.Remember(ctx, realm, records)
}

func (c *Client) Get(ctx context.Context, realm string, ids []string) ([]sdk.Record, error) {
	v, ok := c.Getter()
	if !ok {
		return nil, undeclared(sdk.CapFetch)
	}
	return v.Get(ctx, realm, ids)
}

func (c *Client) Forget(ctx context.Context, realm string, ids []string) (int, error) {
	v, ok := c.Forgetter()
	if !ok {
		return 0, undeclared(sdk.CapForget)
	}
	return v.Forget(ctx, realm, ids)
}

func (c *Client) Manifest(ctx context.Context, q sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	v, ok := c.Lister()
	if !ok {
		return nil, undeclared(sdk.CapManifest)
	}
	return v.Manifest(ctx, q)
}

func (c *Client) Supersede(ctx context.Context, realm, oldID string, replacement sdk.Record) (string, error) {
	v, ok := c.Superseder()
	if !ok {
		return "", undeclared(sdk.CapSupersede)
	}
	return v.Supersede(ctx, realm, oldID, replacement)
}

func (c *Client) MarkUsed(ctx context.Context, realm string, ids []string, at time.Time) error {
	v, ok := c.UsageMarker()
	if !ok {
		return undeclared(sdk.CapUsage)
	}
	return v.MarkUsed(ctx, realm, ids, at)
}

func (c *Client) CountUses(ctx context.Context, realm string, uses []sdk.Use, at time.Time) error {
	v, ok := c.UsageCounter()
	if !ok {
		return undeclared(sdk.CapUsageCounts)
	}
	return v.CountUses(ctx, realm, uses, at)
}

func (c *Client) WriteLedger(ctx context.Context, entries []sdk.LedgerEntry) error {
	v, ok := c.Ledger()
	if !ok {
		return undeclared(sdk.CapLedger)
	}
	return v.WriteLedger(ctx, entries)
}

func (c *Client) Export(ctx context.Context, realm, after string, limit int) (sdk.ExportPage, error) {
	v, ok := c.Archiver()
	if !ok {
		return sdk.ExportPage{}, undeclared(sdk.CapArchive)
	}
	return v.Export(ctx, realm, after, limit)
}

func (c *Client) Import(ctx context.Context, realm string, records []sdk.Record) (sdk.ImportResult, error) {
	v, ok := c.Archiver()
	if !ok {
		return sdk.ImportResult{}, undeclared(sdk.CapArchive)
	}
	return v.Import(ctx, realm, records)
}

func (c *Client) PutVectors(ctx context.Context, realm string, vecs []sdk.RecordVector) error {
	v, ok := c.VectorStore()
	if !ok {
		return undeclared(sdk.CapVectors)
	}
	return v.PutVectors(ctx, realm, vecs)
}

func (c *Client) MissingVectors(ctx context.Context, realm, model, after string, limit int) ([]string, error) {
	v, ok := c.VectorStore()
	if !ok {
		return nil, undeclared(sdk.CapVectors)
	}
	return v.MissingVectors(ctx, realm, model, after, limit)
}

func (c *Client) Reindex(ctx context.Context, realm string, progress func(done, total int)) (int, error) {
	v, ok := c.Reindexer()
	if !ok {
		return 0, undeclared(sdk.CapReindex)
	}
	return v.Reindex(ctx, realm, progress)
}
