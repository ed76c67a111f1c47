package main

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/internal/config"
	"github.com/memhost/memhost/internal/hybrid"
	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/sdk"
	sdkhost "github.com/memhost/memhost/sdk/host"
)

// semanticRecall builds the hybrid recall engine for the realms with an
// embedder and hooks it into the supervised providers' recalls and
// writes; nil when no realm has one. A realm whose provider cannot store
// vectors is said at start and stays lexical.
func semanticRecall(cfg *config.Config, sup *pluginhost.Supervisor, providerOf func(string) (sdk.Provider, error), logger hclog.Logger) (*hybrid.Engine, error) {
	if len(cfg.InstancesOf(sdk.KindEmbedder)) == 0 {
		return nil, nil
	}
	embedders := map[string]sdk.Embedder{}
	for _, in := range cfg.InstancesOf(sdk.KindEmbedder) {
		e, err := sup.Embedder(in.Name)
		if err != nil {
			return nil, err
		}
		embedders[in.Name] = e
	}
	said := map[string]bool{}
	setup := func(realm string) (hybrid.Realm, bool) {
		name, weight := cfg.EmbedderForRealm(realm)
		if name == "" {
			return hybrid.Realm{}, false
		}
		p, err := providerOf(realm)
		if err != nil {
			return hybrid.Realm{}, false
		}
		hp := sdkhost.ProviderOf(p)
		vectors, ok := hp.VectorStore()
		getter, ok2 := hp.Getter()
		if !ok || !ok2 {
			return hybrid.Realm{}, false
		}
		r := hybrid.Realm{Name: realm, Embedder: embedders[name], Vectors: vectors, Records: getter,
			QueryTimeout: cfg.QueryEmbedTimeoutForRealm(realm)}
		if weight != nil {
			r.Fusion = sdk.Fusion{Lexical: 1 - *weight, Semantic: *weight}
		}
		return r, true
	}
	var listed []hybrid.Realm
	for _, rc := range cfg.Realms {
		if rc.Embedder == "" {
			continue
		}
		r, ok := setup(rc.Name)
		if !ok {
			if inst, _ := cfg.ProviderForRealm(rc.Name); !said[inst.Name] {
				said[inst.Name] = true
				logger.Warn("semantic recall is off: the realm's provider does not store vectors (capability \"vectors\"); recall stays lexical",
					"realm", rc.Name, "provider", inst.Name, "embedder", rc.Embedder)
			}
			continue
		}
		listed = append(listed, r)
	}
	eng, err := hybrid.New(listed, hybrid.Options{Logger: logger.Named("semantic"), Unlisted: setup})
	if err != nil {
		return nil, fmt.Errorf("semantic recall: %w", err)
	}
	sup.SetVectorHooks(pluginhost.VectorHooks{PrepareRecall: eng.PrepareRecall, Written: eng.Written, VectorRefused: eng.VectorRefused})
	return eng, nil
}

// runSemantic drains the engine's backlogs until the returned stop is
// called; stop waits for them.
func runSemantic(eng *hybrid.Engine) (stop func()) {
	if eng == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { eng.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}
