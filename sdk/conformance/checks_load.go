package conformance

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/memhost/memhost/sdk"
)

// checkConcurrentWriters: writers racing each other, and readers racing
// them, lose nothing and corrupt nothing; racing writes of one record
// store it once.
func checkConcurrentWriters(ctx context.Context, e *env) error {
	const writers, each, readers = 8, 8, 3
	recs := make([][]sdk.Record, writers)
	var words []string
	for w := range recs {
		for range each {
			r, word := e.record(scopeAlice)
			recs[w] = append(recs[w], r)
			words = append(words, word)
		}
	}
	ids := make([][]string, writers)
	errs := make(chan error, writers+readers)
	var writing sync.WaitGroup
	for w := range writers {
		writing.Go(func() {
			for _, r := range recs[w] {
				got, err := e.p.Remember(ctx, realmA, []sdk.Record{r})
				if err != nil || len(got) != 1 {
					errs <- fmt.Errorf("concurrent Remember: %d ids, %v", len(got), err)
					return
				}
				ids[w] = append(ids[w], got[0])
			}
		})
	}
	done := make(chan struct{})
	var reading sync.WaitGroup
	for range readers {
		reading.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := e.recall(ctx, sdk.RecallQuery{Realm: realmA, Query: commonWord, Limit: listLimit}); err != nil {
					errs <- fmt.Errorf("recall during concurrent writes: %w", err)
					return
				}
			}
		})
	}
	writing.Wait()
	close(done)
	reading.Wait()
	close(errs)
	var p problems
	for err := range errs {
		p.add(err)
	}
	if len(p) > 0 {
		return p.err()
	}
	flat := slices.Concat(ids...)
	if len(uniq(flat)) != writers*each {
		p.addf("%d concurrent writes of distinct records answered %d distinct ids", writers*each, len(uniq(flat)))
	}
	switch {
	case e.has(sdk.CapFetch):
		got, err := e.p.Get(ctx, realmA, flat)
		if err != nil {
			return fmt.Errorf("Get of every written id: %w", err)
		}
		if m := missing(flat, recordIDs(got)); len(m) > 0 {
			p.addf("after concurrent writes, Get does not find %d acknowledged records: %v", len(m), m)
		}
	case e.has(sdk.CapManifest):
		rows, err := e.fullManifest(ctx, realmA)
		if err != nil {
			return err
		}
		if m := missing(flat, rowIDs(rows)); len(m) > 0 {
			p.addf("after concurrent writes, the full manifest lacks %d acknowledged records: %v", len(m), m)
		}
	default:
		for _, w := range words {
			if ok, err := e.stored(ctx, realmA, w); err != nil {
				return err
			} else if !ok {
				p.addf("after concurrent writes, the acknowledged record holding %q is not recalled", w)
			}
		}
	}

	same, sw := e.record(scopeAlice)
	sameIDs := make([]string, writers)
	errs = make(chan error, writers)
	var racing sync.WaitGroup
	for w := range writers {
		racing.Go(func() {
			got, err := e.p.Remember(ctx, realmA, []sdk.Record{same})
			if err != nil || len(got) != 1 {
				errs <- fmt.Errorf("concurrent Remember of one record: %d ids, %v", len(got), err)
				return
			}
			sameIDs[w] = got[0]
		})
	}
	racing.Wait()
	close(errs)
	for err := range errs {
		p.add(err)
	}
	if len(p) > 0 {
		return p.err()
	}
	if len(uniq(sameIDs)) != 1 {
		p.addf("%d concurrent writes of the same record answered ids %v, want one id", writers, uniq(sameIDs))
	}
	if got, err := e.recallIDs(ctx, realmA, sw); err != nil {
		return err
	} else if len(got) != 1 {
		p.addf("after %d concurrent writes of the same record, Recall(%q) answers %d copies, want 1", writers, sw, len(got))
	}
	return p.err()
}

// durable is what a restart check writes before stopping the plugin and
// verifies after starting a new one on the same data.
type durable struct {
	kept       []sdk.Record // as written
	keptIDs    []string
	keptWords  []string
	before     []sdk.Record // as Get answered before the restart
	forgotten  string       // word of a forgotten record, "" when unsupported
	superseded string       // id of a superseded record, "" when unsupported
	replWord   string
}

func (e *env) writeDurable(ctx context.Context) (*durable, error) {
	d := &durable{}
	full, fw := e.fullRecord(scopeAlice)
	a, aw := e.record(scopeTeam)
	b, bw := e.record(sdk.RealmScope)
	d.kept, d.keptWords = []sdk.Record{full, a, b}, []string{fw, aw, bw}
	ids, err := e.remember(ctx, realmA, full, a)
	if err != nil {
		return nil, err
	}
	one, err := e.remember(ctx, realmA, b)
	if err != nil {
		return nil, err
	}
	d.keptIDs = append(ids, one...)
	if e.has(sdk.CapForget) {
		gone, gw := e.record(scopeAlice)
		ids, err := e.remember(ctx, realmA, gone)
		if err != nil {
			return nil, err
		}
		if _, err := e.p.Forget(ctx, realmA, ids); err != nil {
			return nil, fmt.Errorf("Forget: %w", err)
		}
		d.forgotten = gw
	}
	if e.has(sdk.CapSupersede) {
		old, _ := e.record(scopeBob)
		ids, err := e.remember(ctx, realmA, old)
		if err != nil {
			return nil, err
		}
		repl, rw := e.record(scopeBob)
		if _, err := e.p.Supersede(ctx, realmA, ids[0], repl); err != nil {
			return nil, fmt.Errorf("Supersede: %w", err)
		}
		d.superseded, d.replWord = ids[0], rw
	}
	if e.has(sdk.CapFetch) {
		d.before, err = e.p.Get(ctx, realmA, d.keptIDs)
		if err != nil {
			return nil, fmt.Errorf("Get: %w", err)
		}
	}
	return d, nil
}

// verifyDurable checks, on the restarted plugin, that every acknowledged
// change is there and that idempotency and writes still work.
func (e *env) verifyDurable(ctx context.Context, d *durable, how string) error {
	var p problems
	for i, w := range d.keptWords {
		got, err := e.recallIDs(ctx, realmA, w)
		if err != nil {
			return err
		}
		if !slices.Contains(got, d.keptIDs[i]) {
			p.addf("after %s, the acknowledged record %s is not recalled by its word %q", how, d.keptIDs[i], w)
		}
	}
	if e.has(sdk.CapFetch) {
		after, err := e.p.Get(ctx, realmA, d.keptIDs)
		if err != nil {
			return fmt.Errorf("Get after %s: %w", how, err)
		}
		if !slices.Equal(recordIDs(after), d.keptIDs) {
			p.addf("after %s, Get(%v) answers %v", how, d.keptIDs, recordIDs(after))
		} else {
			for i := range after {
				for _, diff := range diffRecord(d.kept[i], after[i]) {
					p.addf("after %s, record %s: %s", how, after[i].ID, diff)
				}
				if b := d.before[i]; !b.CreatedAt.Equal(after[i].CreatedAt) || !b.UpdatedAt.Equal(after[i].UpdatedAt) {
					p.addf("after %s, record %s's times changed from created %v updated %v to %v, %v",
						how, b.ID, b.CreatedAt, b.UpdatedAt, after[i].CreatedAt, after[i].UpdatedAt)
				}
			}
		}
	}
	if d.forgotten != "" {
		if ok, err := e.stored(ctx, realmA, d.forgotten); err != nil {
			return err
		} else if ok {
			p.addf("after %s, a forgotten record is back", how)
		}
	}
	if d.superseded != "" {
		if got, err := e.recallIDs(ctx, realmA, commonWord, scopeBob); err != nil {
			return err
		} else if slices.Contains(got, d.superseded) {
			p.addf("after %s, the superseded record %s is recalled again", how, d.superseded)
		}
		if got, err := e.recallIDs(ctx, realmA, d.replWord); err != nil {
			return err
		} else if len(got) != 1 {
			p.addf("after %s, the replacement of %s is recalled %d times, want once", how, d.superseded, len(got))
		}
	}
	ids, err := e.remember(ctx, realmA, d.kept[0])
	if err != nil {
		return fmt.Errorf("after %s: %w", how, err)
	}
	if ids[0] != d.keptIDs[0] {
		p.addf("after %s, writing a stored record's content again answered a new id %s, want %s", how, ids[0], d.keptIDs[0])
	}
	next, nw := e.record(scopeAlice)
	if _, err := e.remember(ctx, realmA, next); err != nil {
		return fmt.Errorf("a write after %s: %w", how, err)
	}
	if ok, err := e.stored(ctx, realmA, nw); err != nil {
		return err
	} else if !ok {
		p.addf("a record written after %s is not recalled", how)
	}
	return p.err()
}

// checkDurability: everything acknowledged survives a clean stop and a
// new plugin on the same data directory.
func checkDurability(ctx context.Context, e *env) error {
	d, err := e.writeDurable(ctx)
	if err != nil {
		return err
	}
	if err := e.restart(ctx); err != nil {
		return err
	}
	return e.verifyDurable(ctx, d, "a restart")
}

// checkCrashDurability: everything acknowledged survives SIGKILL of the
// plugin process.
func checkCrashDurability(ctx context.Context, e *env) error {
	d, err := e.writeDurable(ctx)
	if err != nil {
		return err
	}
	conn := e.inst.conn
	pid := conn.Pid()
	if pid <= 0 {
		return fmt.Errorf("the plugin's process id is unknown")
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	if err := proc.Kill(); err != nil {
		return fmt.Errorf("kill plugin process %d: %w", pid, err)
	}
	for !conn.Exited() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("plugin process %d still running after SIGKILL: %w", pid, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	conn.Close()
	e.inst, e.p = nil, nil
	if err := e.open(ctx); err != nil {
		return fmt.Errorf("restart after SIGKILL: %w", err)
	}
	return e.verifyDurable(ctx, d, "SIGKILL and a restart")
}
