package sqlite

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memhost/memhost/sdk"
	memindex "github.com/memhost/memhost/sdk/index"
)

// Recall is answered by sdk/index, an exact in-memory BM25F engine that
// ranks as FTS5's bm25(5,4,2,1) did (plugins/sqlite/index_parity_test.go).
// SQLite stays the durable truth: a write commits first and changes the
// index only after the commit, so a crash at any point loses nothing the
// database holds; the index is rebuilt at the next open.
//
// Opening does not re-tokenize when it can help it: the index is written as
// a snapshot (<path>.index) when the database closes and after writes go
// quiet, stamped with the database's index generation (index_gen, bumped in
// every write transaction that changes the index). A snapshot whose stamp
// matches is decoded; any other (none, torn, stale after a crash, newer than
// a restored database) is removed and the index is rebuilt from the
// records, tokenized on every core.

// snapshotMagic starts a snapshot file. The database's identity
// (index_gen.store) follows, then the index generation (8 bytes,
// little-endian) and a CRC-32C of all three; the encoded index, which has
// a checksum of its own, comes after. The identity keeps a snapshot of
// another database at the same generation from being taken for this one's.
const snapshotMagic = "memhost-sqlite-index\x00\x02"

// noSnapshot is the snapGen of an index no snapshot file holds.
const noSnapshot = ^uint64(0)

// errStaleSnapshot marks a snapshot that does not describe the database.
var errStaleSnapshot = errors.New("index snapshot is stale")

// indexOptions rank each realm by its own statistics: with one set over
// the store, one realm's writes would move another's scores, and a tenant
// could read another's term counts from its own.
var indexOptions = memindex.Options{Weights: fieldWeights[:], ContextWeight: memindex.ContextWeight, Stats: memindex.StatsRealm}

func newMemIndex() *memindex.Index {
	ix, err := memindex.New(indexOptions)
	if err != nil {
		panic(err) // the weights are constants this package chose
	}
	return ix
}

// rankedAsOurs reports whether a decoded index ranks as newMemIndex's does.
func rankedAsOurs(ix *memindex.Index) bool {
	got, want := ix.Options(), newMemIndex().Options()
	return slices.Equal(got.Weights, want.Weights) && got.K1 == want.K1 && got.B == want.B &&
		got.Stats == want.Stats && got.ContextWeight == want.ContextWeight
}

// indexOp is one change to the index, applied after its commit: a
// document put, a delete (del), or a vector put (vec).
type indexOp struct {
	del       bool
	realm, id string
	doc       memindex.Doc
	vec       *sdk.RecordVector
}

// putDoc is the index document of an active record stored at seq.
func putDoc(seq int64, r *sdk.Record, doc *indexDoc) memindex.Doc {
	fields := make([][]string, len(doc.colTerms))
	copy(fields, doc.colTerms[:])
	d := memindex.Doc{ID: r.ID, Realm: r.Realm, Scope: string(r.Scope), Tags: r.Tags,
		Fields: fields, ExpiresMs: optionalMillis(r.ExpiresAt), WhenMs: r.When().UnixMilli(), Seq: uint64(seq)}
	if r.Thread != nil {
		d.Thread, d.ThreadSeq = r.Thread.ID, r.Thread.Seq
	}
	return d
}

// apply makes ops, committed in that order, visible to recall.
func applyOps(ix *memindex.Index, ops []indexOp) error {
	for i := range ops {
		op := &ops[i]
		if op.del {
			ix.Delete(op.realm, op.id)
			continue
		}
		if v := op.vec; v != nil {
			if _, err := ix.PutVector(op.realm, v.ID, v.Model, v.Vector); err != nil {
				return fmt.Errorf("index the vector of %s: %w", v.ID, err)
			}
			continue
		}
		if err := ix.Put(op.doc); err != nil {
			return fmt.Errorf("index record %s: %w", op.doc.ID, err)
		}
	}
	return nil
}

// storeID reads the database's identity, which stamps the snapshot and
// the index log (schema migration 8).
func storeID(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) ([]byte, error) {
	var id []byte
	if err := q.QueryRowContext(ctx, "SELECT store FROM index_gen").Scan(&id); err != nil {
		return nil, fmt.Errorf("read the database's identity: %w", err)
	}
	return id, nil
}

// indexGen reads the database's index generation.
func indexGen(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (uint64, error) {
	var gen int64
	if err := q.QueryRowContext(ctx, "SELECT gen FROM index_gen").Scan(&gen); err != nil {
		return 0, fmt.Errorf("read index generation: %w", err)
	}
	return uint64(gen), nil
}

func (d *database) snapshotPath() string { return d.path + ".index" }

// loadIndex fills d.ix from a matching snapshot; from an older snapshot
// (or none) and the index log's frames after it; or from the records.
func (d *database) loadIndex(ctx context.Context) (err error) {
	gen, err := indexGen(ctx, d.r)
	if err != nil {
		return err
	}
	if d.store, err = storeID(ctx, d.r); err != nil {
		return err
	}
	defer func() {
		// However it was built, the index is the database's at gen.
		if err == nil {
			d.committedGen.Store(gen)
			d.appliedGen.Store(gen)
			d.appliedLogEnd = d.ilog.end()
		}
	}()
	ix, snapGen, err := readSnapshot(d.snapshotPath(), d.store)
	if errors.Is(err, os.ErrNotExist) && gen > 0 {
		// No snapshot yet: the log may hold every change since the first.
		ix, snapGen, err = newMemIndex(), 0, nil
	}
	if err == nil && snapGen <= gen {
		keep, ok, beyond, rerr := replayLog(d.logPath(), d.store, ix, snapGen, gen)
		if rerr != nil {
			return fmt.Errorf("read the index log: %w", rerr)
		}
		if ok && beyond {
			// The log goes on past the database: it was restored from a
			// copy taken on this history, which it now leaves. The index
			// is right for it, but the files must not serve a copy taken
			// later on the history left behind.
			d.log.Info("the database is older than its index log; starting a new index history")
			d.ix, d.snapGen = ix, noSnapshot
			return d.newHistory(ctx)
		}
		if ok && snapGen == gen {
			d.ix, d.snapGen, d.fromSnapshot = ix, gen, true
			d.ilog, err = openIndexLog(d.logPath(), d.store, 0)
			return err
		}
		if ok {
			d.ix, d.snapGen, d.replayed = ix, noSnapshot, gen-snapGen
			if _, serr := os.Stat(d.snapshotPath()); serr == nil {
				d.snapGen = snapGen
			}
			d.ilog, err = openIndexLog(d.logPath(), d.store, keep)
			return err
		}
		err = fmt.Errorf("the index log does not reach generation %d from %d", gen, snapGen)
	} else if err == nil {
		err = fmt.Errorf("%s is of generation %d, the database %d: %w", d.snapshotPath(), snapGen, gen, errStaleSnapshot)
	}
	if !errors.Is(err, os.ErrNotExist) {
		d.log.Info("rebuilding the recall index from the records", "reason", err.Error())
	}
	// At a million records a rebuild takes a minute, in which the plugin
	// answers nothing: the log says how far it is and when it is done.
	start := time.Now()
	said := start
	ix, n, err := rebuildIndex(ctx, d.r, "", func(done int) {
		if now := time.Now(); now.Sub(said) >= rebuildProgressEvery {
			said = now
			d.log.Info("rebuilding the recall index", "records", done)
		}
	})
	if err != nil {
		return fmt.Errorf("build the recall index: %w", err)
	}
	if n > 0 {
		d.log.Info("rebuilt the recall index", "records", n, "took", time.Since(start).Round(time.Millisecond).String())
	}
	// Even at generation 0 (a database from before index_gen) the next
	// quiet period or close writes a snapshot.
	d.ix, d.snapGen = ix, noSnapshot
	return d.newHistory(ctx)
}

// rebuildProgressEvery is how often a rebuild of the recall index at
// open logs how many records it has indexed.
const rebuildProgressEvery = 10 * time.Second

// newHistory gives the database a new identity and starts the snapshot
// and log afresh under it, for an open whose files did not match the
// database (or went past it). A database restored from an older copy
// climbs back along another history to generations the old files (or a
// copy taken later on the old history) also hold; with the identity
// changed, each is another database's from now on, never decoded or
// replayed onto this one. A crash part way leaves files that match no
// identity, and the next open rebuilds. d.ix is the database's index.
func (d *database) newHistory(ctx context.Context) error {
	if err := os.Remove(d.snapshotPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the index snapshot that does not match the database: %w", err)
	}
	var store []byte
	if err := d.w.QueryRowContext(ctx, "UPDATE index_gen SET store = randomblob(16) WHERE one = 1 RETURNING store").Scan(&store); err != nil {
		return fmt.Errorf("give the database a new identity: %w", err)
	}
	d.store = store
	var err error
	d.ilog, err = openIndexLog(d.logPath(), d.store, 0)
	return err
}

// readSnapshot decodes the snapshot file of the database whose identity
// is store and answers the generation it is stamped with.
func readSnapshot(path string, store []byte) (*memindex.Index, uint64, error) {
	// Read whole in one allocation of the file's size (os.ReadFile sizes
	// it from the file's): at 1M records the snapshot is hundreds of MB.
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	head := len(snapshotMagic) + len(store) + 8
	if len(data) < head+4 || string(data[:len(snapshotMagic)]) != snapshotMagic {
		return nil, 0, fmt.Errorf("%s: %w", path, errStaleSnapshot)
	}
	if crc32.Checksum(data[:head], crcTable) != binary.LittleEndian.Uint32(data[head:]) {
		return nil, 0, fmt.Errorf("%s: its header is damaged: %w", path, errStaleSnapshot)
	}
	if !bytes.Equal(data[len(snapshotMagic):head-8], store) {
		return nil, 0, fmt.Errorf("%s belongs to another database: %w", path, errStaleSnapshot)
	}
	gen := binary.LittleEndian.Uint64(data[head-8 : head])
	ix, err := memindex.DecodeBytes(data[head+4:])
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	if !rankedAsOurs(ix) {
		return nil, 0, fmt.Errorf("%s was written with other ranking settings: %w", path, errStaleSnapshot)
	}
	return ix, gen, nil
}

// writeSnapshot stores the index as of generation gen and empties the
// log. The caller holds d.smu, d.wmu and d.imu and has applied every
// pending change, so the index is the database's.
func (d *database) writeSnapshot(gen uint64) error {
	f, err := d.encodeSnapshot(gen)
	if err == nil {
		err = d.commitSnapshot(f)
	}
	if err != nil {
		return err
	}
	d.snapGen = gen
	// Everything the log held is in the snapshot now. Frames left by a
	// failed reset are skipped at replay (their generations are older).
	if err := d.ilog.reset(); err != nil {
		return fmt.Errorf("empty the index log: %w", err)
	}
	return nil
}

// encodeSnapshot writes the index, stamped gen, to the snapshot's
// temporary file and answers it open. The caller holds d.smu (the file is
// its) and d.imu, so no change applies meanwhile.
func (d *database) encodeSnapshot(gen uint64) (*os.File, error) {
	tmp := d.snapshotPath() + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, snapshotErr(tmp, err)
	}
	bw := bufio.NewWriterSize(f, 1<<16)
	head := binary.LittleEndian.AppendUint64(append([]byte(snapshotMagic), d.store...), gen)
	bw.Write(binary.LittleEndian.AppendUint32(head, crc32.Checksum(head, crcTable)))
	err = d.ix.Encode(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, snapshotErr(tmp, err)
	}
	return f, nil
}

// commitSnapshot makes the encoded file durable and renames it over the
// snapshot, so a crash leaves the old snapshot or the new one, never half
// of either. It needs no lock but d.smu.
func (d *database) commitSnapshot(f *os.File) error {
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), d.snapshotPath())
	}
	if err != nil {
		os.Remove(f.Name())
		return snapshotErr(d.snapshotPath(), err)
	}
	return nil
}

// snapshotErr says once that writing the snapshot at path failed, and
// why: the file system's error names the path and its operation again
// ("write …tmp: index: encode: write …tmp: no space left on device"), so
// only its reason is kept (errors.Is still reads it).
func snapshotErr(path string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	return fmt.Errorf("write index snapshot %s: %w", path, err)
}

// clusterShare is the least share of a realm's documents that must have
// arrived since its last renumbering in scope order (memindex.Index.Cluster)
// for a snapshot to renumber them: each renumbering leaves one more run
// of scope order, and costs about what encoding those documents does.
const clusterShare = 1.0 / 16

// snapshot writes the index when it changed since the last snapshot.
// Writes go on meanwhile: only applying their index changes waits, while
// the index is encoded (recall that must read a write waits with it);
// the file is synced and renamed with no lock held, and the log then
// loses the frames the snapshot holds and keeps those that came since.
func (d *database) snapshot(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.smu.Lock()
	defer d.smu.Unlock()
	d.imu.Lock()
	d.applyPendingLocked()
	gen, end := d.appliedGen.Load(), d.appliedLogEnd
	if gen == d.snapGen {
		d.imu.Unlock()
		return nil
	}
	// Renumbering the documents written since in scope order holds imu
	// too, for as long as it takes to encode what they hold, and the
	// snapshot keeps the new order.
	clustered := d.ix.Cluster(clusterShare) > 0
	if d.opts.encoding != nil {
		d.opts.encoding()
	}
	f, err := d.encodeSnapshot(gen)
	d.imu.Unlock()
	if clustered {
		// The renumbering's working copies are garbage now: hand their
		// pages back rather than keep them resident until the runtime's
		// scavenger gets round to it (at 1M records, tens of MiB).
		debug.FreeOSMemory()
	}
	if err != nil {
		return err
	}
	if err := d.commitSnapshot(f); err != nil {
		return err
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	d.imu.Lock()
	defer d.imu.Unlock()
	d.snapGen = gen
	if err := d.ilog.dropThrough(end); err != nil {
		// The log keeps frames the snapshot holds; replay skips them.
		return fmt.Errorf("trim the index log: %w", err)
	}
	return nil
}

// activeRecords is the FROM and WHERE of the rows the index holds, of one
// realm or of every realm (""), with its arguments. Two texts rather than
// one with an OR, so a realm's query uses the realm index.
func activeRecords(realm string) (string, []any) {
	if realm == "" {
		return ` FROM records WHERE status = 'active'`, nil
	}
	return ` FROM records WHERE status = 'active' AND realm = ?`, []any{realm}
}

// rebuildIndex indexes every active record of realm ("" for every realm),
// tokenizing on every core, and answers the index and how many records it
// holds. indexed, when set, is told the running count from this goroutine.
func rebuildIndex(ctx context.Context, db querier, realm string, indexed func(n int)) (*memindex.Index, int, error) {
	from, args := activeRecords(realm)
	rows, err := db.QueryContext(ctx, `SELECT seq, realm, id, scope, expires_ms, tags, title, description, body,
		thread_id, thread_seq, created_ms, occurred_ms`+from, args...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var done atomic.Int64
	type row struct {
		seq  int64
		r    sdk.Record
		exp  int64
		tags string
		// thread
		tid  string
		tseq int64
		// the record's time (sdk.Record.When)
		created, occurred int64
	}
	ix := newMemIndex()
	in := make(chan []row, 4)
	var wg sync.WaitGroup
	var putErr error
	var errOnce sync.Once
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range in {
				for i := range batch {
					b := &batch[i]
					b.r.Tags = splitTags(b.tags)
					b.r.CreatedAt, b.r.OccurredAt = fromMillis(b.created), fromMillis(b.occurred)
					if b.tid != "" {
						b.r.Thread = &sdk.Thread{ID: b.tid, Seq: b.tseq}
					}
					doc := newIndexDoc(&b.r)
					d := putDoc(b.seq, &b.r, &doc)
					d.ExpiresMs = b.exp
					if err := ix.Put(d); err != nil {
						errOnce.Do(func() { putErr = err })
					}
				}
				done.Add(int64(len(batch)))
			}
		}()
	}
	batch := make([]row, 0, 256)
	for rows.Next() {
		var b row
		if err := rows.Scan(&b.seq, &b.r.Realm, &b.r.ID, &b.r.Scope, &b.exp, &b.tags, &b.r.Title, &b.r.Description, &b.r.Body, &b.tid, &b.tseq, &b.created, &b.occurred); err != nil {
			close(in)
			wg.Wait()
			return nil, 0, err
		}
		batch = append(batch, b)
		if len(batch) == cap(batch) {
			in <- batch
			batch = make([]row, 0, 256)
			if indexed != nil {
				indexed(int(done.Load()))
			}
		}
	}
	in <- batch
	close(in)
	wg.Wait()
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if putErr != nil {
		return nil, 0, putErr
	}
	n := int(done.Load())
	if err := loadVectors(ctx, db, ix, realm); err != nil {
		return nil, 0, err
	}
	if indexed != nil {
		indexed(n)
	}
	return ix, n, nil
}

// recallFromIndex answers the best hits of q from the index, with their
// records read from the database in one query by row key (the index's
// Seq is records.seq), which skips the (realm, id) index a read by id
// walks first.
func (d *database) recallFromIndex(ctx context.Context, q sdk.RecallQuery, terms []string, nowMs int64, limit int) ([]sdk.Hit, error) {
	scopes := make([]string, len(q.Scopes))
	for i, s := range q.Scopes {
		scopes[i] = string(s)
	}
	if err := d.awaitIndex(ctx); err != nil {
		return nil, err
	}
	iq := memindex.Query{Realm: q.Realm, Terms: terms, Scopes: scopes, ExcludeIDs: q.ExcludeIDs,
		Tags: q.Tags, ExcludeTags: q.ExcludeTags, NowMs: nowMs, Limit: limit,
		Vector: q.QueryVector, Model: q.VectorModel, LexicalWeight: q.Fusion.Lexical, SemanticWeight: q.Fusion.Semantic}
	iq.SinceMs, iq.UntilMs = q.WindowMillis()
	found, err := d.ix.Search(iq)
	if errors.Is(err, memindex.ErrInvalid) {
		// Only the query vector can be wrong here (its model or length).
		return nil, fmt.Errorf("%w: %w", sdk.ErrInvalid, err)
	}
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return []sdk.Hit{}, nil
	}
	seqs := make([]uint64, len(found))
	for i := range found {
		seqs[i] = found[i].Seq
	}
	list, _ := json.Marshal(seqs) // []uint64 always marshals
	bySeq := make(map[uint64]sdk.Record, len(found))
	err = d.readRecords(ctx, q.Realm, `r.seq IN (SELECT value FROM json_each(?))`, []any{string(list)},
		func(r *sdk.Record, seq int64) { bySeq[uint64(seq)] = *r })
	if err != nil {
		return nil, fmt.Errorf("read hits: %w", err)
	}
	hits := make([]sdk.Hit, 0, len(found))
	for _, h := range found {
		// A write between the search and the read may have retired it;
		// the realm and id are checked too, so a row key the index got
		// wrong can never answer another record.
		if r, ok := bySeq[h.Seq]; ok && r.Status == sdk.StatusActive && r.ID == h.ID && r.Realm == q.Realm {
			hits = append(hits, sdk.Hit{Record: r, Score: h.Score})
		}
	}
	return hits, nil
}

// indexPlaces answers places as the index names them.
func indexPlaces(places []sdk.ThreadPlace) []memindex.Place {
	out := make([]memindex.Place, len(places))
	for i, p := range places {
		out[i] = memindex.Place{Scope: string(p.Scope), Thread: p.Thread, Seq: p.Seq}
	}
	return out
}
