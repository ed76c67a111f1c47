package pluginhost

import (
	"fmt"
	"strings"
	"sync"

	hclog "github.com/hashicorp/go-hclog"
)

// maxWarnings is how many of an instance's latest warnings Status keeps.
const maxWarnings = 5

// warnings keeps an instance's latest warning and error lines (its
// plugin's and the host's about it), so /v1/plugins shows what otherwise
// only the log says: a markdown file skipped as broken, say.
type warnings struct {
	mu    sync.Mutex
	lines []string
}

func (w *warnings) add(msg string, args []any) {
	var b strings.Builder
	b.WriteString(msg)
	for i := 0; i+1 < len(args); i += 2 {
		fmt.Fprintf(&b, " %v=%v", args[i], args[i+1])
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, b.String())
	if len(w.lines) > maxWarnings {
		w.lines = w.lines[len(w.lines)-maxWarnings:]
	}
}

func (w *warnings) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.lines...)
}

// warnLogger is a logger that also hands its warnings and errors (with
// the arguments it was given and those of With) to w.
type warnLogger struct {
	hclog.Logger
	w    *warnings
	with []any
}

func (l warnLogger) Log(level hclog.Level, msg string, args ...any) {
	if level >= hclog.Warn {
		l.w.add(msg, append(append([]any{}, l.with...), args...))
	}
	l.Logger.Log(level, msg, args...)
}

func (l warnLogger) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l warnLogger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l warnLogger) Named(name string) hclog.Logger {
	return warnLogger{Logger: l.Logger.Named(name), w: l.w, with: l.with}
}

func (l warnLogger) ResetNamed(name string) hclog.Logger {
	return warnLogger{Logger: l.Logger.ResetNamed(name), w: l.w, with: l.with}
}

func (l warnLogger) With(args ...any) hclog.Logger {
	return warnLogger{Logger: l.Logger.With(args...), w: l.w, with: append(append([]any{}, l.with...), args...)}
}
