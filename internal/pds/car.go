package pds

import (
	"bytes"
	"context"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"
	"weak"

	atrepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/repo/mst"
	"github.com/bluesky-social/indigo/atproto/syntax"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// errIncomplete: the blocks at hand do not hold the whole MST or every
// record (a getRepo?since= answer that does not fit what was kept).
var errIncomplete = errors.New("the CAR does not hold the whole repository")

// blockMap holds blocks by CID key.
type blockMap map[string]blocks.Block

// carRepo is the repository as last read, kept current commit by commit:
// its commit, its MST, and exactly the blocks reachable from the commit
// (the commit, the MST nodes and the records of every collection). An MST
// node is kept as its block's bytes, decoded when a walk passes it (as
// parsed, a node took 2.5 times its bytes: its entries, each with a key
// and two CIDs in their own allocations; at 249k records 50 MB against
// 20), with the values of the app.bulleted records its entries name, in
// entry order: a record is found where its key is, and no map of records
// by CID is kept (at 249k records its table and keys took 27 MB). Any
// other record and the commit are kept as blocks. A later
// getRepo?since=rev brings only the blocks written after rev; the
// difference they make to the MST is found without walking the unchanged
// part (diff) and applied in place (apply), so that a commit costs what it
// changed, not the size of the repository.
//
// nodes is exactly the set of nodes reachable from root, never more: the
// difference relies on it (a node removed by one commit and restored by a
// later one, as a record deleted and created again restores it, must count
// as new). Once a carRepo is a Repo's, Repo.mu guards it.
type carRepo struct {
	commit cid.Cid
	rev    string
	root   cid.Cid             // the MST's root node
	blocks blockMap            // the commit, other apps' records
	nodes  map[string]keptNode // every node by CID key, never modified
	// other apps' records (named by keys outside app.bulleted) by CID key:
	// how many keys name each (its block is in blocks)
	others map[string]int32
	held   int // how many app.bulleted keys the tree has
	// the records at commit, made when asked for: kept (snap) until they
	// are first handed out, then only while their reader keeps them (a
	// reader builds its own tree of them and drops the list)
	snap  *store.Snapshot
	given weak.Pointer[store.Snapshot]
}

// keptNode is a kept MST node: its block's bytes, and the values of the
// app.bulleted records its entries name, one per entry in entry order (a
// zero Value for another app's record); vals is nil if none is
// app.bulleted.
type keptNode struct {
	data []byte
	vals []store.Value
}

// carRecord is a record block, decoded (its CID's text and its value) if
// an app.bulleted key names it.
type carRecord struct {
	cid   string
	value store.Value
}

// cidText is the text of the CID whose bytes are k, as Cid.String makes
// it. A CIDv1 (every CID of a repository) is "b" and its bytes in
// lower-case base32, made here in one allocation: go-cid's String, by way
// of multibase, made four (a cold read of 100k records allocated 27 MB to
// make 6 MB of CID texts).
func cidText(k string) string {
	if len(k) > 1 && k[0] == 1 {
		b := make([]byte, 1+cidBase32.EncodedLen(len(k)))
		b[0] = 'b'
		cidBase32.Encode(b[1:], unsafe.Slice(unsafe.StringData(k), len(k)))
		return unsafe.String(&b[0], len(b))
	}
	c, err := cid.Cast([]byte(k))
	if err != nil {
		return ""
	}
	return c.String()
}

// cidBase32 is multibase's base32 ("b"): RFC 4648 in lower case, without
// padding.
var cidBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// block is the kept block of CID key k: a record's is looked for in every
// node (a walk of the whole tree: tests and the rare record a difference
// names that no block brought and no changed node held).
func (c *carRepo) block(k string) (blocks.Block, bool) {
	if b, ok := c.blocks[k]; ok {
		return b, true
	}
	var raw []byte
	if n, ok := c.nodes[k]; ok {
		raw = n.data
	} else if v, ok := c.find(k); ok {
		raw = v.CBOR()
	}
	id, err := cid.Cast([]byte(k))
	if raw == nil || err != nil {
		return nil, false
	}
	b, err := blocks.NewBlockWithCid(raw, id)
	if err != nil {
		return nil, false
	}
	return b, true
}

// find is the value of the app.bulleted record of CID key vk, looked for in
// every kept node.
func (c *carRepo) find(vk string) (v store.Value, ok bool) {
	for _, n := range c.nodes {
		if n.vals == nil {
			continue
		}
		_ = nodeValues(n.data, func(i int, k string) {
			if !ok && k == vk && !n.vals[i].IsZero() {
				v, ok = n.vals[i], true
			}
		})
		if ok {
			return v, true
		}
	}
	return store.Value{}, false
}

// blockCount is about how many blocks c keeps (a record two app.bulleted
// keys name counts twice).
func (c *carRepo) blockCount() int { return len(c.blocks) + c.held + len(c.nodes) }

// allBlocks is every block c keeps (those of records and nodes made again
// from their values and nodes).
func (c *carRepo) allBlocks() []blocks.Block {
	bs, _ := c.parts().blocks()
	return bs
}

// parts is what c's blocks are made of, listed under Repo.mu; made into
// blocks (blocks) without it, as a kept node or value is never modified.
func (c *carRepo) parts() cacheParts {
	p := cacheParts{kept: make([]blocks.Block, 0, len(c.blocks)), nodes: make([]heldNode, 0, len(c.nodes))}
	for _, b := range c.blocks {
		p.kept = append(p.kept, b)
	}
	for k, n := range c.nodes {
		p.nodes = append(p.nodes, heldNode{k, n})
	}
	return p
}

// cacheParts is a kept repository's blocks: kept as blocks, held as
// record values, and nodes' bytes.
type cacheParts struct {
	kept  []blocks.Block
	nodes []heldNode
}

type heldNode struct {
	key string // the CID's bytes
	keptNode
}

type heldRecord struct {
	key   string // the CID's bytes
	value store.Value
}

// records is the app.bulleted records p's nodes hold, each once, in CID
// key order (their keys are the nodes' bytes); an error says a node could
// not be read (its records are left out).
func (p cacheParts) records() ([]heldRecord, error) {
	n := 0
	for _, nd := range p.nodes {
		n += len(nd.vals)
	}
	recs := make([]heldRecord, 0, n)
	var failed error
	for _, nd := range p.nodes {
		if nd.vals == nil {
			continue
		}
		err := nodeValues(nd.data, func(i int, vk string) {
			if i < len(nd.vals) && !nd.vals[i].IsZero() {
				recs = append(recs, heldRecord{vk, nd.vals[i]})
			}
		})
		if err != nil {
			failed = fmt.Errorf("MST node %s: %w", cidOfKey(nd.key), err)
		}
	}
	slices.SortFunc(recs, func(a, b heldRecord) int { return strings.Compare(a.key, b.key) })
	return slices.CompactFunc(recs, func(a, b heldRecord) bool { return a.key == b.key }), failed
}

// blocks makes p's blocks; an error says one could not be made (and is
// left out).
func (p cacheParts) blocks() ([]blocks.Block, error) {
	recs, failed := p.records()
	bs := append(make([]blocks.Block, 0, len(p.kept)+len(p.nodes)+len(recs)), p.kept...)
	kept := make(map[string]bool, len(p.kept))
	for _, b := range p.kept {
		kept[b.Cid().KeyString()] = true
	}
	for _, rec := range recs {
		if kept[rec.key] {
			continue // another app's record too, kept as its block
		}
		id, err := cid.Cast([]byte(rec.key))
		var b blocks.Block
		if err == nil {
			b, err = blocks.NewBlockWithCid(rec.value.CBOR(), id)
		}
		if err != nil {
			failed = fmt.Errorf("record block %s: %w", cidOfKey(rec.key), err)
			continue
		}
		bs = append(bs, b)
	}
	for _, n := range p.nodes {
		id, err := cid.Cast([]byte(n.key))
		var b blocks.Block
		if err == nil {
			b, err = blocks.NewBlockWithCid(n.data, id)
		}
		if err != nil {
			failed = fmt.Errorf("MST node %s: %w", cidOfKey(n.key), err)
			continue
		}
		bs = append(bs, b)
	}
	return bs, failed
}

// write writes p as a CAR whose root is root: the root's block first, then
// the others by CID (store.WriteCAR's order), each made as it is written.
// A node that cannot be read fails it (the file would miss its records).
func (p cacheParts) write(w io.Writer, root cid.Cid) error {
	recs, err := p.records()
	if err != nil {
		return err
	}
	type part struct {
		key  string // the CID's bytes
		kind uint8  // 0 kept, 1 record, 2 node
		i    int32
	}
	parts := make([]part, 0, len(p.kept)+len(recs)+len(p.nodes))
	for i, b := range p.kept {
		parts = append(parts, part{b.Cid().KeyString(), 0, int32(i)})
	}
	for i, rec := range recs {
		parts = append(parts, part{rec.key, 1, int32(i)})
	}
	for i, n := range p.nodes {
		parts = append(parts, part{n.key, 2, int32(i)})
	}
	rk := root.KeyString()
	slices.SortFunc(parts, func(a, b part) int {
		switch {
		case a.key == rk:
			return -1
		case b.key == rk:
			return 1
		}
		return strings.Compare(a.key, b.key)
	})
	cw, err := store.NewCARWriter(w, root)
	if err != nil {
		return err
	}
	for j, pt := range parts {
		if j > 0 && pt.key == parts[j-1].key {
			continue // a record both an app.bulleted key and another name
		}
		id, err := cid.Cast([]byte(pt.key))
		if err != nil {
			return fmt.Errorf("block %x: %w", pt.key, err)
		}
		var data []byte
		switch pt.kind {
		case 0:
			data = p.kept[pt.i].RawData()
		case 1:
			data = recs[pt.i].value.CBOR()
		case 2:
			data = p.nodes[pt.i].data
		}
		if err := cw.Block(id, data); err != nil {
			return err
		}
	}
	return cw.Flush()
}

// fetched is one CAR as it arrived: its root, its blocks, and those of them
// decoded (app.bulleted records and MST nodes) while it arrived.
//
// A read for a whole walk (buildCAR: a cold read, the cache file) keeps a
// block's bytes only where they are kept beyond it (the commit, MST nodes,
// other apps' records: copied out of the read's chunks) or a block did not
// decode; an app.bulleted record is kept as its value. The CAR's chunks
// are garbage as soon as their blocks are decoded, not when the read ends
// (100k records: 34 MB of CAR the collector had to count as live at every
// cycle of the read). A read whose difference is taken (diff) keeps every
// block: it is small, and the difference names the blocks it needs.
type fetched struct {
	root     cid.Cid
	rootBlk  blocks.Block
	index    map[string]*fetchedBlock // by CID key, every block but the root
	received int
}

// fetchedBlock is one block of a fetched CAR: its bytes, if kept, and what
// they decoded to.
type fetchedBlock struct {
	cid  cid.Cid
	data []byte // nil where the block's bytes were not kept
	dec  decoded
}

type decoded struct {
	value store.Value // an app.bulleted record's
	rec   bool        // an app.bulleted record: value (or err) is set
	node  *mst.Node   // an MST node's (children not linked)
	err   error
}

// decoded is what block k decoded to while f arrived.
func (f *fetched) decoded(k string) (decoded, bool) {
	if e, ok := f.index[k]; ok {
		return e.dec, true
	}
	return decoded{}, false
}

// has reports whether f brought block k.
func (f *fetched) has(k string) bool {
	_, ok := f.index[k]
	return ok || k == f.root.KeyString()
}

// block is f's block k, if its bytes were kept.
func (f *fetched) block(k string) (blocks.Block, bool) {
	if k == f.root.KeyString() && f.rootBlk != nil {
		return f.rootBlk, true
	}
	if e, ok := f.index[k]; ok && e.data != nil {
		return e.block(), true
	}
	return nil, false
}

// block is e as a block (its bytes kept).
func (e *fetchedBlock) block() blocks.Block {
	b, _ := blocks.NewBlockWithCid(e.data, e.cid)
	return b
}

// node is f's MST node k, decoded (a missing one is errIncomplete: indigo's
// loader would leave the subtree out and its Walk would skip it), and its
// block's bytes.
func (f *fetched) node(k string) (n *mst.Node, data []byte, err error) {
	e, ok := f.index[k]
	if !ok {
		return nil, nil, fmt.Errorf("%w: MST node %s is missing", errIncomplete, cidOfKey(k))
	}
	d := e.dec
	if d.node == nil && d.err == nil {
		if e.data == nil || d.rec { // decoded as a record: not a node
			return nil, nil, fmt.Errorf("MST node %s: %w", cidOfKey(k), errNotNode)
		}
		d.node, d.err = parseNode(e.cid, e.data)
	}
	if d.err != nil {
		return nil, nil, fmt.Errorf("MST node %s: %w", cidOfKey(k), d.err)
	}
	if e.data == nil {
		return nil, nil, fmt.Errorf("%w: the bytes of MST node %s were not kept", errIncomplete, cidOfKey(k))
	}
	return d.node, e.data, nil
}

// errNotNode: an MST entry names a block that is a record, not a node.
var errNotNode = errors.New("the block is a record, not an MST node")

// commit parses and checks f's commit block.
func (f *fetched) commit(did syntax.DID) (*atrepo.Commit, error) {
	cb := f.rootBlk
	if cb == nil {
		return nil, fmt.Errorf("%w: no commit block", errIncomplete)
	}
	var commit atrepo.Commit
	if err := commit.UnmarshalCBOR(bytes.NewReader(cb.RawData())); err != nil {
		return nil, fmt.Errorf("parsing commit: %w", err)
	}
	if err := commit.VerifyStructure(); err != nil {
		return nil, fmt.Errorf("parsing commit: %w", err)
	}
	if commit.DID != did.String() {
		return nil, fmt.Errorf("CAR is the repository of %s, not %s", commit.DID, did)
	}
	return &commit, nil
}

func cidOfKey(k string) string {
	c, err := cid.Cast([]byte(k))
	if err != nil {
		return fmt.Sprintf("%x", k)
	}
	return c.String()
}

// SnapshotCAR reads the whole repository as one CAR (com.atproto.sync.getRepo),
// decoding it while it downloads, and keeps it for later reads.
//
// One whole read at a time: a caller that comes while one is under way
// (at start, a client's first read and the commit stream's catch-up) waits
// for it and shares its snapshot, instead of downloading and decoding the
// repository a second time beside it (at 100,000 records that doubled the
// memory of starting: 250 MB more at its peak). A waiter whose own context
// ends stops waiting; a read that failed because its caller's context ended
// is made again by a waiter whose context did not.
func (r *Repo) SnapshotCAR(ctx context.Context) (*store.Snapshot, error) {
	for {
		r.mu.Lock()
		w := r.whole
		if w == nil {
			w = &wholeRead{done: make(chan struct{})}
			r.whole = w
			r.mu.Unlock()
			w.s, w.err = r.snapshotCAR(ctx)
			r.mu.Lock()
			r.whole = nil
			r.mu.Unlock()
			close(w.done)
			return w.s, w.err
		}
		r.mu.Unlock()
		r.Stats.WholeWaits.Add(1)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-w.done:
		}
		if w.err != nil && (errors.Is(w.err, context.Canceled) || errors.Is(w.err, context.DeadlineExceeded)) && ctx.Err() == nil {
			continue // the reader's call ended, not ours: read
		}
		return w.s, w.err
	}
}

// wholeRead is a whole read under way and, once done is closed, its result.
type wholeRead struct {
	done chan struct{}
	s    *store.Snapshot
	err  error
}

func (r *Repo) snapshotCAR(ctx context.Context) (*store.Snapshot, error) {
	f, err := r.fetch(ctx, "", false)
	if err != nil {
		return nil, err
	}
	c, err := buildCAR(f, r.did)
	if err != nil {
		return nil, err
	}
	received := f.received
	f = nil // garbage from here on
	r.Stats.Walks.Add(1)
	r.mu.Lock()
	s, _, _ := c.snapshot(r.did) // made by buildCAR
	r.keep(c)
	r.mu.Unlock()
	if r.AfterWholeRead != nil {
		r.AfterWholeRead()
	}
	r.saveCache(received, true)
	return s, nil
}

// fetch downloads the repository as a CAR: all of it (since ""), or the
// blocks written after the revision since; raw keeps every block's bytes
// (readBlocks): the read's difference is taken.
func (r *Repo) fetch(ctx context.Context, since string, raw bool) (*fetched, error) {
	params := url.Values{"did": {r.did.String()}}
	if since != "" {
		params.Set("since", since)
		r.Stats.Diffs.Add(1)
	} else {
		r.Stats.CARs.Add(1)
	}
	var f *fetched
	err := send(ctx, r.c, r.Limits.car(), http.MethodGet, "com.atproto.sync.getRepo", params, nil, false, !r.gzip(), func(body io.Reader) error {
		var err error
		f, err = readBlocks(ctx, body, runtime.GOMAXPROCS(0)-1, raw)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("getRepo: %w", err)
	}
	return f, nil
}

// Compression says how CARs are asked for.
type Compression int

const (
	// CompressAuto asks for gzip (a fifth of the bytes), except from a
	// PDS on a loopback or private-network address, where bandwidth is
	// plentiful and compressing only costs the server time. Measured on a
	// 10k-bullet cold read through a 20 ms round trip: gzip 0.60 s against
	// 0.77 s uncompressed at 50 Mbit/s, but 0.54 s against 0.44 s at
	// 200 Mbit/s.
	CompressAuto Compression = iota
	// CompressGzip always asks for gzip.
	CompressGzip
	// CompressNone never does.
	CompressNone
)

func (r *Repo) gzip() bool {
	switch r.Compression {
	case CompressGzip:
		return true
	case CompressNone:
		return false
	}
	u, err := url.Parse(r.c.Host)
	if err != nil {
		return true
	}
	h := u.Hostname()
	if h == "localhost" {
		return false
	}
	ip, err := netip.ParseAddr(h)
	return err != nil || !(ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast())
}

// ReadCAR turns a repository CAR into a snapshot of its app.bulleted.*
// records.
func ReadCAR(ctx context.Context, rd io.Reader, did syntax.DID) (*store.Snapshot, error) {
	f, err := readBlocks(ctx, rd, runtime.GOMAXPROCS(0), false)
	if err != nil {
		return nil, err
	}
	c, err := buildCAR(f, did)
	if err != nil {
		return nil, err
	}
	return c.snap, nil
}

// appPrefix starts the repository paths of app.bulleted records (blocks
// are sorted with store.IsRecordBlock and store.IsAppRecordBlock).
var appPrefix = []byte(store.Prefix)

// readBlocks reads a CAR: the whole repository, or the blocks written since
// a revision. Blocks are decoded, spread over the CPUs, while the rest of
// the CAR is still arriving; the MST, loaded once all blocks are in, says
// which of them are the current records. raw keeps every block's bytes (a
// read whose difference is taken); otherwise only the bytes a whole walk
// needs are kept (fetched).
//
// workers is how many goroutines decode: from the network, one core fewer
// than there are, as the reading goroutine needs one (measured on two cores
// against the reference PDS: a cold 10k read 296 ms with one worker, 329 ms
// with two); from a file, all of them.
func readBlocks(ctx context.Context, rd io.Reader, workers int, keepRaw bool) (*fetched, error) {
	// go-car checks every block against its CID: content addressing is what
	// lets blocks of different reads (and of the cache file) be combined
	cr, hdr, err := newSectionReader(rd)
	if err != nil {
		return nil, fmt.Errorf("reading CAR header: %w", err)
	}
	if hdr.Version != 1 || len(hdr.Roots) == 0 {
		return nil, fmt.Errorf("unsupported CAR (version %d, %d roots)", hdr.Version, len(hdr.Roots))
	}
	root := hdr.Roots[0]

	// decoding: app.bulleted records and MST nodes (other apps' records
	// are kept as blocks); which blocks are current is decided by the MST.
	// The blocks are laid in slabs (a block's place never moves, so a
	// worker fills it while the reader goes on) and indexed once all are in
	// (a map sized once, instead of maps grown block by block).
	workers = max(workers, 1)
	work := make(chan *fetchedBlock, 1024)
	var wg sync.WaitGroup
	worker := func() {
		defer wg.Done()
		var values valueArena
		for e := range work {
			raw := e.data
			switch {
			case !store.IsRecordBlock(raw):
				e.dec.node, e.dec.err = parseNode(e.cid, raw)
			case store.IsAppRecordBlock(raw):
				// a copy of exactly the record's bytes: the block's own
				// buffer also holds its CID and length, and is rounded up
				// to an allocation size (the copy keeps about 40 bytes a
				// record fewer; the block is dropped once the CAR is read)
				e.dec.value, e.dec.err = store.SharedValue(values.copy(raw))
				e.dec.rec = true
			}
			switch {
			case keepRaw:
			case e.dec.rec && e.dec.err == nil:
				e.data = nil // kept as its value
			case e.dec.node != nil:
				e.data = values.copy(raw) // kept as its bytes, beside the values
			default:
				e.data = bytes.Clone(raw) // other apps' records, what did not decode: not the read's chunk
			}
		}
	}
	started := false
	start := func() { // on the first block: an unchanged repository brings none
		started = true
		for range workers {
			wg.Add(1)
			go worker()
		}
	}
	const slab = 1024
	var slabs [][]fetchedBlock
	n := 0
	f := &fetched{root: root}
	for {
		c, data, err := cr.section()
		if err == io.EOF {
			break
		}
		if err != nil {
			if started {
				close(work)
				wg.Wait()
			}
			return nil, fmt.Errorf("reading CAR: %w", err)
		}
		f.received++
		if c == root {
			f.rootBlk, _ = blocks.NewBlockWithCid(bytes.Clone(data), c) // not the read's chunk
			continue
		}
		if !started {
			start()
		}
		if n%slab == 0 {
			slabs = append(slabs, make([]fetchedBlock, slab))
		}
		e := &slabs[n/slab][n%slab]
		n++
		e.cid, e.data = c, data
		work <- e
	}
	if started {
		close(work)
		wg.Wait()
	}
	f.index = make(map[string]*fetchedBlock, n)
	for i := range n {
		e := &slabs[i/slab][i%slab]
		f.index[e.cid.KeyString()] = e
	}
	return f, nil
}

// valueArena lays the records' values (and MST nodes' blocks) of one read
// side by side in chunks,
// rather than each in an allocation of its own among the read's garbage
// (the CAR's sections, of the same sizes): spread that way, after the
// read each of the heap's spans held a few values and the rest was free
// but not given back (100k records: 51 MB in use beyond the live heap). A
// chunk lives while one of its values does (a value replaced by a later
// commit keeps its chunk until the chunk's other values go too).
type valueArena struct{ buf []byte }

// arenaChunk is a chunk's size: about a hundred values.
const arenaChunk = 32 << 10

// copy is raw copied into the arena (a large one in its own allocation).
func (a *valueArena) copy(raw []byte) []byte {
	b := a.make(len(raw))
	copy(b, raw)
	return b
}

// make is n bytes of the arena (a large one in its own allocation).
func (a *valueArena) make(n int) []byte {
	if n > arenaChunk/8 {
		return make([]byte, n)
	}
	if cap(a.buf)-len(a.buf) < n {
		a.buf = make([]byte, 0, arenaChunk)
	}
	start := len(a.buf)
	a.buf = a.buf[:start+n]
	return a.buf[start : start+n : start+n]
}

// buildCAR makes the kept repository from a CAR of the whole repository,
// walking all of its MST, with its snapshot.
func buildCAR(f *fetched, did syntax.DID) (*carRepo, error) {
	commit, err := f.commit(did)
	if err != nil {
		return nil, err
	}
	// the records decoded while f arrived bound the app.bulleted records
	// (a whole CAR holds only what is reachable), the blocks that are not
	// records the nodes (a map's table is sized once: one too big is twice
	// as big)
	n, nodes := 0, 0
	for _, e := range f.index {
		if e.dec.rec {
			n++
		} else if e.dec.node != nil || e.dec.err != nil {
			nodes++
		}
	}
	c := &carRepo{commit: f.root, rev: commit.Rev, root: commit.Data, nodes: make(map[string]keptNode, nodes),
		others: map[string]int32{}}
	s := &store.Snapshot{DID: did, Commit: f.root.String(), Rev: commit.Rev, Records: make([]store.Record, 0, n)}
	// every node as decoded while f arrived, kept as its bytes with its
	// app.bulleted records' values
	var names recordNames
	slab := make([]store.Value, 0, n+n/8)
	var walk func(id cid.Cid) error
	walk = func(id cid.Cid) error {
		k := id.KeyString()
		nd, data, err := f.node(k)
		if err != nil {
			return err
		}
		kn := keptNode{data: data}
		if values, app := valueCount(nd); app { // from one list for all nodes, as the names
			if cap(slab)-len(slab) < values {
				slab = make([]store.Value, 0, max(values, 1024))
			}
			kn.vals = slab[len(slab) : len(slab)+values : len(slab)+values]
			slab = slab[:len(slab)+values]
		}
		i := 0 // the entry's place among the node's values
		for _, e := range nd.Entries {
			switch {
			case e.ChildCID != nil:
				if err := walk(*e.ChildCID); err != nil {
					return err
				}
			case e.IsValue():
				if err := c.take(f, s, &names, &kn, i, e.Key, *e.Value); err != nil {
					return err
				}
				i++
			}
		}
		c.nodes[k] = kn
		return nil
	}
	if err := walk(commit.Data); err != nil {
		return nil, err
	}
	// only what is reachable is kept: the commit and other apps' records
	// as blocks (not the read's chunk)
	c.blocks = make(blockMap, len(c.others)+1)
	c.blocks[f.root.KeyString()] = f.rootBlk
	for k := range c.others {
		e, ok := f.index[k]
		if !ok {
			continue
		}
		data := e.data
		if data == nil && e.dec.rec && e.dec.err == nil {
			data = e.dec.value.CBOR() // an app.bulleted record another key names
		}
		if data != nil {
			b, err := blocks.NewBlockWithCid(data, e.cid)
			if err != nil {
				return nil, err
			}
			c.blocks[k] = own(b)
		}
	}
	if len(s.Records) < cap(s.Records)/8*7 {
		s.Records = slices.Clone(s.Records) // exactly as long
	}
	// MST order is key order, which is (collection, rkey) order for the
	// app's collection names; sort only if that ever stops being true
	if !slices.IsSortedFunc(s.Records, compareRecords) {
		sortRecords(s.Records)
	}
	c.snap = s
	return c, nil
}

// take notes the record val that key names, the i-th of the values of
// node n: an app.bulleted record's value is held in n's vals and listed in
// s (its names made by names); another app's is counted (buildCAR's
// walk).
func (c *carRepo) take(f *fetched, s *store.Snapshot, names *recordNames, n *keptNode, i int, key []byte, val cid.Cid) error {
	vk := val.KeyString()
	if !f.has(vk) {
		return fmt.Errorf("%w: record %s is missing", errIncomplete, key)
	}
	if !bytes.HasPrefix(key, appPrefix) {
		c.others[vk]++
		return nil
	}
	v, err := c.value(vk, f, nil)
	if err != nil {
		return fmt.Errorf("record %s: %w", key, err)
	}
	n.vals[i] = v
	c.held++
	coll, rkey := names.of(key)
	s.Records = append(s.Records, store.Record{Collection: coll, RKey: rkey, CID: names.cid(vk), Value: v})
	return nil
}

// value is the value of the record of CID key vk: in extra, decoded while
// f arrived, decoded now from f's or the kept blocks, or (the rare record
// that none of these holds: one whose key did not change, or a copy of
// another's bytes) found in the kept tree.
func (c *carRepo) value(vk string, f *fetched, extra map[string]carRecord) (store.Value, error) {
	if rec, ok := extra[vk]; ok {
		return rec.value, nil
	}
	if f != nil {
		if d, ok := f.decoded(vk); ok && d.rec {
			return d.value, d.err
		}
	}
	blk, ok := c.blocks[vk]
	if !ok && f != nil {
		blk, ok = f.block(vk)
	}
	if !ok {
		if v, ok := c.find(vk); ok {
			return v, nil
		}
		return store.Value{}, fmt.Errorf("%w: record block %s is missing", errIncomplete, cidOfKey(vk))
	}
	return store.DecodeValue(blk.RawData()) // a copy: not the read's chunk
}

// snapshot is the app.bulleted records at c's commit, made (by a walk of
// the whole MST) the first time it is asked for, and again if every reader
// dropped it since; made reports whether this call made it.
func (c *carRepo) snapshot(did syntax.DID) (s *store.Snapshot, made bool, err error) {
	if s = c.snap; s != nil {
		c.snap, c.given = nil, weak.Make(s)
		return s, false, nil
	}
	if s = c.given.Value(); s != nil {
		return s, false, nil
	}
	s = &store.Snapshot{DID: did, Commit: c.commit.String(), Rev: c.rev, Records: make([]store.Record, 0, c.held)}
	var names recordNames
	err = c.walk(func(key []byte, val cid.Cid, v store.Value) error {
		if !bytes.HasPrefix(key, appPrefix) {
			return nil
		}
		if v.IsZero() {
			return fmt.Errorf("record %s: its value is not kept", key)
		}
		coll, rkey := names.of(key)
		s.Records = append(s.Records, store.Record{Collection: coll, RKey: rkey, CID: names.cid(val.KeyString()), Value: v})
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if !slices.IsSortedFunc(s.Records, compareRecords) {
		sortRecords(s.Records)
	}
	c.given = weak.Make(s)
	return s, true, nil
}

// recordNames makes the collections, record keys and CIDs' texts of a
// snapshot's records: a collection is one string for all of its records,
// a record key and a CID's text are laid side by side in chunks
// (valueArena). Each in an allocation of its own, made while the read's
// decoded nodes were still live, they were spread among those nodes'
// allocations of the same sizes, and held the heap's spans part used once
// the nodes went (249k records: 25 MB in use beyond the live heap after a
// cold read); the collection and key pointed into their decoded node's
// array of keys, which they kept alive.
type recordNames struct {
	colls map[string]string
	arena valueArena
}

// cid is the text of the CID whose bytes are k (cidText's).
func (n *recordNames) cid(k string) string {
	if len(k) < 2 || k[0] != 1 {
		return cidText(k)
	}
	b := n.arena.make(1 + cidBase32.EncodedLen(len(k)))
	b[0] = 'b'
	cidBase32.Encode(b[1:], unsafe.Slice(unsafe.StringData(k), len(k)))
	return unsafe.String(&b[0], len(b))
}

// of is key's collection and record key (strings.Cut's, at the first
// "/").
func (n *recordNames) of(key []byte) (coll, rkey string) {
	i := bytes.IndexByte(key, '/')
	if i < 0 {
		i = len(key)
	}
	if n.colls == nil {
		n.colls = map[string]string{}
	}
	coll, ok := n.colls[string(key[:i])]
	if !ok {
		coll = string(key[:i])
		n.colls[coll] = coll
	}
	if i+1 < len(key) {
		b := n.arena.copy(key[i+1:])
		rkey = unsafe.String(&b[0], len(b))
	}
	return coll, rkey
}

// node is the kept MST node k, decoded (children not linked), with its
// values (keptNode.vals); a node that is not kept is errIncomplete.
func (c *carRepo) node(k string) (*mst.Node, []store.Value, error) {
	kn, ok := c.nodes[k]
	if !ok {
		return nil, nil, fmt.Errorf("%w: MST node %s is not kept", errIncomplete, cidOfKey(k))
	}
	id, err := cid.Cast([]byte(k))
	if err != nil {
		return nil, nil, err
	}
	n, err := parseNode(id, kn.data)
	if err != nil {
		return nil, nil, fmt.Errorf("kept MST node %s: %w", id, err)
	}
	return n, kn.vals, nil
}

// valueCount is how many of n's entries are values (keptNode.vals's
// length), and whether an app.bulleted key names one.
func valueCount(n *mst.Node) (values int, app bool) {
	for _, e := range n.Entries {
		if e.IsValue() {
			values++
			app = app || bytes.HasPrefix(e.Key, appPrefix)
		}
	}
	return values, app
}

// valueAt is the i-th of a node's values (zero: another app's record).
func valueAt(vals []store.Value, i int) store.Value {
	if i < len(vals) {
		return vals[i]
	}
	return store.Value{}
}

// walk calls fn on every key of c's tree, in key order, with its record's
// value (zero: another app's).
func (c *carRepo) walk(fn func(key []byte, val cid.Cid, v store.Value) error) error {
	var walk func(k string) error
	walk = func(k string) error {
		n, vals, err := c.node(k)
		if err != nil {
			return err
		}
		i := 0
		for _, e := range n.Entries {
			switch {
			case e.ChildCID != nil:
				if err := walk(e.ChildCID.KeyString()); err != nil {
					return err
				}
			case e.IsValue():
				if err := fn(e.Key, *e.Value, valueAt(vals, i)); err != nil {
					return err
				}
				i++
			}
		}
		return nil
	}
	return walk(c.root.KeyString())
}

// lookup is the value of key in c's tree (undefined: not there), and its
// record's value (zero: another app's).
func (c *carRepo) lookup(key []byte) (cid.Cid, store.Value, error) {
	k := c.root.KeyString()
	for k != "" {
		n, vals, err := c.node(k)
		if err != nil {
			return cid.Undef, store.Value{}, err
		}
		child := "" // the subtree left of the entry looked at
		i := 0
	entries:
		for _, e := range n.Entries {
			if !e.IsValue() {
				child = e.ChildCID.KeyString()
				continue
			}
			switch c := bytes.Compare(e.Key, key); {
			case c == 0:
				return *e.Value, valueAt(vals, i), nil
			case c > 0:
				break entries
			default:
				child = ""
			}
			i++
		}
		k = child
	}
	return cid.Undef, store.Value{}, nil
}

// parseNode decodes an MST node as indigo's NodeData.Node does, in fewer
// allocations (its keys share one array, its CIDs another, and nothing of
// the NodeData is kept).
func parseNode(id cid.Cid, raw []byte) (n *mst.Node, err error) {
	d, err := mst.NodeDataFromCBOR(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	entries, cids, klen, prev := len(d.Entries), 1+len(d.Entries), 0, 0
	if d.Left != nil {
		entries++
		cids++
	}
	for _, e := range d.Entries {
		if e.PrefixLen < 0 || int(e.PrefixLen) > prev {
			return nil, fmt.Errorf("an entry's key shares %d bytes with the previous %d-byte key", e.PrefixLen, prev)
		}
		prev = int(e.PrefixLen) + len(e.KeySuffix)
		klen += prev
		if e.Right != nil {
			entries++
			cids++
		}
	}
	keys := make([]byte, 0, klen)
	ids := make([]cid.Cid, 0, cids) // never grown: the node points into it
	ref := func(c cid.Cid) *cid.Cid {
		ids = append(ids, c)
		return &ids[len(ids)-1]
	}
	n = &mst.Node{CID: ref(id), Height: -1, Entries: make([]mst.NodeEntry, 0, entries)}
	if d.Left != nil {
		n.Entries = append(n.Entries, mst.NodeEntry{ChildCID: ref(*d.Left)})
	}
	var key []byte
	for _, e := range d.Entries {
		start := len(keys)
		keys = append(keys, key[:e.PrefixLen]...)
		keys = append(keys, e.KeySuffix...)
		key = keys[start:len(keys):len(keys)]
		n.Entries = append(n.Entries, mst.NodeEntry{Key: key, Value: ref(e.Value)})
		if n.Height < 0 {
			n.Height = mst.HeightForKey(key)
		}
		if e.Right != nil {
			n.Entries = append(n.Entries, mst.NodeEntry{ChildCID: ref(*e.Right)})
		}
	}
	return n, nil
}
