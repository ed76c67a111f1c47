package coordinatortest

import (
	"context"

	"github.com/memhost/memhost/sdk"
)

// SelectorFunc adapts a function to sdk.Selector.
type SelectorFunc func(ctx context.Context, req sdk.SelectRequest) (sdk.Selection, error)

func (f SelectorFunc) Select(ctx context.Context, req sdk.SelectRequest) (sdk.Selection, error) {
	return f(ctx, req)
}

// MobsFunc adapts a function to sdk.MobResolver.
type MobsFunc func(ctx context.Context, id sdk.Identity) ([]string, error)

func (f MobsFunc) ResolveMobs(ctx context.Context, id sdk.Identity) ([]string, error) {
	return f(ctx, id)
}

// OperatorFunc adapts a function to sdk.OperatorResolver.
type OperatorFunc func(ctx context.Context, id sdk.Identity) (string, error)

func (f OperatorFunc) ResolveOperator(ctx context.Context, id sdk.Identity) (string, error) {
	return f(ctx, id)
}
