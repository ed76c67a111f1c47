package sdk_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// fixedDeadline is a context whose deadline has passed but whose Err is
// still nil, as a context's is until its timer runs.
type fixedDeadline struct {
	context.Context
	at time.Time
}

func (c fixedDeadline) Deadline() (time.Time, bool) { return c.at, true }

func TestContextErr(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"no deadline", context.Background(), nil},
		{"deadline ahead", fixedDeadline{context.Background(), time.Now().Add(time.Hour)}, nil},
		{"deadline past, timer not run", fixedDeadline{context.Background(), time.Now().Add(-time.Millisecond)}, context.DeadlineExceeded},
		{"cancelled", cancelled, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := sdk.ContextErr(tc.ctx); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("ContextErr = %v, want %v", err, tc.want)
			}
		})
	}
}
