package store

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/atdata"
	atrepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/repo/mst"
	"github.com/bluesky-social/indigo/atproto/syntax"
	legacy "github.com/bluesky-social/indigo/repo"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	cbor "github.com/ipfs/go-ipld-cbor"

	"github.com/bulleted-mcp/bulleted-mcp/internal/atomicfile"
)

// Prefix of the collections this server reads.
const Prefix = "app.bulleted."

// memBlocks is a CID-keyed block store over the block log: blocks on disk
// are found by an index of where they are in the log and read when needed
// (so an open store holds an index entry per block, not the blocks); blocks
// added since the last flush, and those read while a commit loads, are in
// memory.
type memBlocks struct {
	m       map[cid.Cid]blocks.Block
	pending []blocks.Block
	log     *os.File
	at      spans // blocks in the log
	// the part of the log read for the commit being loaded (from loadAt),
	// until it is loaded: its blocks are served from it, not read again
	load   []byte
	loadAt int64
	unmap  func() // releases load when it is the mapped log
}

// span is where a block's bytes are in the log.
type span struct {
	off int64
	n   uint32
}

func newBlocks(log *os.File) *memBlocks {
	return &memBlocks{m: map[cid.Cid]blocks.Block{}, at: newSpans(0), log: log}
}

func (b *memBlocks) Get(_ context.Context, c cid.Cid) (blocks.Block, error) {
	if blk, ok := b.m[c]; ok {
		return blk, nil
	}
	data, err := b.raw(c)
	if err != nil {
		return nil, err
	}
	return blocks.NewBlockWithCid(data, c)
}

// raw returns block c's bytes (checked against its CID when the log was
// read); callers must not modify them.
func (b *memBlocks) raw(c cid.Cid) ([]byte, error) {
	if blk, ok := b.m[c]; ok {
		return blk.RawData(), nil
	}
	sp, ok := b.at.get(c)
	if !ok || b.log == nil {
		return nil, fmt.Errorf("block %s not found", c)
	}
	if rel := sp.off - b.loadAt; b.load != nil && rel >= 0 && rel+int64(sp.n) <= int64(len(b.load)) {
		return b.load[rel : rel+int64(sp.n) : rel+int64(sp.n)], nil
	}
	data := make([]byte, sp.n)
	if _, err := b.log.ReadAt(data, sp.off); err != nil {
		return nil, fmt.Errorf("block %s: %w", c, err)
	}
	return data, nil
}

func (b *memBlocks) has(c cid.Cid) bool {
	if _, ok := b.m[c]; ok {
		return true
	}
	_, ok := b.at.get(c)
	return ok
}

func (b *memBlocks) Put(_ context.Context, blk blocks.Block) error {
	if b.has(blk.Cid()) {
		return nil
	}
	b.m[blk.Cid()] = blk
	b.pending = append(b.pending, blk)
	return nil
}

// evict drops from memory the part of the log read for a load.
func (b *memBlocks) evict() {
	b.load = nil
	if b.unmap != nil {
		b.unmap()
		b.unmap = nil
	}
}

var _ cbor.IpldBlockstore = (*memBlocks)(nil)

// rawRecord hands already-encoded DAG-CBOR to the legacy repo.
type rawRecord []byte

func (r rawRecord) MarshalCBOR(w io.Writer) error { _, err := w.Write(r); return err }

// Local is the embedded repository.
type Local struct {
	mu   sync.Mutex
	dir  string
	key  *atcrypto.PrivateKeyK256
	did  syntax.DID
	bs   *memBlocks
	root cid.Cid
	rev  string
	// the current records (records.go): a sorted base, a snapshot's
	// records, and the changes since; loaded: setRoot made them once
	recs      recordSet
	loaded    bool
	snap      *Snapshot    // snapshot of the current commit, built on demand
	history   []transition // the last commits' changes, oldest first (Changes)
	reachable int          // blocks the commit at root uses (at its load)
	log       *os.File
	logOff    int64    // how much of the log has been read (and is whole)
	lock      *os.File // flock'd while the files are read or written; nil: a read-only directory without one
	// readOnly: the directory is read-only (ReadOnlyDir): the store is
	// read and exported, never written (ErrReadOnly)
	readOnly bool
	pub      atcrypto.PublicKey
	notes    Notices // what opening found and said (a recovered HEAD)
	// verified: the commit at root was loaded completely and its signature
	// checked with signing.key in this process (or signed by it); compaction
	// runs only then
	verified bool
}

// OpenLocal opens (or creates) the embedded repository in dir. In a
// read-only directory (a read-only medium or mount, or one this process may
// not write) the store opens for reading: reads and exports work, with no
// file made there, and every write is refused with ErrReadOnly.
func OpenLocal(dir string) (*Local, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// other processes may use the same directory (an MCP client's server
	// and a shell's `call`): every access to its files holds a lock on
	// dir/lock, and each reader picks up what the others committed
	readOnly := atomicfile.ReadOnlyDir(dir)
	lock, created, err := openLock(filepath.Join(dir, "lock"), readOnly)
	if err != nil {
		return nil, err
	}
	if lock != nil {
		if err := atomicfile.Lock(lock, !readOnly); err != nil {
			lock.Close()
			return nil, err
		}
	}
	// a refused open leaves no lock file it made behind
	refuse := func(err error) (*Local, error) {
		if lock != nil {
			if created {
				os.Remove(lock.Name())
			}
			lock.Close()
		}
		return nil, err
	}
	defer func() {
		if lock != nil {
			atomicfile.Unlock(lock)
		}
	}()
	key, err := loadKey(dir, readOnly)
	if err != nil {
		return refuse(err)
	}
	pub, err := key.PublicKey()
	if err != nil {
		return refuse(err)
	}
	did, err := syntax.ParseDID(pub.DIDKey())
	if err != nil {
		return refuse(err)
	}
	l := &Local{dir: dir, key: key, pub: pub, did: did, lock: lock, readOnly: readOnly}
	if err := l.load(); err != nil {
		return refuse(err)
	}
	if readOnly {
		l.notes.Add(fmt.Sprintf("The embedded store's directory %s is read-only: the outline reads and exports, and every write is refused (nothing can be written there).", dir))
	}
	return l, nil
}

// ErrReadOnly: the store's directory is read-only, so nothing can be
// written to the store (reads and exports work).
var ErrReadOnly = errors.New("the embedded store is read-only")

// readOnlyErr is ErrReadOnly for the store in dir, saying what to do.
func readOnlyErr(dir, what string) error {
	return fmt.Errorf("%w: %s is a read-only directory (a read-only medium or mount, or not writable by this process), so %s; reading and exporting it work. To change the outline, copy the directory somewhere writable and use the copy (--store COPY), or make the directory writable", ErrReadOnly, dir, what)
}

// ReadOnly reports whether the store opened read-only (ErrReadOnly).
func (l *Local) ReadOnly() bool { return l.readOnly }

// WriteRefused is the error every write gets (ErrReadOnly), or nil when the
// store can be written.
func (l *Local) WriteRefused() error {
	if !l.readOnly {
		return nil
	}
	return readOnlyErr(l.dir, "nothing can be written to the store: nothing was written")
}

// openLock opens the lock file at path, creating it (created) unless the
// directory is read-only: then an existing one is opened for reading
// (flock works on it), and none is nil (nothing can write there to lock
// against).
func openLock(path string, readOnly bool) (f *os.File, created bool, err error) {
	if readOnly {
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, false, nil
		}
		return f, false, err
	}
	f, err = os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err == nil {
		return f, true, nil
	}
	if !errors.Is(err, os.ErrExist) {
		return nil, false, err
	}
	f, err = os.OpenFile(path, os.O_RDWR, 0o600)
	return f, false, err
}

// loadKey reads dir/signing.key, or makes one for a new store: never for a
// directory whose other files say the store exists (checkKeyless).
func loadKey(dir string, readOnly bool) (*atcrypto.PrivateKeyK256, error) {
	path := filepath.Join(dir, "signing.key")
	raw, err := os.ReadFile(path)
	if err == nil {
		k, err := atcrypto.ParsePrivateBytesK256(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %s is not a signing key (%v); nothing was changed. Restore it from a backup of this directory", ErrCorrupt, path, err)
		}
		return k, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := checkKeyless(dir); err != nil {
		return nil, err
	}
	if readOnly {
		return nil, readOnlyErr(dir, "no store can be made there (it holds none: no signing.key)")
	}
	k, err := atcrypto.GeneratePrivateKeyK256()
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(path, k.Bytes(), 0o600); err != nil {
		return nil, err
	}
	return k, nil
}

func (l *Local) logPath() string { return filepath.Join(l.dir, "blocks.log") }

// openLog opens the block log for reading and appending (create: making it
// if missing), or only for reading in a read-only store.
func (l *Local) openLog(create bool) (*os.File, error) {
	switch {
	case l.readOnly:
		f, err := os.Open(l.logPath())
		if errors.Is(err, os.ErrNotExist) {
			return nil, readOnlyErr(l.dir, "no store can be made there (it holds no block log)")
		}
		return f, err
	case create:
		return os.OpenFile(l.logPath(), os.O_CREATE|os.O_RDWR, 0o600)
	}
	return os.OpenFile(l.logPath(), os.O_RDWR, 0o600)
}
func (l *Local) headPath() string { return filepath.Join(l.dir, "HEAD") }

// readLog adds the blocks of the log sections at base.. (at most limit
// bytes) to the index, and to memory for the commit about to load,
// returning how many bytes are whole sections; a section that is torn or
// oversized ends the read there, and a block that does not match its CID
// is left out (never served). The range is read in one piece (the whole
// log is mapped, not copied, where the system allows it), and the sections'
// CIDs are parsed and their blocks checked on every core: at 250,000
// records, reading and checking section by section was a third of opening
// the store.
func (l *Local) readLog(base, limit int64) (int64, error) {
	var buf []byte
	if data, unmap, ok := mapWhole(l.bs.log, base, limit); ok {
		buf = data
		l.bs.unmap = unmap
	} else {
		buf = make([]byte, limit)
		if _, err := io.ReadFull(io.NewSectionReader(l.bs.log, base, limit), buf); err != nil {
			return 0, err
		}
	}
	secs, good := parseSections(buf)
	if l.bs.at.len() == 0 {
		l.bs.at = spansOf(secs, base) // the log's blocks in the sorted arrays
	} else {
		for _, sc := range secs {
			if sc.n != bad {
				l.bs.at.set(sc.c, span{base + sc.off, sc.n})
			}
		}
		l.bs.at.settle()
	}
	l.bs.load, l.bs.loadAt = buf, base
	return good, nil
}

// mapMin is the smallest log mapped rather than read (tests map every one).
var mapMin int64 = 1 << 20

// mapWhole maps the log when the range is all of a large log (opening).
func mapWhole(f *os.File, base, limit int64) ([]byte, func(), bool) {
	if base != 0 || limit < mapMin || limit == 0 {
		return nil, nil, false
	}
	return mapLog(f, limit)
}

// matches reports whether data is the block c names (SHA-256, the hash
// every record and MST node uses, without a hasher allocated per block).
func matches(c cid.Cid, data []byte) bool {
	h := c.Hash()
	if len(h) == 34 && h[0] == 0x12 && h[1] == 0x20 {
		sum := sha256.Sum256(data)
		return bytes.Equal(h[2:], sum[:])
	}
	sum, err := c.Prefix().Sum(data)
	return err == nil && sum.Equals(c)
}

// section is one block of the log: its CID and where its bytes are.
type section struct {
	c   cid.Cid
	off int64
	n   uint32
}

// bad is section.n of a section whose block does not match its CID.
const bad = ^uint32(0)

// parseSections splits buf into CAR sections (varint length, CID, block),
// returning them and the length of buf that is whole sections: a torn or
// oversized section, or one whose CID does not parse (a crash mid-append),
// ends it. A section whose block does not match its CID has n == bad. The
// lengths are followed on one core; the CIDs are parsed and the blocks
// hashed on every core.
func parseSections(buf []byte) ([]section, int64) {
	type frame struct{ start, body, end int64 }
	frames := make([]frame, 0, len(buf)/150)
	var off int64
	for off < int64(len(buf)) {
		n, hl := binary.Uvarint(buf[off:])
		if hl <= 0 || n == 0 || n > MaxSection || int64(n) > int64(len(buf))-off-int64(hl) {
			break // torn or garbage: never allocate it
		}
		frames = append(frames, frame{off, off + int64(hl), off + int64(hl) + int64(n)})
		off += int64(hl) + int64(n)
	}
	out := make([]section, len(frames))
	parsed := make([]bool, len(frames))
	workers := min(runtime.GOMAXPROCS(0), max(1, len(frames)/4096))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// contiguous shares: each core walks its own part of the log
			lo, hi := len(frames)*w/workers, len(frames)*(w+1)/workers
			for i := lo; i < hi; i++ {
				fr := frames[i]
				body := buf[fr.body:fr.end]
				cl, c, err := cid.CidFromBytes(body)
				if err != nil {
					continue
				}
				parsed[i] = true
				out[i] = section{c: c, off: fr.body + int64(cl), n: uint32(len(body) - cl)}
				if !matches(c, body[cl:]) {
					out[i].n = bad
				}
			}
		}()
	}
	wg.Wait()
	for i := range frames {
		if !parsed[i] {
			return out[:i], frames[i].start
		}
	}
	return out, off
}

// ErrCorrupt means the block log does not hold the commit HEAD names; the
// store is left as it is on disk.
var ErrCorrupt = errors.New("embedded store is damaged")

// load reads the block log and HEAD. A torn or damaged tail is cut off only
// once HEAD's commit is known to load from what comes before it and to be
// signed by signing.key; otherwise nothing on disk is changed and opening
// fails. A missing or unreadable HEAD is recovered from the log
// (recoverHead), never taken for a new store while the log holds data; a
// missing log is new only when neither HEAD nor the operations journal
// speaks of one.
func (l *Local) load() error {
	ctx := context.Background()
	head, headErr := os.ReadFile(l.headPath())
	if _, err := os.Stat(l.logPath()); errors.Is(err, os.ErrNotExist) {
		if info, err := os.Stat(l.compactPath()); err == nil {
			return fmt.Errorf("%w: %s is missing but %s (%d bytes, a compaction's copy of the log) is there; nothing was changed. If the compaction had finished, rename it to blocks.log; else restore blocks.log from a backup", ErrCorrupt, l.logPath(), filepath.Base(l.compactPath()), info.Size())
		}
		if !errors.Is(headErr, os.ErrNotExist) {
			return fmt.Errorf("%w: %s is missing but HEAD is there: the outline's blocks are gone from this directory; nothing was changed. Restore blocks.log from a backup of this directory", ErrCorrupt, l.logPath())
		}
		if err := l.checkJournal("missing"); err != nil {
			return err
		}
	}
	f, err := l.openLog(true)
	if err != nil {
		return err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.bs = newBlocks(f)
	good, err := l.readLog(0, info.Size())
	if err != nil {
		f.Close()
		return err
	}
	defer func() { l.bs.evict() }()
	var c cid.Cid
	why := ""
	switch {
	case errors.Is(headErr, os.ErrNotExist):
		why = "missing"
	case headErr != nil:
		why = fmt.Sprintf("unreadable (%v)", headErr)
	default:
		if c, err = cid.Decode(strings.TrimSpace(string(head))); err != nil {
			why = fmt.Sprintf("unreadable (%d bytes that are not a commit CID: %v)", len(head), err)
		}
	}
	if why != "" {
		if info.Size() == 0 && why == "missing" {
			// a new store
			if err := l.checkJournal("empty"); err != nil {
				f.Close()
				return err
			}
			if l.readOnly {
				f.Close()
				return readOnlyErr(l.dir, "no store can be made there (it holds no outline: an empty block log, no HEAD)")
			}
			l.log, l.logOff = f, 0
			return l.initEmpty()
		}
		if info.Size() == 0 {
			f.Close()
			return fmt.Errorf("%w: HEAD is %s and the block log is empty; nothing was changed. Restore blocks.log from a backup; if this directory never held an outline, remove HEAD", ErrCorrupt, why)
		}
		// never compacted or cut here: the next open, from a HEAD that
		// loads and verifies, may do that
		if err := l.recoverHead(ctx, why, good, info.Size()); err != nil {
			f.Close()
			return err
		}
		l.log, l.logOff = f, good
		if !l.readOnly {
			os.Remove(l.compactPath())
		}
		return nil
	}
	if err := l.setRoot(ctx, c); err != nil {
		f.Close()
		if errors.Is(err, errWrongKey) {
			return fmt.Errorf("%w: HEAD's commit is not this store's: %v; signing.key is not the key this outline was written with, nothing was changed. Restore the store's own signing.key from a backup of this directory", ErrCorrupt, err)
		}
		if good != info.Size() {
			return fmt.Errorf("%w: the block log is damaged at byte %d of %d and HEAD's commit %s does not load from what comes before (%v); nothing was changed. Restore the directory from a backup; removing HEAD makes the next open recover the newest commit of the log that loads completely (and say which)", ErrCorrupt, good, info.Size(), c, err)
		}
		return fmt.Errorf("%w: HEAD's commit %s does not load: %v; nothing was changed. Restore the directory from a backup; removing HEAD makes the next open recover the newest commit of the log that loads completely (and say which)", ErrCorrupt, c, err)
	}
	behind := l.journalAhead(c, l.rev)
	if good != info.Size() && !l.readOnly {
		// a torn append after HEAD's commit (a crash mid-write): cut it
		// (read-only: left, and read up to it)
		if err := f.Truncate(good); err != nil {
			f.Close()
			return err
		}
	}
	l.log, l.logOff = f, good
	if l.readOnly {
		return nil
	}
	// a compaction that did not finish left its file: the log is whole
	os.Remove(l.compactPath())
	if !behind && l.stale() {
		// best effort: a store that cannot be compacted (a system that
		// does not rename over an open file) still opens
		l.compact(ctx)
	}
	return nil
}

// checkJournal refuses to start a new store where the block log is missing
// or empty (state) while the operations journal records this store's
// operations that landed commits: the outline's data is gone, not new.
func (l *Local) checkJournal(state string) error {
	ops := landedOps(l.dir, l.did.String())
	if len(ops) == 0 {
		return nil
	}
	return fmt.Errorf("%w: the block log is %s and HEAD is missing, but ops/ records %s: the outline's data is gone from this directory, not new; nothing was changed. Restore blocks.log and HEAD from a backup, or move ops/ aside to start a new outline", ErrCorrupt, state, describeOps(ops))
}

func (l *Local) initEmpty() error {
	ctx := context.Background()
	r := legacy.NewRepo(ctx, l.did.String(), l.bs)
	root, _, err := r.Commit(ctx, l.sign)
	if err != nil {
		return err
	}
	if err := l.persist(root); err != nil {
		return err
	}
	return l.setRoot(ctx, root)
}

func (l *Local) sign(_ context.Context, _ string, b []byte) ([]byte, error) {
	return l.key.HashAndSign(b)
}

// setRoot loads the record index of the commit at root.
func (l *Local) setRoot(ctx context.Context, root cid.Cid) error {
	cb, err := l.bs.raw(root)
	if err != nil {
		return err
	}
	var commit atrepo.Commit
	if err := commit.UnmarshalCBOR(bytes.NewReader(cb)); err != nil {
		return fmt.Errorf("commit %s: %w", root, err)
	}
	if err := commit.VerifyStructure(); err != nil {
		return fmt.Errorf("commit %s: %w", root, err)
	}
	// a commit this store's key did not sign is not its own (a replaced
	// signing.key): never loaded, so never compacted from or written over
	if err := l.checkSigned(root, &commit); err != nil {
		return err
	}
	// records whose CID is unchanged keep their decoded value; the others
	// are decoded on every core while the walk goes on, in chunks
	// the records before (none at the first load), in path order
	var prev []Record
	if l.loaded {
		prev = l.recs.current()
	}
	type todo struct {
		k    string
		v    cid.Cid
		slot int // in recs
	}
	type chunk struct {
		todo []todo
		out  []Record
		err  error
	}
	const chunkSize = 1024
	work := make(chan *chunk, 256)
	var chunks []*chunk
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				c.out = make([]Record, len(c.todo))
				for i, d := range c.todo {
					raw, err := l.bs.raw(d.v)
					if err != nil {
						c.err = err
						break
					}
					val, err := DecodeValue(raw) // checked, then kept compact
					if err != nil {
						c.err = fmt.Errorf("record %s: %w", d.k, err)
						break
					}
					coll, rkey := splitPath(d.k)
					c.out[i] = Record{Collection: coll, RKey: rkey, CID: cidString(d.v), Value: val}
				}
			}
		}()
	}
	cur := &chunk{todo: make([]todo, 0, chunkSize)}
	// in key order (the walk's): the snapshot's order. Sized ahead (grown
	// by append, it left five times its size behind as garbage: 93 MB at
	// 249k records), then cut to size below if that was far too much.
	guess := l.recs.n
	if guess == 0 {
		guess = l.bs.at.len()
	}
	recs := make([]Record, 0, guess+guess/16)
	reachable := 1 // the commit
	pi := 0        // in prev
	err = l.walkNodes(ctx, commit.Data, func(k string, v cid.Cid) error {
		reachable++
		if !strings.HasPrefix(k, Prefix) {
			return nil
		}
		// prev is in the walk's order (paths): a walk beside it
		for pi < len(prev) && cmpPath(&prev[pi], k) < 0 {
			pi++
		}
		if pi < len(prev) && cmpPath(&prev[pi], k) == 0 && prev[pi].CID == v.String() {
			recs = append(recs, prev[pi])
			return nil
		}
		recs = append(recs, Record{}) // decoded below
		cur.todo = append(cur.todo, todo{k, v, len(recs) - 1})
		if len(cur.todo) == chunkSize {
			chunks = append(chunks, cur)
			work <- cur
			cur = &chunk{todo: make([]todo, 0, chunkSize)}
		}
		return nil
	}, func(cid.Cid) { reachable++ })
	if len(cur.todo) > 0 {
		chunks = append(chunks, cur)
		work <- cur
	}
	close(work)
	wg.Wait()
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	var out []Record // the records decoded: what changed
	for _, c := range chunks {
		if c.err != nil {
			return c.err
		}
		for i, d := range c.todo {
			recs[d.slot] = c.out[i]
		}
		if l.loaded {
			out = append(out, c.out...)
		}
	}
	if cap(recs)-len(recs) > len(recs)/8+64 {
		recs = append(make([]Record, 0, len(recs)), recs...)
	}
	snap := &Snapshot{DID: l.did, Commit: root.String(), Rev: commit.Rev, Records: recs}
	if l.loaded {
		// the records gone: those before that the new ones (in the same
		// order) do not have
		changes := out
		j := 0
		for i := range prev {
			for j < len(recs) && comparePaths(&recs[j], &prev[i]) < 0 {
				j++
			}
			if j == len(recs) || comparePaths(&recs[j], &prev[i]) != 0 {
				changes = append(changes, Record{Collection: prev[i].Collection, RKey: prev[i].RKey})
			}
		}
		l.remember(l.root, root, changes)
	}
	l.recs = recordSet{base: recs, n: len(recs)}
	l.loaded = true
	l.root, l.rev, l.reachable = root, commit.Rev, reachable
	l.snap = snap
	l.verified = true // loaded whole, signed by signing.key
	return nil
}

// splitPath cuts a path into its collection and record key: a known
// collection the shared string, and then the record key a copy of its
// own, so that a record keeps 16 bytes of key, not the whole path's 32
// (4 MB at 249,000 records).
func splitPath(p string) (coll, rkey string) {
	coll, rkey, _ = strings.Cut(p, "/")
	if v, ok := interned[coll]; ok {
		return v.(string), strings.Clone(rkey)
	}
	return coll, rkey
}

// walkNodes calls fn with every key and value of the MST at root, in key
// order, and node with every MST node. Each node is decoded once with the
// MST package's node codec; a missing node is an error (a tree with holes
// must not read as fewer records).
func (l *Local) walkNodes(ctx context.Context, root cid.Cid, fn func(k string, v cid.Cid) error, node func(cid.Cid)) error {
	if node != nil {
		node(root)
	}
	blk, err := l.bs.raw(root)
	if err != nil {
		return fmt.Errorf("MST node %s: %w", root, err)
	}
	nd, err := mst.NodeDataFromCBOR(bytes.NewReader(blk))
	if err != nil {
		return fmt.Errorf("MST node %s: %w", root, err)
	}
	if nd.Left != nil {
		if err := l.walkNodes(ctx, *nd.Left, fn, node); err != nil {
			return err
		}
	}
	var prev []byte
	for _, e := range nd.Entries {
		if e.PrefixLen < 0 || int(e.PrefixLen) > len(prev) {
			return fmt.Errorf("MST node %s: key prefix %d longer than the previous key", root, e.PrefixLen)
		}
		key := append(append([]byte{}, prev[:e.PrefixLen]...), e.KeySuffix...)
		if err := fn(string(key), e.Value); err != nil {
			return err
		}
		prev = key
		if e.Right != nil {
			if err := l.walkNodes(ctx, *e.Right, fn, node); err != nil {
				return err
			}
		}
	}
	return nil
}

var errStop = errors.New("stop")

// transition is what one move of HEAD changed.
type transition struct {
	from, to string
	changes  []Record // Value nil: deleted
}

// History is how many moves of HEAD the store remembers for Changes.
const History = 256

func (l *Local) remember(from, to cid.Cid, changes []Record) {
	if !from.Defined() {
		return
	}
	if len(l.history) >= History {
		l.history = slices.Delete(l.history, 0, len(l.history)-History+1)
	}
	l.history = append(l.history, transition{from.String(), to.String(), changes})
}

// Changes implements Deltas from the moves of HEAD this process made or
// saw (its own commits, and other processes' picked up by refresh).
func (l *Local) Changes(ctx context.Context, since string) (string, string, []Record, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.locked(ctx, false, func() error { return nil }); err != nil {
		return "", "", nil, false, err
	}
	head := l.root.String()
	if since == head {
		return head, l.rev, nil, true, nil
	}
	// the chain of moves from since to HEAD, newest first
	i := len(l.history) - 1
	if i < 0 || l.history[i].to != head {
		return "", "", nil, false, nil
	}
	n := 0
	for ; i >= 0; i-- {
		n += len(l.history[i].changes)
		if l.history[i].from == since {
			break
		}
		if i > 0 && l.history[i-1].to != l.history[i].from {
			return "", "", nil, false, nil
		}
	}
	if i < 0 || n > 100_000 {
		return "", "", nil, false, nil
	}
	out := make([]Record, 0, n)
	for _, t := range l.history[i:] {
		out = append(out, t.changes...)
	}
	return head, l.rev, out, true, nil
}

// beforeHead lets tests stop a commit between appending its blocks and
// replacing HEAD (a process killed there).
var beforeHead func() error

// persist appends pending blocks to the log, syncs, then replaces HEAD.
// It runs under the exclusive lock, after refresh.
func (l *Local) persist(root cid.Cid) error {
	var buf bytes.Buffer
	spans := make([]span, len(l.bs.pending))
	for i, blk := range l.bs.pending {
		writeSection(&buf, blk.Cid(), blk.RawData())
		spans[i] = span{l.logOff + int64(buf.Len()-len(blk.RawData())), uint32(len(blk.RawData()))}
	}
	if _, err := l.log.WriteAt(buf.Bytes(), l.logOff); err != nil {
		return err
	}
	if err := l.log.Sync(); err != nil {
		return err
	}
	l.logOff += int64(buf.Len())
	for i, blk := range l.bs.pending {
		l.bs.at.set(blk.Cid(), spans[i])
		delete(l.bs.m, blk.Cid())
	}
	l.bs.at.settle()
	l.bs.pending = nil
	if beforeHead != nil {
		if err := beforeHead(); err != nil {
			return err
		}
	}
	return atomicfile.Write(l.headPath(), []byte(root.String()+"\n"), 0o600)
}

// locked runs fn holding the directory lock (exclusive for writers), after
// catching up with what other processes committed.
// A read-only store refuses writers (ErrReadOnly) and reads under a shared
// lock, if the directory has a lock file.
func (l *Local) locked(ctx context.Context, exclusive bool, fn func() error) error {
	if exclusive && l.readOnly {
		return l.WriteRefused()
	}
	if l.lock != nil {
		if err := atomicfile.Lock(l.lock, exclusive); err != nil {
			return err
		}
		defer atomicfile.Unlock(l.lock)
	}
	if err := l.refresh(ctx); err != nil {
		return err
	}
	return fn()
}

// refresh reads HEAD and, if another process moved it, the log sections
// appended since, and loads that commit. If this process's view of the log
// diverged (another process cut a torn tail this one had read past), it
// reads the whole log again instead of failing.
func (l *Local) refresh(ctx context.Context) error {
	var c cid.Cid
	why := ""
	head, err := os.ReadFile(l.headPath())
	switch {
	case errors.Is(err, os.ErrNotExist):
		why = "missing"
	case err != nil:
		why = fmt.Sprintf("unreadable (%v)", err)
	default:
		if c, err = cid.Decode(strings.TrimSpace(string(head))); err != nil {
			why = fmt.Sprintf("unreadable (%d bytes that are not a commit CID: %v)", len(head), err)
		}
	}
	// another process may have compacted the log (a new file under the
	// same name): this process's blocks are then read from the new one
	info, err := l.log.Stat()
	if err != nil {
		return err
	}
	now, err := os.Stat(l.logPath())
	if err == nil && !os.SameFile(info, now) {
		f, err := l.openLog(false)
		if err != nil {
			return err
		}
		l.log.Close()
		l.log, l.logOff = f, 0
		l.bs = newBlocks(f)
		info = now
		l.root = cid.Undef // load HEAD's commit from the new file
	}
	if why != "" {
		if err != nil {
			return fmt.Errorf("%w: HEAD is %s and the block log cannot be found (%v) since this process opened the store; nothing was changed. Restore HEAD and blocks.log from a backup of this directory", ErrCorrupt, why, err)
		}
		return l.recoverRunning(ctx, why, info.Size())
	}
	if c == l.root {
		return nil
	}
	defer func() { l.bs.evict() }()
	if info.Size() >= l.logOff {
		good, err := l.readLog(l.logOff, info.Size()-l.logOff)
		if err != nil {
			return err
		}
		l.logOff += good
		l.snap = nil
		if err := l.setRoot(ctx, c); err == nil {
			return nil
		}
	}
	// diverged: start over from the whole log
	l.bs.evict()
	l.bs = newBlocks(l.log)
	good, err := l.readLog(0, info.Size())
	if err != nil {
		return err
	}
	l.logOff = good
	l.snap = nil
	if err := l.setRoot(ctx, c); err != nil {
		return fmt.Errorf("%w: HEAD's commit %s does not load after re-reading the log: %v", ErrCorrupt, c, err)
	}
	return nil
}

// recoverRunning recovers a HEAD that went missing or unreadable while this
// process had the store open (recoverHead, from the whole log read again):
// said in the next tool result, never compacted from.
func (l *Local) recoverRunning(ctx context.Context, why string, size int64) error {
	l.bs.evict()
	l.bs = newBlocks(l.log)
	defer func() { l.bs.evict() }()
	good, err := l.readLog(0, size)
	if err != nil {
		return err
	}
	l.logOff = good
	l.snap = nil
	return l.recoverHead(ctx, why, good, size)
}

// DID implements Repository.
func (l *Local) DID() syntax.DID { return l.did }

// Head implements Repository.
func (l *Local) Head(ctx context.Context) (string, string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.locked(ctx, false, func() error { return nil }); err != nil {
		return "", "", err
	}
	return l.root.String(), l.rev, nil
}

// Snapshot implements Repository. It is built once per commit and shared.
func (l *Local) Snapshot(ctx context.Context) (*Snapshot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.locked(ctx, false, func() error { return nil }); err != nil {
		return nil, err
	}
	if l.snap != nil && l.snap.Commit == l.root.String() {
		return l.snap, nil
	}
	// the records are current when the snapshot is not: folded into one
	// sorted list, the snapshot's (and the next changes' base)
	l.recs.fold()
	s := &Snapshot{DID: l.did, Commit: l.root.String(), Rev: l.rev, Records: l.recs.base}
	if !slices.IsSortedFunc(s.Records, CompareRecords) {
		// path order is (collection, record key) order but for a
		// collection name that another extends with a character before
		// '/': sorted as snapshots are, in a copy
		s.Records = slices.Clone(s.Records)
		slices.SortFunc(s.Records, CompareRecords)
	}
	l.snap = s
	return s, nil
}

// Apply implements Repository.
func (l *Local) Apply(ctx context.Context, swapCommit string, writes []Write) (res *Result, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	err = l.locked(ctx, true, func() error {
		res, err = l.apply(ctx, swapCommit, writes)
		return err
	})
	return res, err
}

func (l *Local) apply(ctx context.Context, swapCommit string, writes []Write) (*Result, error) {
	if len(writes) > MaxBatch {
		return nil, fmt.Errorf("%w: %d > %d", ErrTooManyWrites, len(writes), MaxBatch)
	}
	if swapCommit != "" && swapCommit != l.root.String() {
		return nil, ErrConflict
	}
	seen := map[string]bool{}
	for _, w := range writes {
		path := w.Collection + "/" + w.RKey
		if seen[path] {
			return nil, fmt.Errorf("two writes to %s in one batch", path)
		}
		seen[path] = true
		_, exists := l.recs.get(path)
		switch w.Op {
		case Create:
			if exists {
				return nil, fmt.Errorf("%w: %s", ErrRecordExists, path)
			}
		case Update, Delete:
			if !exists {
				return nil, fmt.Errorf("%w: %s", ErrRecordMissing, path)
			}
		default:
			return nil, fmt.Errorf("unknown op %q", w.Op)
		}
	}
	r, err := legacy.OpenRepo(ctx, l.bs, l.root)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Result, error) {
		// drop unreferenced blocks of the failed attempt
		for _, b := range l.bs.pending {
			delete(l.bs.m, b.Cid())
		}
		l.bs.pending = nil
		return nil, err
	}
	res := &Result{}
	type change struct {
		path string
		rec  *Record
	}
	var changes []change
	for _, w := range writes {
		path := w.Collection + "/" + w.RKey
		uri := "at://" + l.did.String() + "/" + path
		if w.Op == Delete {
			if err := r.DeleteRecord(ctx, path); err != nil {
				return fail(err)
			}
			res.Results = append(res.Results, WriteResult{URI: uri})
			changes = append(changes, change{path, nil})
			continue
		}
		val := w.Value
		if val == nil {
			return fail(fmt.Errorf("%s %s without a value", w.Op, path))
		}
		raw, err := atdata.MarshalCBOR(val)
		if err != nil {
			return fail(fmt.Errorf("encoding %s: %w", path, err))
		}
		var c cid.Cid
		if w.Op == Create {
			c, err = r.PutRecord(ctx, path, rawRecord(raw))
		} else {
			c, err = r.UpdateRecord(ctx, path, rawRecord(raw))
		}
		if err != nil {
			return fail(err)
		}
		dec, err := DecodeValue(raw)
		if err != nil {
			return fail(err)
		}
		res.Results = append(res.Results, WriteResult{URI: uri, CID: c.String()})
		coll, rkey := splitPath(path)
		changes = append(changes, change{path, &Record{Collection: coll, RKey: rkey, CID: c.String(), Value: dec}})
	}
	root, rev, err := r.Commit(ctx, l.sign)
	if err != nil {
		return fail(err)
	}
	if err := l.persist(root); err != nil {
		return fail(err)
	}
	var recorded []Record
	for _, ch := range changes {
		l.recs.set(ch.path, ch.rec)
		if strings.HasPrefix(ch.path, Prefix) {
			if ch.rec != nil {
				recorded = append(recorded, *ch.rec)
			} else {
				coll, rkey, _ := strings.Cut(ch.path, "/")
				recorded = append(recorded, Record{Collection: coll, RKey: rkey})
			}
		}
	}
	// the sorted snapshot is made again only if somebody asks for one:
	// readers that follow Changes never do
	l.snap = nil
	l.recs.settle()
	l.remember(l.root, root, recorded)
	l.root, l.rev = root, rev
	res.Commit, res.Rev = root.String(), rev
	return res, nil
}

// Close releases the block log and the lock file.
func (l *Local) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lock != nil {
		l.lock.Close()
	}
	return l.log.Close()
}

// ExportCAR writes the repository as a CARv1: header (root = commit), then
// every block of the log.
func (l *Local) ExportCAR(w io.Writer) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.locked(context.Background(), false, func() error {
		bs := make([]blocks.Block, 0, len(l.bs.m)+l.bs.at.len())
		for _, b := range l.bs.m {
			bs = append(bs, b)
		}
		for c := range l.bs.at.all() {
			if _, ok := l.bs.m[c]; ok {
				continue
			}
			b, err := l.bs.Get(context.Background(), c)
			if err != nil {
				return err
			}
			bs = append(bs, b)
		}
		return WriteCAR(w, l.root, bs)
	})
}

// WriteCAR writes a CARv1 of bs with root as its root: the header, the root
// block first, then the others in CID order (so equal content gives equal
// bytes).
func WriteCAR(w io.Writer, root cid.Cid, bs []blocks.Block) error {
	hdr, err := cbor.DumpObject(map[string]any{"roots": []cid.Cid{root}, "version": 1})
	if err != nil {
		return err
	}
	slices.SortFunc(bs, func(a, b blocks.Block) int {
		switch {
		case a.Cid() == root:
			return -1
		case b.Cid() == root:
			return 1
		}
		return strings.Compare(a.Cid().KeyString(), b.Cid().KeyString())
	})
	bw := bufio.NewWriterSize(w, 64<<10)
	var lb [binary.MaxVarintLen64]byte
	bw.Write(lb[:binary.PutUvarint(lb[:], uint64(len(hdr)))])
	bw.Write(hdr)
	var buf bytes.Buffer
	for _, b := range bs {
		buf.Reset()
		writeSection(&buf, b.Cid(), b.RawData())
		if _, err := bw.Write(buf.Bytes()); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func writeSection(buf *bytes.Buffer, c cid.Cid, data []byte) {
	cb := c.Bytes()
	var lb [binary.MaxVarintLen64]byte
	buf.Write(lb[:binary.PutUvarint(lb[:], uint64(len(cb)+len(data)))])
	buf.Write(cb)
	buf.Write(data)
}

// MaxSection bounds one log section (a CID and a block: records and MST
// nodes are far smaller).
const MaxSection = 4 << 20
