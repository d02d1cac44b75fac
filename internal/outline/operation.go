package outline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/bluesky-social/indigo/atproto/atdata"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Operation states, as recorded (lifecycle.go has the phases they stand
// for and the transitions between them).
const (
	// opPlanned: made from a plan, not yet recorded (never in a journal).
	opPlanned = "planned"
	// OpRunning: a process is committing the operation's batches (or was,
	// and was killed: then it is reported as incomplete).
	OpRunning = "running"
	// OpIncomplete: some batches landed, then it stopped; resume or undo it.
	OpIncomplete = "incomplete"
	// OpDone: every batch landed.
	OpDone = "done"
	// OpUndone: rolled back by an undo.
	OpUndone = "undone"
)

// JournalSize is how many finished operations are kept for undo.
const JournalSize = 100

// Operation is one write intent as committed: the whole plan (every write,
// the record it replaced, and the batch boundaries), recorded durably
// before the first batch is sent, and how many batches have landed.
type Operation struct {
	ID      string
	DID     string
	Summary string
	Started time.Time
	State   string
	Writes  []store.Write
	Prev    []*store.Record // the record each write replaced (nil: none)
	Batches []int           // end (exclusive) of each batch in Writes
	Landed  int             // batches known to be committed
	Commits []string        // commit CIDs of the landed batches (when known)
	Reason  string          // why it stopped, for an incomplete operation
	// Unknown: the batch after the landed ones may have landed too (the
	// repository could not be read back); resume and undo find out.
	Unknown bool
	Undoes  []string // the operations this one rolls back
	Keys    []string // record keys minted while planning it
	// Around: the siblings its bullets were placed among when it was
	// planned (nil: not recorded, an operation of an older version)
	Around []around

	// dirty: its writes or batches changed since it was last recorded,
	// so the next step records it whole
	dirty bool
	// light: read for a listing (fileJournal's kept operations): each
	// write's op, collection and record key only, no values and no Prev;
	// lifecycle.full reads the whole record when it is resumed or undone
	light bool
}

// lightCopy is op as a journal keeps it listed: its writes without their
// values (what report, ownKeys and the lifecycle read), nothing shared
// with op that op's owner may change.
func lightCopy(op *Operation) *Operation {
	cp := *op
	cp.Writes = make([]store.Write, len(op.Writes))
	for i, w := range op.Writes {
		cp.Writes[i] = store.Write{Op: w.Op, Collection: internColl(w.Collection), RKey: w.RKey}
	}
	// the records replaced are kept as they are (compact values, most
	// shared with the tree): an undo then reads only the writes' values
	cp.Prev = slices.Clone(op.Prev)
	cp.Batches = slices.Clone(op.Batches)
	cp.Commits = slices.Clone(op.Commits)
	cp.Undoes = slices.Clone(op.Undoes)
	cp.Keys = nil
	cp.Around = slices.Clone(op.Around)
	cp.dirty, cp.light = false, true
	return &cp
}

// internColl is the lexicon's own string for a known collection name, so
// that listed operations do not hold a copy of it per write.
func internColl(c string) string {
	for _, k := range []string{lexicon.Node, lexicon.Mirror, lexicon.Note, lexicon.Comment, lexicon.CommentPolicy, lexicon.Outline} {
		if c == k {
			return k
		}
	}
	return c
}

// batch returns the writes of batch i.
func (op *Operation) batch(i int) []store.Write {
	start := 0
	if i > 0 {
		start = op.Batches[i-1]
	}
	return op.Writes[start:op.Batches[i]]
}

// landedWrites is how many writes are in the landed batches.
func (op *Operation) landedWrites() int {
	if op.Landed == 0 {
		return 0
	}
	return op.Batches[op.Landed-1]
}

// split halves batch i (at a record-key boundary); false if it cannot be.
func (op *Operation) split(i int) bool {
	start := 0
	if i > 0 {
		start = op.Batches[i-1]
	}
	end := op.Batches[i]
	if end-start < 2 {
		return false
	}
	mid := start + (end-start)/2
	for mid > start && op.Writes[mid].RKey == op.Writes[mid-1].RKey {
		mid--
	}
	if mid == start {
		mid = start + (end-start)/2
		for mid < end && op.Writes[mid].RKey == op.Writes[mid-1].RKey {
			mid++
		}
		if mid == end {
			return false
		}
	}
	op.Batches = append(op.Batches[:i], append([]int{mid}, op.Batches[i:]...)...)
	op.dirty = true
	return true
}

// OpReport is what an agent is told about an operation.
type OpReport struct {
	ID           string `json:"id"`
	Summary      string `json:"summary"`
	State        string `json:"state"`
	Started      string `json:"started"`
	Batches      int    `json:"batches"`
	Landed       int    `json:"batchesLanded"`
	Writes       int    `json:"writes"`
	LandedWrites int    `json:"writesLanded"`
	Reason       string `json:"reason,omitempty"`
	// UnknownWrites: writes of a batch whose outcome is unknown (it may
	// have landed; resume or undo finds out).
	UnknownWrites int      `json:"writesUnknown,omitempty"`
	Created       []string `json:"createdLanded,omitempty"` // record keys of bullets created by the landed batches
	Next          string   `json:"next,omitempty"`
	// RetryAt (UTC) and RetryInSeconds: when the write budget or a server
	// pause lets it go on, if that is what stopped it (set by stop).
	RetryAt        string `json:"retryAt,omitempty"`
	RetryInSeconds int64  `json:"retryInSeconds,omitempty"`
}

// report describes op.
func (op *Operation) report() OpReport {
	r := OpReport{ID: op.ID, Summary: op.Summary, State: op.State, Started: op.Started.UTC().Format(time.RFC3339),
		Batches: len(op.Batches), Landed: op.Landed, Writes: len(op.Writes), LandedWrites: op.landedWrites(), Reason: op.Reason}
	if op.Unknown && op.Landed < len(op.Batches) {
		r.UnknownWrites = len(op.batch(op.Landed))
	}
	for _, w := range op.Writes[:r.LandedWrites] {
		if w.Op == store.Create && (w.Collection == lexicon.Node || w.Collection == lexicon.Mirror) && len(r.Created) < 50 {
			r.Created = append(r.Created, w.RKey)
		}
	}
	if op.State == OpIncomplete || op.State == OpRunning {
		r.Next = fmt.Sprintf("call operations with resume=%s to finish it against the current outline, or undo with operation=%s to roll back exactly what landed", op.ID, op.ID)
	}
	return r
}

// ---- the record of an operation (a journal's file or row body) ----

type opFile struct {
	ID      string        `json:"id"`
	DID     string        `json:"did"`
	Summary string        `json:"summary"`
	Started time.Time     `json:"started"`
	State   string        `json:"state"`
	Writes  []opWriteJSON `json:"writes"`
	Batches []int         `json:"batches"`
	Landed  int           `json:"landed"`
	Commits []string      `json:"commits,omitempty"`
	Reason  string        `json:"reason,omitempty"`
	Unknown bool          `json:"unknown,omitempty"`
	Undoes  []string      `json:"undoes,omitempty"`
	Around  []around      `json:"around"` // absent in older files: nil
}

type opWriteJSON struct {
	Op         store.Op        `json:"op"`
	Collection string          `json:"collection"`
	RKey       string          `json:"rkey"`
	Value      json.RawMessage `json:"value,omitempty"`
	Prev       json.RawMessage `json:"prev,omitempty"` // AT Protocol JSON of the replaced record
	PrevCID    string          `json:"prevCid,omitempty"`
}

// EncodeOperation is op's whole record: one JSON line (with its newline).
// A journal may append EncodeProgress lines to it; DecodeOperation reads
// both.
func EncodeOperation(op *Operation) ([]byte, error) {
	raw, err := encodeOp(op)
	if err != nil {
		return nil, err
	}
	return append(raw, '\n'), nil
}

// EncodeProgress is what changes while op runs (state, batches landed,
// commits, reason), as one JSON line to append to its record.
func EncodeProgress(op *Operation) ([]byte, error) {
	raw, err := json.Marshal(opDelta{State: op.State, Landed: op.Landed, Commits: op.Commits, Reason: op.Reason, Unknown: op.Unknown})
	if err != nil {
		return nil, err
	}
	return append(raw, '\n'), nil
}

// DecodeOperation reads a record EncodeOperation wrote, with the progress
// lines appended since (a torn last line reads as the state before it).
func DecodeOperation(raw []byte) (*Operation, error) { return decodeOp(raw) }

func encodeOp(op *Operation) ([]byte, error) {
	f := opFile{ID: op.ID, DID: op.DID, Summary: op.Summary, Started: op.Started, State: op.State,
		Batches: op.Batches, Landed: op.Landed, Commits: op.Commits, Reason: op.Reason, Unknown: op.Unknown, Undoes: op.Undoes,
		Around: op.Around, Writes: make([]opWriteJSON, len(op.Writes))}
	for i, w := range op.Writes {
		jw := opWriteJSON{Op: w.Op, Collection: w.Collection, RKey: w.RKey}
		if w.Value != nil {
			raw, err := json.Marshal(w.Value) // atdata values marshal to AT Protocol JSON
			if err != nil {
				return nil, err
			}
			jw.Value = raw
		}
		if p := op.Prev[i]; p != nil {
			raw, err := json.Marshal(p.Value)
			if err != nil {
				return nil, err
			}
			jw.Prev, jw.PrevCID = raw, p.CID
		}
		f.Writes[i] = jw
	}
	return json.Marshal(f)
}

// opDelta is what changed while an operation ran, appended to its file.
type opDelta struct {
	State   string   `json:"state"`
	Landed  int      `json:"landed"`
	Commits []string `json:"commits,omitempty"`
	Reason  string   `json:"reason,omitempty"`
	Unknown bool     `json:"unknown,omitempty"`
}

// opFileLight is what a listing reads of a record: its writes' op,
// collection and key (the values are skipped, not decoded).
type opFileLight struct {
	ID      string    `json:"id"`
	DID     string    `json:"did"`
	Summary string    `json:"summary"`
	Started time.Time `json:"started"`
	State   string    `json:"state"`
	Writes  []struct {
		Op         store.Op `json:"op"`
		Collection string   `json:"collection"`
		RKey       string   `json:"rkey"`
	} `json:"writes"`
	Batches []int    `json:"batches"`
	Landed  int      `json:"landed"`
	Commits []string `json:"commits,omitempty"`
	Reason  string   `json:"reason,omitempty"`
	Unknown bool     `json:"unknown,omitempty"`
	Undoes  []string `json:"undoes,omitempty"`
}

// operation is the operation f's first line and the lines appended after
// it (dec, past the first) record, without its writes.
func (f *opFileLight) operation(dec *json.Decoder) *Operation {
	d := progress(dec, opDelta{State: f.State, Landed: f.Landed, Commits: f.Commits, Reason: f.Reason, Unknown: f.Unknown})
	return &Operation{ID: f.ID, DID: f.DID, Summary: f.Summary, Started: f.Started, State: d.State,
		Batches: f.Batches, Landed: d.Landed, Commits: d.Commits, Reason: d.Reason, Unknown: d.Unknown, Undoes: f.Undoes}
}

// progress reads the lines appended to a record after its first: the last
// whole one is its state (a line torn by a crash ends them; the batch it
// recorded is found landed again by resume or undo, which read the
// repository); d is the first line's.
func progress(dec *json.Decoder, d opDelta) opDelta {
	for {
		var next opDelta
		if err := dec.Decode(&next); err != nil {
			return d
		}
		d = next
	}
}

// consistent checks a decoded operation's batch record against its writes.
func consistent(op *Operation) error {
	if op.Landed < 0 || op.Landed > len(op.Batches) || (len(op.Batches) > 0 && op.Batches[len(op.Batches)-1] != len(op.Writes)) {
		return errors.New("inconsistent batch record")
	}
	return nil
}

// decodeOpLight reads a record as decodeOp does, but each write's op,
// collection and key only (a light operation, see Operation.light).
func decodeOpLight(raw []byte) (*Operation, error) {
	var f opFileLight
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	op := f.operation(dec)
	op.Writes, op.light = make([]store.Write, len(f.Writes)), true
	for i, w := range f.Writes {
		op.Writes[i] = store.Write{Op: w.Op, Collection: internColl(w.Collection), RKey: w.RKey}
	}
	return op, consistent(op)
}

// decodeOpValues reads a record's writes with their values, taking the
// records they replaced from prev (kept by the journal that wrote it)
// rather than decoding them again: the whole operation, with the record's
// progress.
func decodeOpValues(raw []byte, prev []*store.Record) (*Operation, error) {
	var f struct {
		opFileLight
		Writes []struct {
			Op         store.Op        `json:"op"`
			Collection string          `json:"collection"`
			RKey       string          `json:"rkey"`
			Value      json.RawMessage `json:"value,omitempty"`
		} `json:"writes"`
		Around []around `json:"around"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	op := f.operation(dec)
	if len(prev) != len(f.Writes) {
		return nil, fmt.Errorf("%d write(s) recorded, %d kept", len(f.Writes), len(prev))
	}
	op.Around, op.Writes, op.Prev = f.Around, make([]store.Write, len(f.Writes)), slices.Clone(prev)
	for i, jw := range f.Writes {
		w := store.Write{Op: jw.Op, Collection: jw.Collection, RKey: jw.RKey}
		if len(jw.Value) > 0 {
			v, err := atdata.UnmarshalJSON(jw.Value)
			if err != nil {
				return nil, err
			}
			w.Value = v
		}
		op.Writes[i] = w
	}
	return op, consistent(op)
}

func decodeOp(raw []byte) (*Operation, error) {
	var f opFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	// the lines appended since: the last whole one is the state (a line
	// torn by a crash ends them; the batch it recorded is found landed
	// again by resume or undo, which read the repository)
	d := progress(dec, opDelta{State: f.State, Landed: f.Landed, Commits: f.Commits, Reason: f.Reason, Unknown: f.Unknown})
	f.State, f.Landed, f.Commits, f.Reason, f.Unknown = d.State, d.Landed, d.Commits, d.Reason, d.Unknown
	op := &Operation{ID: f.ID, DID: f.DID, Summary: f.Summary, Started: f.Started, State: f.State,
		Batches: f.Batches, Landed: f.Landed, Commits: f.Commits, Reason: f.Reason, Unknown: f.Unknown, Undoes: f.Undoes,
		Around: f.Around, Writes: make([]store.Write, len(f.Writes)), Prev: make([]*store.Record, len(f.Writes))}
	for i, jw := range f.Writes {
		w := store.Write{Op: jw.Op, Collection: jw.Collection, RKey: jw.RKey}
		if len(jw.Value) > 0 {
			v, err := atdata.UnmarshalJSON(jw.Value)
			if err != nil {
				return nil, err
			}
			w.Value = v
		}
		op.Writes[i] = w
		if len(jw.Prev) > 0 {
			m, err := atdata.UnmarshalJSON(jw.Prev)
			if err != nil {
				return nil, err
			}
			v, err := store.ValueOf(m)
			if err != nil {
				return nil, err
			}
			op.Prev[i] = &store.Record{Collection: jw.Collection, RKey: jw.RKey, CID: jw.PrevCID, Value: v}
		}
	}
	return op, consistent(op)
}
