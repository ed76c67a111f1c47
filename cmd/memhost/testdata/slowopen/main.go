// Command slowopen is a test-only provider plugin whose store takes
// open_ms milliseconds to open (a migration of a large store at an
// upgrade), logging its progress every second meanwhile, and which
// serves an empty store once open.
package main

import (
	"context"
	"encoding/json"
	"time"

	"github.com/memhost/memhost/sdk"
)

type slowopen struct{}

func (slowopen) Info() sdk.Info {
	return sdk.Info{Name: "slowopen", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindProvider}, Protocols: []int{sdk.ProtocolVersion}}
}

func (slowopen) Configure(ctx context.Context, raw json.RawMessage) error {
	var cfg struct {
		OpenMS int `json:"open_ms"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return err
	}
	total := time.Duration(cfg.OpenMS) * time.Millisecond
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for time.Since(start) < total {
		select {
		case <-ctx.Done():
			sdk.Logger().Warn("migration canceled; it rolls back", "done_ms", time.Since(start).Milliseconds())
			return ctx.Err()
		case <-tick.C:
			sdk.Logger().Info("migrating", "done_ms", time.Since(start).Milliseconds(), "of_ms", total.Milliseconds())
		}
	}
	sdk.Logger().Info("migrated")
	return nil
}

func (slowopen) Recall(context.Context, sdk.RecallQuery) ([]sdk.Hit, error) {
	return []sdk.Hit{}, nil
}

func main() { sdk.Serve(slowopen{}) }
