//go:build !linux

package markdown

import "errors"

// watcher is Linux-only (inotify); elsewhere the store polls, sweeping the
// tree at most every options.poll.
type watcher struct{}

func newWatcher(string) (*watcher, error) {
	return nil, errors.New("no file watcher on this platform")
}

func (*watcher) add(string, string) error { return nil }
func (*watcher) drain(*work) error        { return nil }
func (*watcher) close()                   {}
