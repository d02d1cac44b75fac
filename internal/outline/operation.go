package outline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bluesky-social/indigo/atproto/atdata"

	"github.com/bulleted-mcp/bulleted-mcp/internal/atomicfile"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Operation states.
const (
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
	Around []Around
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

// Report describes op.
func (op *Operation) Report() OpReport {
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

// ---- persistence: one file per operation in DIR/ops ----

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
	Around  []Around      `json:"around"` // absent in older files: nil
}

type opWriteJSON struct {
	Op         store.Op        `json:"op"`
	Collection string          `json:"collection"`
	RKey       string          `json:"rkey"`
	Value      json.RawMessage `json:"value,omitempty"`
	Prev       json.RawMessage `json:"prev,omitempty"` // AT Protocol JSON of the replaced record
	PrevCID    string          `json:"prevCid,omitempty"`
}

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

func decodeOp(raw []byte) (*Operation, error) {
	var f opFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	// the lines appended since: the last whole one is the state (a line
	// torn by a crash ends them; the batch it recorded is found landed
	// again by resume or undo, which read the repository)
	for {
		var d opDelta
		if err := dec.Decode(&d); err != nil {
			break
		}
		f.State, f.Landed, f.Commits, f.Reason, f.Unknown = d.State, d.Landed, d.Commits, d.Reason, d.Unknown
	}
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
			v, err := atdata.UnmarshalJSON(jw.Prev)
			if err != nil {
				return nil, err
			}
			op.Prev[i] = &store.Record{Collection: jw.Collection, RKey: jw.RKey, CID: jw.PrevCID, Value: v}
		}
	}
	if op.Landed < 0 || op.Landed > len(op.Batches) || (len(op.Batches) > 0 && op.Batches[len(op.Batches)-1] != len(op.Writes)) {
		return nil, errors.New("inconsistent batch record")
	}
	return op, nil
}

// opStore keeps operations: in memory, and with a directory as one file per
// operation (DIR/ID.json, replaced atomically), so that processes sharing
// the directory see each other's operations without rewriting a shared
// file. A process committing an operation holds DIR/ID.lock; an operation
// marked running whose lock is free belongs to a process that died.
type opStore struct {
	did string
	dir string // "" = memory only

	mu      sync.Mutex
	mem     map[string]*Operation // memory-only store, and this process's live operations
	written map[string][]int      // operations whose plan this process wrote whole, with their batches
	files   map[string]cachedOp   // parsed files by name, reused while unchanged
	held    map[string]*os.File   // locks this process holds
}

type cachedOp struct {
	mod  time.Time
	size int64
	op   *Operation
}

func newOpStore(did, dir string) *opStore {
	return &opStore{did: did, dir: dir, mem: map[string]*Operation{}, files: map[string]cachedOp{}, held: map[string]*os.File{}, written: map[string][]int{}}
}

func (s *opStore) path(id string) string { return filepath.Join(s.dir, id+".json") }

// save records op (durably, with a directory). The plan is written once,
// whole; what changes while it runs (batches landed, state) is appended to
// the same file as a short line, so a long operation's record is not
// rewritten after every batch.
func (s *opStore) save(op *Operation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mem[op.ID] = op
	if s.dir == "" {
		return nil
	}
	if w, ok := s.written[op.ID]; ok && slices.Equal(w, op.Batches) {
		raw, err := json.Marshal(opDelta{State: op.State, Landed: op.Landed, Commits: op.Commits, Reason: op.Reason, Unknown: op.Unknown})
		if err != nil {
			return err
		}
		f, err := os.OpenFile(s.path(op.ID), os.O_WRONLY|os.O_APPEND, 0o600)
		if err == nil {
			_, err = f.Write(append(raw, '\n'))
			if err == nil {
				err = f.Sync()
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				return nil
			}
		}
		// the file is gone or could not be appended to: write it whole
	}
	raw, err := encodeOp(op)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	if err := atomicfile.Write(s.path(op.ID), append(raw, '\n'), 0o600); err != nil {
		return err
	}
	s.written[op.ID] = slices.Clone(op.Batches)
	return nil
}

// rewrite makes the next save of op write its record whole: its writes
// changed (a resume placed them anew), which the short lines appended
// while it runs do not carry.
func (s *opStore) rewrite(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.written, id)
}

// remove forgets op (a plan that never sent anything).
func (s *opStore) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mem, id)
	delete(s.written, id)
	if s.dir != "" {
		os.Remove(s.path(id))
	}
}

// claim takes op id's lock for this process; false if another process holds it.
func (s *opStore) claim(id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir == "" {
		return true, nil
	}
	if _, ok := s.held[id]; ok {
		return true, nil
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return false, err
	}
	f, err := os.OpenFile(filepath.Join(s.dir, id+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return false, err
	}
	ok, err := atomicfile.TryLock(f)
	if err != nil || !ok {
		f.Close()
		return false, err
	}
	s.held[id] = f
	return true, nil
}

// release gives up op id's lock.
func (s *opStore) release(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.held[id]; ok {
		atomicfile.Unlock(f)
		f.Close()
		os.Remove(f.Name())
		delete(s.held, id)
	}
}

// live reports whether some process (this one included) is committing id.
func (s *opStore) live(id string) bool {
	s.mu.Lock()
	_, mine := s.held[id]
	s.mu.Unlock()
	if mine || s.dir == "" {
		return mine
	}
	f, err := os.OpenFile(filepath.Join(s.dir, id+".lock"), os.O_RDWR, 0o600)
	if err != nil {
		return false // no lock file: nobody holds it
	}
	defer f.Close()
	ok, err := atomicfile.TryLock(f)
	if err != nil {
		return false
	}
	if ok {
		atomicfile.Unlock(f)
		return false
	}
	return true
}

// list returns every operation of this repository, oldest first (IDs are
// TIDs). Operations marked running whose process is gone come back as
// incomplete.
func (s *opStore) list() ([]*Operation, error) {
	var ops []*Operation
	if s.dir == "" {
		s.mu.Lock()
		for _, op := range s.mem {
			ops = append(ops, op)
		}
		s.mu.Unlock()
	} else {
		entries, err := os.ReadDir(s.dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		seen := map[string]bool{}
		for _, ent := range entries {
			name := ent.Name()
			if !strings.HasSuffix(name, ".json") {
				continue
			}
			info, err := ent.Info()
			if err != nil {
				continue
			}
			seen[name] = true
			s.mu.Lock()
			c, ok := s.files[name]
			s.mu.Unlock()
			if !ok || !c.mod.Equal(info.ModTime()) || c.size != info.Size() {
				raw, err := os.ReadFile(filepath.Join(s.dir, name))
				if err != nil {
					continue // removed meanwhile
				}
				op, err := decodeOp(raw)
				if err != nil {
					return nil, fmt.Errorf("operation record %s: %w", name, err)
				}
				c = cachedOp{mod: info.ModTime(), size: info.Size(), op: op}
				s.mu.Lock()
				s.files[name] = c
				s.mu.Unlock()
			}
			if c.op.DID == s.did {
				ops = append(ops, c.op)
			}
		}
		s.mu.Lock()
		for name := range s.files {
			if !seen[name] {
				delete(s.files, name)
			}
		}
		s.mu.Unlock()
	}
	slices.SortFunc(ops, func(a, b *Operation) int { return strings.Compare(a.ID, b.ID) })
	for i, op := range ops {
		if op.State == OpRunning && !s.live(op.ID) {
			// it may have finished or stopped since it was read: read it
			// again, now that its lock is known to be free
			if fresh := s.reread(op.ID); fresh != nil && fresh.State != OpRunning {
				ops[i] = fresh
				continue
			}
			cp := *op
			cp.State = OpIncomplete
			if cp.Reason == "" {
				cp.Reason = "the process committing it stopped (killed or crashed)"
			}
			ops[i] = &cp
		}
	}
	return ops, nil
}

// reread reads operation id from its file, bypassing the cache (nil if
// it cannot be read).
func (s *opStore) reread(id string) *Operation {
	if s.dir == "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.mem[id]
	}
	raw, err := os.ReadFile(s.path(id))
	if err != nil {
		return nil
	}
	op, err := decodeOp(raw)
	if err != nil {
		return nil
	}
	return op
}

// get returns operation id.
func (s *opStore) get(id string) (*Operation, error) {
	ops, err := s.list()
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		if op.ID == id {
			cp := *op
			return &cp, nil
		}
	}
	return nil, fail(ErrNodeNotFound, "call operations to see the operations this server recorded", "no operation %s", id)
}

// prune removes the oldest finished operations beyond JournalSize.
func (s *opStore) prune() {
	ops, err := s.list()
	if err != nil {
		return
	}
	var finished []*Operation
	for _, op := range ops {
		if op.State == OpDone || op.State == OpUndone {
			finished = append(finished, op)
		}
	}
	for len(finished) > JournalSize {
		s.remove(finished[0].ID)
		finished = finished[1:]
	}
}
