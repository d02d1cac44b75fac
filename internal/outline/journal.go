package outline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/bulleted-mcp/bulleted-mcp/internal/atomicfile"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// Journal keeps one repository's operations (the undo journal) where every
// process (or instance) writing to the repository sees them, and tells
// which operation some process is committing right now. The engine's
// lifecycle decides what to record and when (lifecycle.move); a journal
// only stores. Implementations: in memory (New), files (KeepOperations,
// fileJournal), and Postgres (internal/hosted). Each bounds its own I/O.
type Journal interface {
	// Save records op. whole: the operation is new to the journal or its
	// plan (writes, batches) changed; otherwise only its progress changed
	// (EncodeProgress), which the journal may append to the record it has.
	Save(ctx context.Context, op *Operation, whole bool) error
	// Get returns operation id as recorded, or nil (no error) if there is
	// none. The caller must not change it.
	Get(ctx context.Context, id string) (*Operation, error)
	// List returns the repository's operations as recorded, in any order.
	// The caller must not change them.
	List(ctx context.Context) ([]*Operation, error)
	// Remove forgets operation id (none: no error).
	Remove(ctx context.Context, id string) error
	// Claim takes the right to commit operation id, for as long as this
	// process holds it (until Release, or its death); false if another
	// process holds it. The caller that already holds it gets true.
	Claim(ctx context.Context, id string) (bool, error)
	// Release gives the claim on id up.
	Release(ctx context.Context, id string)
	// Live reports whether some process (this one included) holds the
	// claim on id.
	Live(ctx context.Context, id string) (bool, error)
}

// useJournal makes j the engine's operations journal.
func (e *Engine) useJournal(j Journal) error {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.ops = &lifecycle{j: j}
	_, err := j.List(context.Background())
	return err
}

// ---- in memory ----

// memJournal keeps operations in this process only.
type memJournal struct {
	mu   sync.Mutex
	ops  map[string]*Operation
	held map[string]bool
}

func newMemJournal() *memJournal {
	return &memJournal{ops: map[string]*Operation{}, held: map[string]bool{}}
}

func (m *memJournal) Save(_ context.Context, op *Operation, _ bool) error {
	cp := *op
	cp.Commits = slices.Clone(op.Commits)
	cp.Batches = slices.Clone(op.Batches)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ops[op.ID] = &cp
	return nil
}

func (m *memJournal) Get(_ context.Context, id string) (*Operation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ops[id], nil
}

func (m *memJournal) List(context.Context) ([]*Operation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Operation, 0, len(m.ops))
	for _, op := range m.ops {
		out = append(out, op)
	}
	return out, nil
}

func (m *memJournal) Remove(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.ops, id)
	return nil
}

func (m *memJournal) Claim(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.held[id] = true
	return true, nil
}

func (m *memJournal) Release(_ context.Context, id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.held, id)
}

func (m *memJournal) Live(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held[id], nil
}

// ---- files: one per operation in a directory ----

// fileJournal keeps the operations of the repository did in dir, one file
// per operation (dir/ID.json), so that processes sharing the directory see
// each other's operations without rewriting a shared file. The plan is
// written once, whole (replaced atomically); progress is appended to the
// same file as a short line, so a long operation's record is not rewritten
// after every batch. A process committing an operation holds dir/ID.lock
// (a file lock, released by the system when the process dies).
type fileJournal struct {
	did string
	dir string

	mu      sync.Mutex
	written map[string][]int    // operations this process wrote whole, with their batches
	files   map[string]cachedOp // parsed files by name (light operations), reused while unchanged
	held    map[string]*os.File // locks this process holds
	// The listing is kept (files) while the generation file (genName) is
	// as it was when the directory was last read (seen) or last bumped by
	// this process alone; files this process changed since are read
	// again by name (dirty). Reads counts the directory's listings (tests).
	listed bool
	seen   os.FileInfo
	dirty  map[string]bool
	Reads  int
	// Parsed counts the files read and decoded for a listing (tests).
	Parsed int
	// notes: what the journal found and set aside (records cut short),
	// told once in a tool result and on stderr; aside: the names told
	notes store.Notices
	aside map[string]bool
}

// genName is the journal directory's generation file: every change to an
// operation's file (written, appended to, removed) is followed by one byte
// appended to it, so that a process sees another's changes by its size
// (and identity: it is replaced when it passes genMax) without listing the
// directory. Appends do not change a directory's modification time, and
// that time is too coarse to tell two renames apart, hence a file of its own.
const (
	genName = "journal.gen"
	genMax  = 1 << 20
)

type cachedOp struct {
	info os.FileInfo // the file's identity, size and time when parsed
	op   *Operation  // light: writes without values (Get reads them)
}

// same reports whether info is the file c was parsed from, unchanged.
func (c cachedOp) same(info os.FileInfo) bool {
	return c.info != nil && os.SameFile(c.info, info) && c.info.ModTime().Equal(info.ModTime()) && c.info.Size() == info.Size()
}

// newFileJournal returns the file journal of did's operations in dir.
func newFileJournal(did, dir string) *fileJournal {
	return &fileJournal{did: did, dir: dir, files: map[string]cachedOp{}, held: map[string]*os.File{}, written: map[string][]int{}, dirty: map[string]bool{}, aside: map[string]bool{}}
}

func (s *fileJournal) path(id string) string { return filepath.Join(s.dir, id+".json") }

// Save appends op's progress to its file when this process wrote the file
// whole with the same batches (a file another process wrote may end in a
// line torn by a crash, after which an appended line would not be read);
// otherwise, or when the file cannot be appended to, it writes it whole.
func (s *fileJournal) Save(_ context.Context, op *Operation, whole bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := op.ID + ".json"
	if w, ok := s.written[op.ID]; ok && !whole && slices.Equal(w, op.Batches) {
		raw, err := EncodeProgress(op)
		if err != nil {
			return err
		}
		// the kept listing is brought forward with the line when it is of
		// the file as it is before the append
		before, serr := os.Stat(s.path(op.ID))
		c, kept := s.files[name]
		kept = kept && serr == nil && !s.dirty[name] && c.same(before)
		// not fsynced: the line is there for every process at once (a
		// killed process's writes stay), and only a crash of the machine
		// can take it back, which leaves the record as it was before a
		// batch landed: resume and undo look in the repository for what
		// landed after the recorded batches (undoTargets, Resume). The
		// plan, written whole before its first batch is sent, is fsynced.
		f, err := os.OpenFile(s.path(op.ID), os.O_WRONLY|os.O_APPEND, 0o600)
		if err == nil {
			_, err = f.Write(raw)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				if kept {
					cp := *c.op
					cp.State, cp.Landed, cp.Commits, cp.Reason, cp.Unknown = op.State, op.Landed, slices.Clone(op.Commits), op.Reason, op.Unknown
					s.keep(name, &cp)
				} else {
					s.changed(name)
				}
				return nil
			}
		}
		// the file is gone or could not be appended to: write it whole
	}
	if op.light {
		// a listed operation (its writes' values not read): its record
		// is read whole to be written whole with op's progress
		full, err := s.readFull(op)
		if err != nil {
			return err
		}
		op = full
	}
	raw, err := EncodeOperation(op)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	if err := atomicfile.Write(s.path(op.ID), raw, 0o600); err != nil {
		return err
	}
	s.written[op.ID] = slices.Clone(op.Batches)
	s.keep(name, lightCopy(op))
	return nil
}

// saveStaged is Save of an operation new to the journal (written whole),
// returning once its file is in place for every process and, with its
// name, on disk (atomicfile.WriteSynced: the file's and the directory's
// syncs at once, before the first batch leaves). A crash of the machine
// before it returns may leave the file cut short: List sets such a
// record aside, its operation never sent (torn).
func (s *fileJournal) saveStaged(op *Operation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, err := EncodeOperation(op)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteSynced(s.path(op.ID), raw, 0o600); err != nil {
		return err
	}
	s.written[op.ID] = slices.Clone(op.Batches)
	s.keep(op.ID+".json", lightCopy(op))
	return nil
}

// readFull is light operation op's record read whole, with op's progress
// (caller holds mu).
func (s *fileJournal) readFull(op *Operation) (*Operation, error) {
	raw, err := os.ReadFile(s.path(op.ID))
	if err != nil {
		return nil, fmt.Errorf("operation %s: its record, to write it whole: %w", op.ID, err)
	}
	full, err := decodeOp(raw)
	if err != nil {
		return nil, fmt.Errorf("operation record %s: %w", op.ID, err)
	}
	if !slices.Equal(full.Batches, op.Batches) {
		return nil, fmt.Errorf("operation %s: its record changed since it was read (batches %v, now %v)", op.ID, op.Batches, full.Batches)
	}
	full.State, full.Landed, full.Commits, full.Reason, full.Unknown = op.State, op.Landed, op.Commits, op.Reason, op.Unknown
	return full, nil
}

// keep records that this process wrote file name, whose operation is now
// op (light): the kept listing takes op as the file's, so that a listing
// right after does not read and decode it again (caller holds mu). If the
// file cannot be looked at, it is read again by name at the next listing.
func (s *fileJournal) keep(name string, op *Operation) {
	info, err := os.Stat(filepath.Join(s.dir, name))
	if err != nil {
		s.changed(name)
		return
	}
	s.files[name] = cachedOp{info: info, op: op}
	s.changed(name)
	delete(s.dirty, name)
}

// changed records that this process changed file name (caller holds mu):
// the generation file is bumped; if nobody else bumped it since this
// process last looked, the kept listing stays, with name read again.
func (s *fileJournal) changed(name string) {
	s.dirty[name] = true
	path := filepath.Join(s.dir, genName)
	for range 2 {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			s.listed = false
			return
		}
		_, werr := f.Write([]byte{'.'})
		fi, serr := f.Stat()
		f.Close()
		if werr != nil || serr != nil {
			s.listed = false
			return
		}
		if now, err := os.Stat(path); err != nil || !os.SameFile(now, fi) {
			continue // replaced meanwhile (genMax): bump the new one
		}
		if s.listed && s.seen != nil && os.SameFile(fi, s.seen) && fi.Size() == s.seen.Size()+1 {
			s.seen = fi
		}
		if fi.Size() > genMax {
			// replaced by an empty one: a new identity, which every
			// process then sees as a change
			if atomicfile.Write(path, nil, 0o600) == nil {
				s.listed = false
			}
		}
		return
	}
	s.listed = false
}

// Remove deletes op id's file.
func (s *fileJournal) Remove(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.written, id)
	if err := os.Remove(s.path(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	s.changed(id + ".json")
	return nil
}

// Claim takes op id's lock for this process; false if another process holds it.
func (s *fileJournal) Claim(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
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

// Release gives up op id's lock.
func (s *fileJournal) Release(_ context.Context, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.held[id]; ok {
		atomicfile.Unlock(f)
		f.Close()
		os.Remove(f.Name())
		delete(s.held, id)
	}
}

// Live reports whether some process (this one included) holds id's lock.
func (s *fileJournal) Live(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	_, mine := s.held[id]
	s.mu.Unlock()
	if mine {
		return true, nil
	}
	f, err := os.OpenFile(filepath.Join(s.dir, id+".lock"), os.O_RDWR, 0o600)
	if err != nil {
		return false, nil // no lock file: nobody holds it
	}
	defer f.Close()
	ok, err := atomicfile.TryLock(f)
	if err != nil {
		return false, nil
	}
	if ok {
		atomicfile.Unlock(f)
		return false, nil
	}
	return true, nil
}

// List returns every operation file of the repository, light (each
// write's op, collection and key: lifecycle.full reads the rest with Get).
// What this process wrote is kept as it wrote it. The directory is
// read once, then again only when another process changed it (genName);
// the files this process changed are read again by name, and a file is
// parsed again only when its size or time changed.
func (s *fileJournal) List(context.Context) ([]*Operation, error) {
	gen, _ := os.Stat(filepath.Join(s.dir, genName))
	s.mu.Lock()
	if s.listed && sameGen(gen, s.seen) {
		defer s.mu.Unlock()
		for name := range s.dirty {
			if err := s.refresh(name); err != nil {
				return nil, err
			}
			delete(s.dirty, name)
		}
		var ops []*Operation
		for _, c := range s.files {
			if c.op.DID == s.did {
				ops = append(ops, c.op)
			}
		}
		return ops, nil
	}
	s.Reads++
	s.mu.Unlock()
	ops, err := s.listDir()
	if err == nil {
		s.mu.Lock()
		s.listed, s.seen = true, gen
		clear(s.dirty)
		s.mu.Unlock()
	}
	return ops, err
}

func sameGen(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.Size() == b.Size()
}

// refresh reads file name again, which this process changed (caller
// holds mu).
func (s *fileJournal) refresh(name string) error {
	info, err := os.Stat(filepath.Join(s.dir, name))
	if err != nil {
		delete(s.files, name)
		return nil
	}
	raw, err := os.ReadFile(filepath.Join(s.dir, name))
	if err != nil {
		delete(s.files, name)
		return nil
	}
	s.Parsed++
	op, err := decodeOpLight(raw)
	if err != nil && torn(raw) {
		delete(s.files, name)
		s.setAside(name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("operation record %s: %w", name, err)
	}
	s.files[name] = cachedOp{info: info, op: op}
	return nil
}

// torn reports whether raw, a record that could not be decoded, is one
// cut short: its first line (the plan, written whole before its first
// batch leaves) ends before its JSON value does, or holds zeros. A crash
// of the machine while the record was written leaves one
// (atomicfile.WriteSynced): its operation sent nothing. Any other damage
// is not taken for it.
func torn(raw []byte) bool {
	line, _, whole := bytes.Cut(raw, []byte{'\n'})
	if bytes.IndexByte(line, 0) >= 0 {
		return true
	}
	if whole {
		// the plan's line ended: written whole (progress lines are
		// appended only after it is on disk), damaged otherwise
		return false
	}
	var v json.RawMessage
	err := json.NewDecoder(bytes.NewReader(line)).Decode(&v)
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// setAside moves torn record name out of the journal (name.torn) and says
// so, once (caller holds mu). Another process that set it aside first
// says it.
func (s *fileJournal) setAside(name string) {
	path := filepath.Join(s.dir, name)
	err := os.Rename(path, path+".torn")
	if s.aside[name] || errors.Is(err, os.ErrNotExist) {
		return
	}
	s.aside[name] = true
	const why = "a crash of the machine leaves one while an operation is being recorded: that operation sent nothing (its record is on disk, whole, before its first batch leaves), so nothing of it is in the repository; any points its first batch was charged stay counted in the write budget until they leave its rolling hour and day"
	if err != nil {
		s.notes.Add(fmt.Sprintf("The operations journal holds a record cut short, %s, that could not be set aside (%v): it is left out. %s.", path, err, upperFirst(why)))
		return
	}
	s.notes.Add(fmt.Sprintf("The operations journal held a record cut short, %s, as %s. The record was set aside as %s.torn.", path, why, path))
}

// upperFirst is s with its first letter upper case.
func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// listDir reads the directory and every file that changed.
func (s *fileJournal) listDir() ([]*Operation, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var ops []*Operation
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
		if !ok || !c.same(info) {
			raw, err := os.ReadFile(filepath.Join(s.dir, name))
			if err != nil {
				continue // removed meanwhile
			}
			op, err := decodeOpLight(raw)
			if err != nil && torn(raw) {
				s.mu.Lock()
				s.setAside(name)
				s.mu.Unlock()
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("operation record %s: %w", name, err)
			}
			c = cachedOp{info: info, op: op}
			s.mu.Lock()
			s.Parsed++
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
	return ops, nil
}

// whole reads light operation op's record whole: the writes' values from
// its file, the records they replaced as this process kept them when it
// saved the operation (else from the file too). Nil (no error) if there
// is no record of it.
func (s *fileJournal) whole(ctx context.Context, op *Operation) (*Operation, error) {
	if op.Prev == nil || len(op.Prev) != len(op.Writes) {
		return s.Get(ctx, op.ID)
	}
	if !slices.ContainsFunc(op.Writes, func(w store.Write) bool { return w.Op != store.Delete }) {
		// deletes only: no value to read, the records they replaced kept
		cp := *op
		cp.Writes, cp.Prev, cp.light = slices.Clone(op.Writes), slices.Clone(op.Prev), false
		return &cp, nil
	}
	raw, err := os.ReadFile(s.path(op.ID))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	full, err := decodeOpValues(raw, op.Prev)
	if err != nil {
		return nil, fmt.Errorf("operation record %s: %w", op.ID, err)
	}
	if full.DID != s.did {
		return nil, nil
	}
	return full, nil
}

// Get reads operation id from its file, bypassing the cache.
func (s *fileJournal) Get(_ context.Context, id string) (*Operation, error) {
	raw, err := os.ReadFile(s.path(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	op, err := decodeOp(raw)
	if err != nil {
		return nil, fmt.Errorf("operation record %s: %w", id, err)
	}
	if op.DID != s.did {
		return nil, nil
	}
	return op, nil
}
