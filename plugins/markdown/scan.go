package markdown

import (
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/memhost/memhost/sdk"
)

// Reconciling brings the index in line with the files. It is the one path
// by which outside changes (hand edits, additions, deletions, a git pull)
// reach the index, whether a watcher event or a periodic sweep pointed at
// them. It runs in three steps so that nothing slow happens under a lock:
//
//  1. list: stat the files of a part of the tree (no lock);
//  2. plan: compare stamps with the index (read lock) and pick the files to
//     read and the records whose files are gone;
//  3. load (no lock) and apply (write lock). A change is applied only if
//     the index still holds what the plan saw; otherwise a write of ours
//     got there first and the file is queued for another look.

// racyWindow: a file whose mtime was this close to the moment we read it
// may be edited again within the same timestamp tick (coarse clocks, FAT's
// 2 s) without its stamp changing, so its stamp is not trusted until the
// window has passed (git calls this "racily clean").
const racyWindow = 2 * time.Second

// digestTable keys file digests. They are kept in the index snapshot, so
// they must mean the same in the next process (maphash's would not).
var digestTable = crc64.MakeTable(crc64.ECMA)

func fileDigest(data []byte) uint64 { return crc64.Checksum(data, digestTable) }

// target names the part of the tree a reconcile covers. The zero target is
// everything; then narrower: one realm, one scope class of a realm, one
// scope directory.
type target struct {
	realm string
	class sdk.ScopeClass
	scope sdk.Scope
}

// rel is the part of the tree t covers, relative to the root ("" for all).
func (t target) rel() string {
	switch {
	case t.realm == "":
		return ""
	case t.scope != "":
		d, _ := scopeDir(t.scope)
		return t.realm + "/" + d
	case t.class != "":
		return t.realm + "/" + string(t.class)
	}
	return t.realm
}

func (t target) covers(realm string, scope sdk.Scope) bool {
	switch {
	case t.realm == "":
		return true
	case t.realm != realm:
		return false
	case t.scope != "":
		return t.scope == scope
	case t.class != "":
		return scope.Class() == t.class
	}
	return true
}

// listing is what one scope directory holds: record id → stamp.
type listing struct {
	realm string
	scope sdk.Scope
	files map[string]fileStamp
}

// lister walks the tree. visit is called for each directory before it is
// read, so that a watcher registered there reports any later change.
type lister struct {
	root       string
	visit      func(abs, rel string)
	cleanTemps bool // remove temp files a crash left behind
	log        func(msg string, args ...any)
	out        []listing
	failed     []target // parts that could not be read: never treat as empty
	// links are the symlinks found where a realm, scope directory or
	// record file would be: never followed, so what they lead to is not
	// read (store.noteLinks warns of them).
	links []string
}

func isLink(e fs.DirEntry) bool { return e.Type()&fs.ModeSymlink != 0 }

func (l *lister) readDir(rel string, t target) ([]fs.DirEntry, bool) {
	p, err := abs(l.root, rel)
	if err != nil {
		return nil, false
	}
	if rel != "" { // below the root, only real directories are entered
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				l.links = append(l.links, rel)
			}
			return nil, err == nil || errors.Is(err, fs.ErrNotExist)
		}
	}
	if l.visit != nil {
		l.visit(p, rel)
	}
	ents, err := os.ReadDir(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, true
	}
	if err != nil {
		l.log("cannot read directory; its records keep their last known state", "dir", p, "error", err)
		l.failed = append(l.failed, t)
		return nil, false
	}
	return ents, true
}

func (l *lister) list(t target) {
	switch {
	case t.realm == "":
		ents, _ := l.readDir("", t)
		for _, e := range ents {
			if (e.IsDir() || isLink(e)) && sdk.ValidateRealm(e.Name()) == nil {
				l.listRealm(e.Name())
			}
		}
	case t.scope != "":
		l.listScope(t.realm, t.scope)
	case t.class != "":
		l.listClass(t.realm, t.class)
	default:
		l.listRealm(t.realm)
	}
}

func (l *lister) listRealm(realm string) {
	ents, _ := l.readDir(realm, target{realm: realm})
	for _, e := range ents {
		if !e.IsDir() && !isLink(e) {
			continue
		}
		switch c := sdk.ScopeClass(e.Name()); c {
		case sdk.ScopeIdentity, sdk.ScopeMob, sdk.ScopeOperator:
			l.listClass(realm, c)
		case sdk.ScopeRealm:
			l.listScope(realm, sdk.RealmScope)
		}
	}
}

func (l *lister) listClass(realm string, class sdk.ScopeClass) {
	ents, _ := l.readDir(realm+"/"+string(class), target{realm: realm, class: class})
	for _, e := range ents {
		if scope := sdk.Scope(string(class) + ":" + e.Name()); (e.IsDir() || isLink(e)) && scope.Validate() == nil {
			l.listScope(realm, scope)
		}
	}
}

func (l *lister) listScope(realm string, scope sdk.Scope) {
	d, err := scopeDir(scope)
	if err != nil {
		return
	}
	rel := realm + "/" + d
	ents, ok := l.readDir(rel, target{realm: realm, scope: scope})
	if !ok {
		return
	}
	files := make(map[string]fileStamp, len(ents))
	for _, e := range ents {
		if l.cleanTemps && strings.HasPrefix(e.Name(), tempPrefix) {
			if p, err := abs(l.root, rel+"/"+e.Name()); err == nil {
				os.Remove(p)
			}
			continue
		}
		id, ok := recordID(e.Name())
		if !ok || !e.Type().IsRegular() { // symlinks are never followed
			if ok && isLink(e) {
				l.links = append(l.links, rel+"/"+e.Name())
			}
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // gone since the directory was read
		}
		files[id] = stampOf(fi)
	}
	l.out = append(l.out, listing{realm: realm, scope: scope, files: files})
}

// change is one planned update of the index.
type change struct {
	key  fileKey
	prev *doc // what the index held when planned; nil for nothing
	gone bool // the file is gone: drop prev
	// filled by load:
	stamp  fileStamp
	digest uint64
	same   bool // same bytes as prev: only the stamp changes
	rec    sdk.Record
	fields [][]string // recordFields(&rec)
	err    error      // the file is not a valid record
	// unread says err is a failure to read the file (permission denied,
	// an I/O error), not a fault of its content: restoring access leaves
	// the stamp as it was, so the file is not cached as bad.
	unread bool
	// was is the record of the file in an index being rebuilt (reindex),
	// whose place among equal scores it keeps (fileSeq).
	was *doc
}

// planTree compares listings of target t with the index.
func (s *store) planTree(t target, ls []listing, failed []target) []*change {
	s.idx.RLock()
	defer s.idx.RUnlock()
	var out []*change
	seen := map[fileKey]bool{}
	for _, l := range ls {
		ri := s.realms[l.realm]
		for id, st := range l.files {
			k := fileKey{l.realm, l.scope, id}
			seen[k] = true
			var prev *doc
			if ri != nil {
				prev = ri.inScope(l.scope, id)
			}
			if s.unchanged(k, prev, st) {
				continue
			}
			out = append(out, &change{key: k, prev: prev})
		}
	}
	for realm, ri := range s.realms {
		for scope, ids := range ri.byScope {
			if !t.covers(realm, scope) || anyCovers(failed, realm, scope) {
				continue
			}
			for id, d := range ids {
				if k := (fileKey{realm, scope, id}); !seen[k] {
					out = append(out, &change{key: k, prev: d, gone: true})
				}
			}
		}
	}
	return out
}

func anyCovers(ts []target, realm string, scope sdk.Scope) bool {
	for _, t := range ts {
		if t.covers(realm, scope) {
			return true
		}
	}
	return false
}

// unchanged reports whether a file with stamp st needs no reading. The
// caller holds at least the read lock.
func (s *store) unchanged(k fileKey, prev *doc, st fileStamp) bool {
	if prev != nil {
		return prev.stamp == st && !prev.racy
	}
	bad, ok := s.bad[k.rel()]
	return ok && bad == st
}

// planFiles stats individual files a watcher named.
func (s *store) planFiles(keys map[fileKey]struct{}) []*change {
	type seenFile struct {
		key    fileKey
		stamp  fileStamp
		exists bool
	}
	stats := make([]seenFile, 0, len(keys))
	var links []string
	for k := range keys {
		p, err := abs(s.root, k.rel())
		if err != nil {
			continue
		}
		fi, err := os.Lstat(p)
		switch {
		case err == nil && fi.Mode().IsRegular():
			stats = append(stats, seenFile{k, stampOf(fi), true})
		case err == nil || errors.Is(err, fs.ErrNotExist):
			if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				links = append(links, k.rel())
			}
			stats = append(stats, seenFile{key: k})
		}
	}
	if len(links) > 0 {
		s.linkMu.Lock()
		s.warnLinksLocked(links)
		s.linkMu.Unlock()
	}
	s.idx.RLock()
	defer s.idx.RUnlock()
	var out []*change
	for _, f := range stats {
		var prev *doc
		if ri := s.realms[f.key.realm]; ri != nil {
			prev = ri.inScope(f.key.scope, f.key.id)
		}
		switch {
		case !f.exists && prev != nil:
			out = append(out, &change{key: f.key, prev: prev, gone: true})
		case !f.exists:
			s.clearBadLater(f.key)
		case !s.unchanged(f.key, prev, f.stamp):
			out = append(out, &change{key: f.key, prev: prev})
		}
	}
	return out
}

// clearBadLater forgets a vanished bad file (under the read lock, so the
// map change waits for apply).
func (s *store) clearBadLater(k fileKey) {
	s.pendMu.Lock()
	s.goneBad = append(s.goneBad, k.rel())
	s.pendMu.Unlock()
}

// load reads and parses the file of c.
func (s *store) load(c *change) {
	p, err := abs(s.root, c.key.rel())
	if err != nil {
		c.err = err
		return
	}
	if behindLink(s.root, c.key) {
		c.gone = true
		return
	}
	if fi, err := os.Lstat(p); err == nil {
		c.stamp = stampOf(fi) // so an unreadable file is known by its stamp
	}
	f, err := openRecordFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		c.gone = true
		return
	}
	if err != nil {
		c.err, c.unread = err, true
		return
	}
	defer f.Close()
	s.loads.Add(1)
	fi, err := f.Stat()
	if err != nil {
		c.err, c.unread = err, true
		return
	}
	c.stamp = stampOf(fi)
	if !fi.Mode().IsRegular() {
		c.err = errors.New("not a regular file")
		return
	}
	if fi.Size() > maxFileBytes {
		c.err = fmt.Errorf("file is %d bytes, the limit is %d", fi.Size(), maxFileBytes)
		return
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		c.err, c.unread = err, true
		return
	}
	if len(data) > maxFileBytes {
		c.err = fmt.Errorf("file grew past the limit of %d bytes", maxFileBytes)
		return
	}
	c.digest = fileDigest(data)
	if c.prev != nil && c.prev.digest == c.digest {
		c.same = true
		return
	}
	rec, err := parseRecord(data)
	if err == nil {
		err = adoptFileRecord(&rec, c.key, fi.ModTime())
	}
	if err != nil {
		c.err = err
		return
	}
	c.rec = rec
	c.fields = recordFields(&c.rec)
}

// openRecordFile opens a record file for reading (openForReading). A
// variable so tests can fail it.
var openRecordFile = openForReading

// openForReading opens a file the store reads, never through a link and
// never waiting on a FIFO swapped in after the file was listed or checked:
// the caller checks what was opened.
func openForReading(p string) (*os.File, error) {
	return os.OpenFile(p, os.O_RDONLY|openNoFollow|openNoWait, 0)
}

// adoptFileRecord checks a parsed file against its place on disk and
// fills what a hand-written file may leave out: id and scope come from
// the path, the times from the file's mtime, trust and status from the
// same defaults a write gets. The content hash is always recomputed, so a
// hand edit of the title or body is never shadowed by a stale hash.
func adoptFileRecord(r *sdk.Record, k fileKey, mtime time.Time) error {
	if r.ID == "" {
		r.ID = k.id
	} else if r.ID != k.id {
		return fmt.Errorf("id %q does not match the file name %s%s", r.ID, k.id, recordExt)
	}
	if r.Scope == "" {
		r.Scope = k.scope
	} else if r.Scope != k.scope {
		return fmt.Errorf("scope %q does not match the directory, which holds scope %q", r.Scope, k.scope)
	}
	r.Realm = k.realm
	if r.Trust == "" {
		r.Trust = sdk.TrustAgentObserved
	}
	if r.Status == "" {
		r.Status = sdk.StatusActive
	}
	at := mtime.UTC().Truncate(time.Millisecond)
	if r.CreatedAt.IsZero() {
		r.CreatedAt = at
	}
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = at
	}
	if r.UseCount < 0 || r.UseCount > sdk.MaxRecordUseCount {
		return fmt.Errorf("use_count: %d is outside 0..%d", r.UseCount, sdk.MaxRecordUseCount)
	}
	r.ContentHash = sdk.ContentHash(r.Title, r.Body)
	return r.Validate()
}

// loadAll loads changes on every core.
func (s *store) loadAll(cs []*change) {
	var todo []*change
	for _, c := range cs {
		if !c.gone {
			todo = append(todo, c)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), (len(todo)+15)/16)
	if workers <= 1 {
		for _, c := range todo {
			s.load(c)
		}
		return
	}
	var wg sync.WaitGroup
	next := make(chan *change)
	for range workers {
		wg.Go(func() {
			for c := range next {
				s.load(c)
			}
		})
	}
	for _, c := range todo {
		next <- c
	}
	close(next)
	wg.Wait()
}

// applyChunk is how many changes are loaded and applied at a time, so a
// first load of a large tree never holds every parsed file at once.
const applyChunk = 512

// reconcile loads and applies planned changes. first is the initial
// load, which nothing runs beside.
func (s *store) reconcile(cs []*change, first bool) {
	for len(cs) > 0 {
		n := min(len(cs), applyChunk)
		s.loadAll(cs[:n])
		s.apply(cs[:n], !first)
		cs = cs[n:]
	}
}

func (s *store) reconcileTree(t target) {
	l := lister{root: s.root, visit: s.visitDir, log: s.log.Warn}
	l.list(t)
	s.noteLinks(t, l.links)
	s.reconcile(s.planTree(t, l.out, l.failed), false)
}

// noteLinks warns of each symlink a listing of t skipped, once until the
// link changes or goes (a sweep lists it again and again): the records
// beyond it drop out of the index, and without a word the loss would
// show only as missing records.
func (s *store) noteLinks(t target, links []string) {
	s.linkMu.Lock()
	defer s.linkMu.Unlock()
	s.warnLinksLocked(links)
	seen := make(map[string]bool, len(links))
	for _, rel := range links {
		seen[rel] = true
	}
	prefix := t.rel()
	for rel := range s.linksWarned {
		if !seen[rel] && (prefix == "" || rel == prefix || strings.HasPrefix(rel, prefix+"/")) {
			delete(s.linksWarned, rel) // so a link put back warns again
		}
	}
}

// warnLinksLocked warns of each link not yet warned of as it is. The
// caller holds linkMu.
func (s *store) warnLinksLocked(links []string) {
	for _, rel := range links {
		p, err := abs(s.root, rel)
		if err != nil {
			continue
		}
		fi, err := os.Lstat(p)
		if err != nil {
			continue // gone since it was listed
		}
		if last, ok := s.linksWarned[rel]; ok && last == stampOf(fi) {
			continue
		}
		s.linksWarned[rel] = stampOf(fi)
		to, _ := os.Readlink(p)
		s.log.Warn("skipping a symbolic link in the record tree: links are never followed, so no record behind it is read", "link", p, "to", to)
	}
}

// apply enters loaded changes into the index. With verify, each change is
// first checked against the disk under mu, where none of our own writes
// can interleave: a listing taken before a write of ours must not drop
// the new record as gone, nor a read taken before a forget bring a
// forgotten one back. A change the disk no longer matches is queued for
// another look.
func (s *store) apply(cs []*change, verify bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if verify {
		kept := cs[:0:0]
		for _, c := range cs {
			if s.stillTrue(c) {
				kept = append(kept, c)
			} else {
				s.requeue(c.key)
			}
		}
		cs = kept
	}
	s.applyLocked(cs)
}

// stillTrue reports whether the file of c is as c found it.
func (s *store) stillTrue(c *change) bool {
	p, err := abs(s.root, c.key.rel())
	if err != nil {
		return false
	}
	fi, err := os.Lstat(p)
	exists := err == nil && fi.Mode().IsRegular() && !behindLink(s.root, c.key)
	if c.gone {
		return !exists && (err == nil || errors.Is(err, fs.ErrNotExist))
	}
	return exists && stampOf(fi) == c.stamp
}

func (s *store) applyLocked(cs []*change) {
	s.idx.Lock()
	defer s.idx.Unlock()
	s.pendMu.Lock()
	for _, rel := range s.goneBad {
		delete(s.bad, rel)
	}
	s.goneBad = s.goneBad[:0]
	s.pendMu.Unlock()
	if s.applyChanges(s.realms, s.bad, cs) {
		s.noteChange()
	}
}

// applyChanges enters loaded changes into realms, recording invalid files
// in bad; it reports whether it changed anything. The caller holds mu, and
// idx when realms or bad are the store's own.
func (s *store) applyChanges(realms map[string]*realmIndex, bad map[string]fileStamp, cs []*change) bool {
	now := time.Now()
	changed := false
	for _, c := range cs {
		ri := realms[c.key.realm]
		var cur *doc
		if ri != nil {
			cur = ri.inScope(c.key.scope, c.key.id)
		}
		if cur != c.prev {
			// A write of ours changed this file after the plan; the index
			// holds the newer state. Look again on the next refresh.
			s.requeue(c.key)
			continue
		}
		rel := c.key.rel()
		switch {
		case c.gone:
			if cur != nil {
				ri.remove(cur.rec.ID)
				changed = true
			}
			delete(bad, rel)
			delete(s.warned, rel)
		case c.same:
			cur.stamp = c.stamp
			cur.racy = now.Sub(time.Unix(0, c.stamp.mtime)) < racyWindow
			changed = true // the snapshot holds stamps
		case c.err != nil && c.unread:
			// Read again at every look: access restored by chmod or
			// chown keeps the stamp, so a cached verdict would hide the
			// record until its content changed or the plugin restarted.
			if cur != nil {
				ri.remove(cur.rec.ID)
				changed = true
			}
			delete(bad, rel)
			s.warnOnce(rel, c.stamp, "skipping record file that cannot be read", c.err)
		case c.err != nil:
			if cur != nil {
				ri.remove(cur.rec.ID)
				changed = true
			}
			bad[rel] = c.stamp
			s.warnOnce(rel, c.stamp, "skipping record file that is not a valid record", c.err)
		default:
			if ri == nil {
				ri = newRealmIndex(c.key.realm)
				realms[c.key.realm] = ri
			}
			if other := ri.get(c.rec.ID); other != nil && other != cur {
				// Ids are unique per realm; the file indexed first keeps
				// it. Not cached as bad: it becomes valid when the other
				// file goes.
				if cur != nil {
					ri.remove(cur.rec.ID)
					changed = true
				}
				dir, _ := scopeDir(other.rec.Scope)
				s.warnOnce(rel, c.stamp, "skipping record file", fmt.Errorf("id %q is already used by %s/%s/%s%s", c.rec.ID, c.key.realm, dir, c.rec.ID, recordExt))
				continue
			}
			delete(bad, rel)
			before := cur
			if before == nil {
				before = c.was
			}
			d := &doc{rec: c.rec, stamp: c.stamp, digest: c.digest, racy: now.Sub(time.Unix(0, c.stamp.mtime)) < racyWindow,
				seq: fileSeq(&c.rec, before)}
			ri.put(d, c.fields)
			changed = true
		}
	}
	return changed
}

// warnOnce logs a problem with one version of a file once.
func (s *store) warnOnce(rel string, st fileStamp, msg string, err error) {
	if last, ok := s.warned[rel]; ok && last == st {
		return
	}
	s.warned[rel] = st
	s.log.Warn(msg, "file", filepath.Join(s.root, filepath.FromSlash(rel)), "error", err)
}
