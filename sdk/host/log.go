package host

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"sync"

	hclog "github.com/hashicorp/go-hclog"
)

// stderrLogger is the logger go-plugin gets. go-plugin names the plugin's
// stderr lines after the executable file; the host wants them under the
// name it launched the plugin as (the instance), so naming is a no-op.
type stderrLogger struct{ hclog.Logger }

func (l stderrLogger) Named(string) hclog.Logger { return l }

// levelName is the level a plugin should log at: the host's.
func levelName(l hclog.Logger) string {
	if lv := l.GetLevel(); lv != hclog.NoLevel {
		return lv.String()
	}
	return "info"
}

// lineLogger logs what a plugin wrote to os.Stderr after Serve swapped it
// (go-plugin forwards those bytes over its stdio stream): a JSON line in
// hclog's shape at its own level, any other line at info.
type lineLogger struct {
	mu  sync.Mutex
	log hclog.Logger
	buf []byte
}

func (w *lineLogger) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.logLine(bytes.TrimRight(w.buf[:i], "\r"))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

func (w *lineLogger) logLine(line []byte) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	var entry map[string]any
	if json.Unmarshal(line, &entry) == nil {
		msg, _ := entry["@message"].(string)
		lv, _ := entry["@level"].(string)
		if level := hclog.LevelFromString(lv); msg != "" && level != hclog.NoLevel {
			delete(entry, "@message")
			delete(entry, "@level")
			delete(entry, "@timestamp")
			delete(entry, "@module")
			args := make([]any, 0, 2*len(entry))
			for _, k := range slices.Sorted(maps.Keys(entry)) {
				args = append(args, k, entry[k])
			}
			w.log.Log(level, msg, args...)
			return
		}
	}
	w.log.Info(string(line))
}
