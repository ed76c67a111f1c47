package llm

import (
	"context"
	"errors"
	"fmt"

	"github.com/memhost/memhost/plugins/llm/selection"
	"github.com/memhost/memhost/sdk"
)

var _ sdk.Selector = (*Compactor)(nil)

// Select serves the selector kind through the same endpoint and model:
// the prompt, the repair round trip and the filtering of the answer are
// plugins/llm/selection's.
func (c *Compactor) Select(ctx context.Context, req sdk.SelectRequest) (sdk.Selection, error) {
	c.mu.RLock()
	cfg := c.cfg
	c.mu.RUnlock()
	if cfg == nil {
		return sdk.Selection{}, fmt.Errorf("llm selector is not configured: %w", sdk.ErrUnavailable)
	}
	return selection.Select(ctx, c.completer(cfg), cfg.maxRows, req)
}

// completer adapts chat to selection.Completer: an answer without content
// is selection.ErrEmpty, which earns the repair round trip.
func (c *Compactor) completer(cfg *settings) selection.Completer {
	return func(ctx context.Context, messages []selection.Message, maxTokens int) (string, error) {
		msgs := make([]chatMessage, len(messages))
		for i, m := range messages {
			msgs[i] = chatMessage{Role: m.Role, Content: m.Content}
		}
		text, err := c.chat(ctx, cfg, msgs, maxTokens, "")
		if errors.Is(err, ErrEmptyOutput) || errors.Is(err, errNoContent) {
			return "", emptyAnswer{err}
		}
		return text, err
	}
}

// emptyAnswer is chat's error for an answer without text, in chat's
// words alone, which is selection.ErrEmpty too.
type emptyAnswer struct{ error }

func (e emptyAnswer) Unwrap() []error { return []error{e.error, selection.ErrEmpty} }
