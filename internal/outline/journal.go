package outline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/atomicfile"
)

// Journal keeps one repository's operations (the undo journal) where every
// process (or instance) writing to the repository sees them, and tells
// which operation some process is committing right now. The engine's
// lifecycle decides what to record and when (lifecycle.move); a journal
// only stores. Implementations: in memory (New), files (KeepOperations,
// FileJournal), and Postgres (internal/hosted). Each bounds its own I/O.
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

// UseJournal makes j the engine's operations journal.
func (e *Engine) UseJournal(j Journal) error {
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

// FileJournal keeps the operations of the repository did in dir, one file
// per operation (dir/ID.json), so that processes sharing the directory see
// each other's operations without rewriting a shared file. The plan is
// written once, whole (replaced atomically); progress is appended to the
// same file as a short line, so a long operation's record is not rewritten
// after every batch. A process committing an operation holds dir/ID.lock
// (a file lock, released by the system when the process dies).
type FileJournal struct {
	did string
	dir string

	mu      sync.Mutex
	written map[string][]int    // operations this process wrote whole, with their batches
	files   map[string]cachedOp // parsed files by name, reused while unchanged
	held    map[string]*os.File // locks this process holds
}

type cachedOp struct {
	mod  time.Time
	size int64
	op   *Operation
}

// NewFileJournal returns the file journal of did's operations in dir.
func NewFileJournal(did, dir string) *FileJournal {
	return &FileJournal{did: did, dir: dir, files: map[string]cachedOp{}, held: map[string]*os.File{}, written: map[string][]int{}}
}

func (s *FileJournal) path(id string) string { return filepath.Join(s.dir, id+".json") }

// Save appends op's progress to its file when this process wrote the file
// whole with the same batches (a file another process wrote may end in a
// line torn by a crash, after which an appended line would not be read);
// otherwise, or when the file cannot be appended to, it writes it whole.
func (s *FileJournal) Save(_ context.Context, op *Operation, whole bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.written[op.ID]; ok && !whole && slices.Equal(w, op.Batches) {
		raw, err := EncodeProgress(op)
		if err != nil {
			return err
		}
		f, err := os.OpenFile(s.path(op.ID), os.O_WRONLY|os.O_APPEND, 0o600)
		if err == nil {
			_, err = f.Write(raw)
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
	return nil
}

// Remove deletes op id's file.
func (s *FileJournal) Remove(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.written, id)
	if err := os.Remove(s.path(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Claim takes op id's lock for this process; false if another process holds it.
func (s *FileJournal) Claim(_ context.Context, id string) (bool, error) {
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
func (s *FileJournal) Release(_ context.Context, id string) {
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
func (s *FileJournal) Live(_ context.Context, id string) (bool, error) {
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

// List reads every operation file of the repository (parsed files are
// reused while their size and time are unchanged).
func (s *FileJournal) List(context.Context) ([]*Operation, error) {
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
	return ops, nil
}

// Get reads operation id from its file, bypassing the cache.
func (s *FileJournal) Get(_ context.Context, id string) (*Operation, error) {
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
