package pluginhost

import (
	"fmt"
	"strings"
	"sync"

	hclog "github.com/hashicorp/go-hclog"
)

// maxWarnings is how many of an instance's latest warnings Status keeps
// of each source: the host's about it, and the plugin's own lines.
const maxWarnings = 5

// pluginSaid starts each of the plugin's own lines among the warnings.
const pluginSaid = "plugin said: "

// warnings keeps an instance's latest warning and error lines, so
// /v1/plugins shows what otherwise only the log says: a markdown file
// skipped as broken, say. The host's lines and the plugin's are kept
// apart, so no number of the plugin's lines pushes out what the host
// found (an answer against the protocol), and the plugin's are marked as
// its words: it could write any message.
type warnings struct {
	mu           sync.Mutex
	host, plugin []string
}

func (w *warnings) add(fromPlugin bool, msg string, args []any) {
	var b strings.Builder
	if fromPlugin {
		b.WriteString(pluginSaid)
	}
	b.WriteString(msg)
	for i := 0; i+1 < len(args); i += 2 {
		fmt.Fprintf(&b, " %v=%v", args[i], args[i+1])
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := &w.host
	if fromPlugin {
		lines = &w.plugin
	}
	*lines = append(*lines, b.String())
	if len(*lines) > maxWarnings {
		*lines = (*lines)[len(*lines)-maxWarnings:]
	}
}

// list answers the host's lines, then the plugin's, each oldest first.
func (w *warnings) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append(append([]string(nil), w.host...), w.plugin...)
}

// warnLogger is a logger that also hands its warnings and errors (with
// the arguments it was given and those of With) to w.
type warnLogger struct {
	hclog.Logger
	w          *warnings
	with       []any
	fromPlugin bool // the plugin's own lines
}

func (l warnLogger) Log(level hclog.Level, msg string, args ...any) {
	if level >= hclog.Warn {
		l.w.add(l.fromPlugin, msg, append(append([]any{}, l.with...), args...))
	}
	l.Logger.Log(level, msg, args...)
}

func (l warnLogger) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l warnLogger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l warnLogger) Named(name string) hclog.Logger {
	return warnLogger{Logger: l.Logger.Named(name), w: l.w, with: l.with, fromPlugin: l.fromPlugin}
}

func (l warnLogger) ResetNamed(name string) hclog.Logger {
	return warnLogger{Logger: l.Logger.ResetNamed(name), w: l.w, with: l.with, fromPlugin: l.fromPlugin}
}

func (l warnLogger) With(args ...any) hclog.Logger {
	return warnLogger{Logger: l.Logger.With(args...), w: l.w, with: append(append([]any{}, l.with...), args...), fromPlugin: l.fromPlugin}
}
