package coordinator

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/memhost/memhost/coordinator/lru"
	"github.com/memhost/memhost/sdk"
)

// resolverCacheSize bounds the identities whose resolver answers are kept.
const resolverCacheSize = 4096

// cachedAnswer is one resolver answer and when it stops being used.
type cachedAnswer[T any] struct {
	v       T
	expires time.Time
}

// answerCache keeps resolver answers per identity for a short time: every
// turn and build composes scopes, and without it each would wait on one or
// two plugin round trips. Only successes are kept; an error is asked again
// on the next call. Bindings edited in the resolver's backing store are
// seen once the entry expires.
type answerCache[T any] struct {
	ttl     time.Duration
	now     func() time.Time
	resolve func(context.Context, sdk.Identity) (T, error)
	clone   func(T) T

	mu    sync.Mutex
	items *lru.Cache[sdk.Identity, cachedAnswer[T]]
}

func newAnswerCache[T any](ttl time.Duration, now func() time.Time, clone func(T) T, resolve func(context.Context, sdk.Identity) (T, error)) *answerCache[T] {
	return &answerCache[T]{ttl: ttl, now: now, resolve: resolve, clone: clone, items: lru.New[sdk.Identity, cachedAnswer[T]](resolverCacheSize)}
}

func (c *answerCache[T]) get(ctx context.Context, id sdk.Identity) (T, error) {
	if c.ttl <= 0 {
		return c.resolve(ctx, id)
	}
	now := c.now()
	c.mu.Lock()
	hit, ok := c.items.Get(id)
	c.mu.Unlock()
	if ok && now.Before(hit.expires) {
		return c.clone(hit.v), nil
	}
	v, err := c.resolve(ctx, id)
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	c.items.Add(id, cachedAnswer[T]{v: c.clone(v), expires: now.Add(c.ttl)})
	c.mu.Unlock()
	return v, nil
}

// cachedMobs is a mob resolver answering from an answerCache.
type cachedMobs struct{ c *answerCache[[]string] }

func (m cachedMobs) ResolveMobs(ctx context.Context, id sdk.Identity) ([]string, error) {
	return m.c.get(ctx, id)
}

// cachedOperator is an operator resolver answering from an answerCache.
type cachedOperator struct{ c *answerCache[string] }

func (o cachedOperator) ResolveOperator(ctx context.Context, id sdk.Identity) (string, error) {
	return o.c.get(ctx, id)
}

// cacheResolvers wraps the configured resolvers in answer caches.
func cacheResolvers(ttl time.Duration, now func() time.Time, mobs sdk.MobResolver, ops sdk.OperatorResolver) (sdk.MobResolver, sdk.OperatorResolver) {
	if ttl <= 0 {
		return mobs, ops
	}
	if mobs != nil {
		mobs = cachedMobs{newAnswerCache(ttl, now, slices.Clone[[]string], mobs.ResolveMobs)}
	}
	if ops != nil {
		ops = cachedOperator{newAnswerCache(ttl, now, func(s string) string { return s }, ops.ResolveOperator)}
	}
	return mobs, ops
}
