package sdk

import (
	"context"
	"time"
)

// ContextErr answers ctx.Err(), or context.DeadlineExceeded as soon as
// ctx's deadline is past. ctx.Err() stays nil until the deadline's timer
// runs, which a loaded machine runs late (hundreds of milliseconds have
// been seen), and a write committed in that gap lands after the host
// answered its caller deadline_exceeded. Check it right before a commit.
func ContextErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}
