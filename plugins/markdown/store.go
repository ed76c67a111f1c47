package markdown

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/filelock"
)

// store is one configured root: the files, the index over them and the
// machinery that keeps the two in step.
//
// Locks, always taken in this order:
//   - refreshMu serializes draining watcher events (refresh);
//   - sweepMu serializes full sweeps (taken under refreshMu only when
//     events were lost);
//   - snapMu serializes snapshots (taken before mu);
//   - mu serializes every change of files or index (writes, apply,
//     reindex) and the snapshot's copy of the index;
//   - idx guards the index itself: readers share it, changes hold it
//     briefly. A holder of mu may read the index without idx.
type store struct {
	root string
	lock *filelock.Lock // the root's lock, held until close
	log  *slog.Logger
	opts options

	refreshMu sync.Mutex
	sweepMu   sync.Mutex
	mu        sync.Mutex
	idx       sync.RWMutex

	// foldsCase: the root's file system takes names differing only in
	// case as one, so a write checks its directory against its siblings
	// (caseClash). caseNames holds, by directory relative to the root
	// ("" for the root), the entries listed or made in it, lower case to
	// exact name; guarded by mu.
	foldsCase bool
	caseNames map[string]map[string]string

	realms map[string]*realmIndex // guarded by idx
	bad    map[string]fileStamp   // rel path → stamp of a file known invalid; guarded by idx
	warned map[string]fileStamp   // rel path → stamp last warned about; guarded by mu

	linkMu      sync.Mutex
	linksWarned map[string]fileStamp // rel path of a skipped symlink → its stamp when warned of

	watch      atomic.Pointer[watcher] // nil: poll instead
	watchBroke atomic.Bool             // a watch could not be added: fall back to polling

	pendMu  sync.Mutex
	pending work     // files and subtrees to look at on the next refresh
	goneBad []string // bad files seen gone, dropped from bad on the next apply

	lastSweep atomic.Int64 // opts.now() at the start of the last full sweep, ns
	sweepCost atomic.Int64 // how long the last full sweep took, ns
	active    atomic.Bool  // a call arrived since the last background sweep

	// The index snapshot (snapshot.go): snapPath is "" when off. changes
	// counts index changes and lastChange is when the last one was
	// (wall clock, ns); snapGen is the count the snapshot file holds,
	// guarded by snapMu.
	snapPath     string
	loads        atomic.Int64 // record files read, for tests
	changes      atomic.Uint64
	lastChange   atomic.Int64
	snapMu       sync.Mutex
	snapGen      uint64
	fromSnapshot bool

	reindexing chan struct{} // holds one token while a reindex runs

	vecFiles map[string]*vecFile // by realm (vectors.go); guarded by mu

	stop chan struct{}
	done chan struct{}
}

// options are the knobs of a store; tests shorten or freeze them.
type options struct {
	now func() time.Time
	// poll bounds how stale the index may be without a watcher: a call
	// finding the last full sweep older than this sweeps first.
	poll time.Duration
	// safety is how often a full sweep runs even with a watcher, to catch
	// what no event reports (edits made on another host of a network
	// file system).
	safety     time.Duration
	watch      bool // use the platform's file watcher when there is one
	background bool // sweep (and snapshot) in the background
	// quiet is how long writes must pause before the background writes a
	// snapshot.
	quiet time.Duration
	// foldsCase treats the root as a file system that takes names
	// differing only in case as one; when false, Configure asks the file
	// system (foldsCase).
	foldsCase bool
}

func defaultOptions() options {
	return options{now: time.Now, poll: time.Second, safety: time.Minute, watch: true, background: true, quiet: 2 * time.Second}
}

// noteChange counts a change of the index, which the snapshot lacks.
func (s *store) noteChange() {
	s.changes.Add(1)
	s.lastChange.Store(time.Now().UnixNano())
}

// work is a set of places to reconcile.
type work struct {
	full    bool
	targets map[target]struct{}
	files   map[fileKey]struct{}
}

func (w *work) addTarget(t target) {
	if w.targets == nil {
		w.targets = map[target]struct{}{}
	}
	w.targets[t] = struct{}{}
}

func (w *work) addFile(k fileKey) {
	if w.files == nil {
		w.files = map[fileKey]struct{}{}
	}
	w.files[k] = struct{}{}
}

func (w *work) empty() bool { return !w.full && len(w.targets) == 0 && len(w.files) == 0 }

// openStore loads root (which exists and lock holds locked), from the
// snapshot at snapPath ("" for none) when it holds a usable one, and
// starts watching it.
func openStore(root, snapPath string, lock *filelock.Lock, log *slog.Logger, opts options) *store {
	s := &store{
		root:        root,
		lock:        lock,
		snapPath:    snapPath,
		log:         log,
		opts:        opts,
		realms:      map[string]*realmIndex{},
		bad:         map[string]fileStamp{},
		warned:      map[string]fileStamp{},
		linksWarned: map[string]fileStamp{},
		stop:        make(chan struct{}),
		reindexing:  make(chan struct{}, 1),
		vecFiles:    map[string]*vecFile{},
		done:        make(chan struct{}),
		foldsCase:   opts.foldsCase,
		caseNames:   map[string]map[string]string{},
	}
	if opts.watch {
		w, err := newWatcher(root)
		if err != nil {
			log.Info("no file watcher; polling for hand edits instead", "every", opts.poll, "reason", err)
		} else {
			s.watch.Store(w)
		}
	}
	s.finishBatches()
	s.firstSweep()
	if opts.background {
		go s.loop()
	} else {
		close(s.done)
	}
	return s
}

// ensureDir creates root/rel as ensureDir does, first refusing it on a
// root that folds case when it would share a sibling's directory. The
// caller holds mu.
func (s *store) ensureDir(rel string) error {
	if !s.foldsCase {
		return ensureDir(s.root, rel)
	}
	if err := s.caseClash(rel); err != nil {
		return err
	}
	if err := ensureDir(s.root, rel); err != nil {
		return err
	}
	parent := ""
	for _, part := range strings.Split(rel, "/") {
		if known := s.caseNames[parent]; known != nil {
			known[strings.ToLower(part)] = part
		}
		parent = path.Join(parent, part)
	}
	return nil
}

// caseClash refuses root/rel when one of its components matches another
// entry of its parent directory but for case. Each directory is listed
// once, and again when an entry the listing lacks has appeared since, or
// before a clash is refused (either may have been made or removed by
// hand). The caller holds mu.
func (s *store) caseClash(rel string) error {
	parent, dir := "", s.root
	for _, part := range strings.Split(rel, "/") {
		known, err := s.listNames(parent, dir, false)
		if err != nil {
			return err
		}
		next := filepath.Join(dir, part)
		exact, ok := known[strings.ToLower(part)]
		if !ok {
			if _, err := os.Lstat(next); err != nil {
				return nil // missing, so nothing below it either; or a problem ensureDir reports
			}
		}
		if !ok || exact != part {
			// Listed again: an entry the listing lacks was made since,
			// or the one it clashes with may have been removed since
			// (a realm wiped by hand), which would refuse the name
			// until a restart.
			if known, err = s.listNames(parent, dir, true); err != nil {
				return err
			}
			exact, ok = known[strings.ToLower(part)]
		}
		if ok && exact != part {
			return fmt.Errorf("markdown: %q differs only in case from the directory %q beside it, and the root's file system takes the two as one name: %w",
				part, exact, sdk.ErrConflict)
		}
		parent, dir = path.Join(parent, part), next
	}
	return nil
}

// listNames answers the entries of dir (rel to the root), lower case to
// exact name, listing it when not known or when again is set. A missing
// dir has none. The caller holds mu.
func (s *store) listNames(rel, dir string, again bool) (map[string]string, error) {
	if known := s.caseNames[rel]; known != nil && !again {
		return known, nil
	}
	names, err := readDirNames(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("markdown: %w", err)
	}
	known := make(map[string]string, len(names))
	for _, n := range names {
		known[strings.ToLower(n)] = n
	}
	s.caseNames[rel] = known
	return known, nil
}

func (s *store) close() {
	select {
	case <-s.stop:
		return
	default:
	}
	close(s.stop)
	<-s.done
	s.refreshMu.Lock()
	if w := s.watch.Swap(nil); w != nil {
		w.close()
	}
	s.refreshMu.Unlock()
	if err := s.saveSnapshot(); err != nil {
		s.log.Warn("the next start reads every record file", "error", err.Error())
	}
	// Last: the snapshot is written before another instance may start.
	s.lock.Release()
}

// visitDir registers a directory with the watcher before it is read.
func (s *store) visitDir(abs, rel string) {
	w := s.watch.Load()
	if w == nil {
		return
	}
	if err := w.add(abs, rel); err != nil && !s.watchBroke.Swap(true) {
		s.log.Warn("cannot watch a directory; polling for hand edits instead", "dir", abs, "every", s.opts.poll, "error", err)
	}
}

func (s *store) requeue(k fileKey) {
	s.pendMu.Lock()
	s.pending.addFile(k)
	s.pendMu.Unlock()
}

// refresh brings the index up to date with the files before a call is
// answered. With a watcher it drains the events queued so far (one
// non-blocking read when nothing changed), so any edit finished before the
// call began is seen. Without one, it sweeps when the last sweep is older
// than the polling bound.
func (s *store) refresh() {
	s.active.Store(true)
	s.refreshMu.Lock()
	if s.watchBroke.Load() {
		if w := s.watch.Swap(nil); w != nil {
			w.close()
		}
	}
	var todo work
	if w := s.watch.Load(); w != nil {
		if err := w.drain(&todo); err != nil {
			s.log.Warn("file watcher failed; polling for hand edits instead", "error", err)
			s.watch.Store(nil)
			w.close()
			todo.full = true
		}
	}
	s.pendMu.Lock()
	for t := range s.pending.targets {
		todo.addTarget(t)
	}
	for k := range s.pending.files {
		todo.addFile(k)
	}
	s.pending = work{}
	s.pendMu.Unlock()
	if todo.full {
		// Events were lost; sweep before answering (refreshMu held, so
		// no call answers from the stale index meanwhile).
		s.sweepMu.Lock()
		s.sweep()
		s.sweepMu.Unlock()
	} else if !todo.empty() {
		if _, ok := todo.targets[target{}]; ok {
			todo.targets = map[target]struct{}{{}: {}} // everything covers the rest
		}
		for t := range todo.targets {
			s.reconcileTree(t)
		}
		if len(todo.files) > 0 {
			s.reconcile(s.planFiles(todo.files), false)
		}
	}
	s.refreshMu.Unlock()
	if s.watch.Load() == nil && s.stale(s.pollBound()) {
		s.sweepMu.Lock()
		if s.stale(s.pollBound()) {
			s.sweep()
		}
		s.sweepMu.Unlock()
	}
}

// pollBound is the polling interval, stretched on trees so large that
// sweeping every interval would keep a core busy: sweeps then take at
// most a fifth of the time.
func (s *store) pollBound() time.Duration {
	return max(s.opts.poll, 5*time.Duration(s.sweepCost.Load()))
}

func (s *store) stale(bound time.Duration) bool {
	return s.opts.now().Sub(time.Unix(0, s.lastSweep.Load())) >= bound
}

// sweep reconciles the whole tree. The caller holds sweepMu.
func (s *store) sweep() {
	start := s.opts.now()
	began := time.Now()
	s.reconcileTree(target{})
	s.sweepCost.Store(int64(time.Since(began)))
	s.lastSweep.Store(start.UnixNano())
}

// firstSweep is openStore's load, before anything else runs: the snapshot
// is decoded while the tree is listed (a stat per file, mostly waiting on
// the kernel), then every file is planned against it. It also clears temp
// files a crash left; its cost, which may include parsing every file,
// says nothing about later sweeps.
func (s *store) firstSweep() {
	start := s.opts.now()
	l := lister{root: s.root, visit: s.visitDir, cleanTemps: true, log: s.log.Warn}
	listed := make(chan struct{})
	go func() {
		defer close(listed)
		l.list(target{})
	}()
	s.fromSnapshot = s.loadSnapshot()
	<-listed
	s.noteLinks(target{}, l.links)
	s.reconcile(s.planTree(target{}, l.out, l.failed), true)
	s.mu.Lock()
	s.idx.Lock()
	s.loadVectors(s.realms)
	records := 0
	for _, ri := range s.realms {
		records += len(ri.byID)
	}
	s.idx.Unlock()
	s.mu.Unlock()
	s.lastSweep.Store(start.UnixNano())
	if !s.fromSnapshot && records > 0 {
		// Read from every file, which at a million records takes minutes
		// in which the plugin answers nothing: the log says when it is done.
		s.log.Info("rebuilt the recall index from the files", "records", records, "took", s.opts.now().Sub(start).Round(time.Millisecond).String())
	}
}

// snapshotGen reads snapGen.
func (s *store) snapshotGen() uint64 {
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	return s.snapGen
}

// loop sweeps in the background while calls keep arriving, so calls
// rarely wait for a sweep themselves; an idle store does no work.
func (s *store) loop() {
	defer close(s.done)
	tick := time.NewTicker(max(s.opts.poll/2, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		if s.changes.Load() != s.snapshotGen() && time.Since(time.Unix(0, s.lastChange.Load())) >= s.opts.quiet {
			if err := s.saveSnapshot(); err != nil {
				s.log.Warn("cannot save the recall index snapshot", "error", err.Error())
			}
		}
		bound := s.opts.safety
		if s.watch.Load() == nil {
			bound = s.pollBound() / 2
		}
		if !s.stale(bound) || !s.active.Swap(false) {
			continue
		}
		s.sweepMu.Lock()
		s.sweep()
		s.sweepMu.Unlock()
	}
}
