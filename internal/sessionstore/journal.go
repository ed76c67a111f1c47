package sessionstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
)

// The journal makes a turn's session write one append to a file instead
// of a SQLite commit: on this kind of machine a commit's system calls
// (frames written twice each, four locks, a check of the file) were a
// sixth of a turn's cost. Changed states are appended, kept in memory as
// dirty, and merged into the sessions table in one transaction every
// mergeEvery; the merge records the journal's epoch in the same
// transaction, then starts the journal over under the next epoch. A start
// takes back a journal whose epoch the table has not merged (its sessions
// dirty again, for the next merge), so an acknowledged visit survives
// kill -9 as a SQLite commit did (both rest on the page cache; neither is
// fsynced). A journal left
// behind by a merge that committed but could not start the file over is
// skipped by its epoch: it holds nothing newer than the table.
//
// File layout: a header (journalMagic, then the epoch as 8 bytes, little
// endian), then records: a 4-byte length and a 4-byte CRC-32C of the
// payload, then the payload, a journalEntry in JSON. A record running past
// the end of the file (a write cut off by a crash) or a tail of zeros (a
// power cut) ends the journal and is cut off; a whole record that fails
// its checksum is damage, and the start refuses the file rather than
// drop what follows it.
const journalMagic = "memhost-sessions\x00\x01"

// JournalName is the journal's file name beside the state database.
const JournalName = "memhost-sessions.journal"

const (
	journalHeaderSize = len(journalMagic) + 8
	recordHeaderSize  = 8
	// maxJournalRecord bounds one record: append refuses a larger one,
	// and a larger length read back is damage. A session's state is far
	// smaller.
	maxJournalRecord = 16 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errJournalBroken: the journal could not be cut back or started over
// after a failure, or is closed; visits write to the table directly until
// a merge starts it over.
var errJournalBroken = errors.New("session journal unusable")

// errJournalFull: past the journal's bounds (a record or the file too
// large, too many sessions dirty); the visit writes the table instead.
var errJournalFull = errors.New("session journal full")

// errJournalMoved: the journal's file was deleted or replaced; appends to
// it would be lost at the next start.
var errJournalMoved = errors.New("session journal deleted or replaced")

// maxEpoch keeps an epoch within what the table's INTEGER holds, with
// room to count on.
const maxEpoch = 1 << 62

// journalEntry is one session's state as of a visit.
type journalEntry struct {
	Realm    string          `json:"r"`
	Identity string          `json:"i"`
	Session  string          `json:"s"`
	Touched  int64           `json:"t"` // Unix milliseconds
	State    json.RawMessage `json:"st"`
}

type journal struct {
	path  string
	f     *os.File
	epoch uint64
	size  int64 // bytes written, header included
	// broken is set once the file may hold a partial record it could not
	// cut off, or has no header to append under; nothing is appended
	// until a merge starts it over. closed is for good.
	broken, closed bool
	buf            bytes.Buffer
}

// openJournal opens (creating if needed) the journal at path and answers
// it with the epoch and entries it holds, in write order. A file without
// a header (new, or cut off while being started) holds epoch 0 and
// nothing.
func openJournal(path string) (*journal, []journalEntry, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	j := &journal{path: path, f: f, size: int64(len(data))}
	if len(data) < journalHeaderSize || string(data[:len(journalMagic)]) != journalMagic {
		// A header cut off while being written: the magic's start, or the
		// magic and part of the epoch.
		if len(data) > 0 && !bytes.HasPrefix([]byte(journalMagic), data) && !bytes.HasPrefix(data, []byte(journalMagic)) {
			f.Close()
			return nil, nil, fmt.Errorf("%s is not a session journal", path)
		}
		return j, nil, nil
	}
	j.epoch = binary.LittleEndian.Uint64(data[len(journalMagic):journalHeaderSize])
	if j.epoch > maxEpoch {
		f.Close()
		return nil, nil, fmt.Errorf("%s is not a session journal (epoch %d out of range)", path, j.epoch)
	}
	records := data[journalHeaderSize:]
	entries, n := decodeRecords(records)
	if tail := records[n:]; !torn(tail) {
		f.Close()
		return nil, nil, fmt.Errorf("%s is damaged at byte %d (%d sessions read before it): move it aside to start without what it holds after that point", path, journalHeaderSize+n, len(entries))
	}
	if n < len(records) {
		// Cut the torn tail off, so what is appended next is read back.
		j.size = int64(journalHeaderSize + n)
		if err := f.Truncate(j.size); err != nil {
			j.broken = true
		}
	}
	return j, entries, nil
}

// torn reports whether what follows the last whole record is what a
// crash leaves: nothing, a record running past the end, or zeros.
func torn(tail []byte) bool {
	if len(tail) < recordHeaderSize {
		return true
	}
	if n := binary.LittleEndian.Uint32(tail); uint64(n) > uint64(len(tail)-recordHeaderSize) {
		return true
	}
	return !slices.ContainsFunc(tail, func(b byte) bool { return b != 0 })
}

// decodeRecords answers the whole records at the head of data and how
// many bytes they take; it stops at the first one short or damaged.
func decodeRecords(data []byte) ([]journalEntry, int) {
	var out []journalEntry
	off := 0
	for len(data)-off >= recordHeaderSize {
		n := binary.LittleEndian.Uint32(data[off:])
		sum := binary.LittleEndian.Uint32(data[off+4:])
		if n > maxJournalRecord || len(data)-off-recordHeaderSize < int(n) {
			break
		}
		payload := data[off+recordHeaderSize : off+recordHeaderSize+int(n)]
		if crc32.Checksum(payload, castagnoli) != sum {
			break
		}
		var e journalEntry
		if err := json.Unmarshal(payload, &e); err != nil {
			break
		}
		out = append(out, e)
		off += recordHeaderSize + int(n)
	}
	return out, off
}

// encode answers e as one record, in a buffer the next call reuses.
func (j *journal) encode(e journalEntry) ([]byte, error) {
	j.buf.Reset()
	j.buf.Write(make([]byte, recordHeaderSize))
	if err := json.NewEncoder(&j.buf).Encode(e); err != nil {
		return nil, err
	}
	rec := j.buf.Bytes()
	payload := rec[recordHeaderSize:]
	binary.LittleEndian.PutUint32(rec, uint32(len(payload)))
	binary.LittleEndian.PutUint32(rec[4:], crc32.Checksum(payload, castagnoli))
	return rec, nil
}

// append writes e as one record with one write. A failed or short write
// is cut back off the file, so what follows it stays readable.
func (j *journal) append(e journalEntry) error {
	if j.broken || j.closed {
		return errJournalBroken
	}
	rec, err := j.encode(e)
	if err != nil {
		return err
	}
	if len(rec)-recordHeaderSize > maxJournalRecord {
		return errJournalFull
	}
	// One fstat, no path lookup: a file unlinked (deleted, or renamed
	// over) has no links left.
	if fi, err := j.f.Stat(); err != nil {
		return err
	} else if unlinked(fi) {
		j.broken = true // the next merge makes it again at its path
		return errJournalMoved
	}
	n, err := j.f.Write(rec)
	if err == nil {
		j.size += int64(n)
		return nil
	}
	if terr := j.f.Truncate(j.size); terr != nil {
		j.broken = true
	}
	return err
}

// restart empties the journal and starts it over under epoch.
func (j *journal) restart(epoch uint64) error {
	if j.closed {
		return errJournalBroken
	}
	// The epoch moves on even if the file cannot start over: nothing is
	// appended until it does, and then never under a merged epoch.
	j.epoch = epoch
	if err := j.f.Truncate(0); err != nil {
		j.broken = true
		return err
	}
	hdr := binary.LittleEndian.AppendUint64([]byte(journalMagic), epoch)
	if _, err := j.f.Write(hdr); err != nil {
		_ = j.f.Truncate(0) // a header cut short reads as an empty journal
		j.size, j.broken = 0, true
		return err
	}
	j.size, j.broken = int64(len(hdr)), false
	return nil
}

// reopenIfMoved opens the journal's path again when it no longer names
// the open file (deleted or replaced): appends to an unlinked file would
// be lost at the next start. The caller restarts the journal after it.
func (j *journal) reopenIfMoved() error {
	if j.closed {
		return errJournalBroken
	}
	at, err := os.Stat(j.path)
	if err == nil {
		open, ferr := j.f.Stat()
		if ferr == nil && os.SameFile(at, open) {
			return nil
		}
	}
	f, err := os.OpenFile(j.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		j.broken = true
		return err
	}
	j.f.Close()
	j.f, j.size, j.broken = f, 0, true
	return nil
}

func (j *journal) close() error {
	j.closed = true
	return j.f.Close()
}
