package pds

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/bluesky-social/indigo/atproto/atdata"
	atrepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/repo/mst"
	"github.com/bluesky-social/indigo/atproto/syntax"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	car "github.com/ipld/go-car"

	"github.com/bulleted-mcp/bulleted-mcp/store"
)

// errIncomplete: the blocks at hand do not hold the whole MST or every
// record (a getRepo?since= answer that does not fit what was kept).
var errIncomplete = errors.New("the CAR does not hold the whole repository")

// blockMap holds blocks by CID key.
type blockMap map[string]blocks.Block

// carRepo is one downloaded repository: its snapshot, the blocks reachable
// from its commit (and, between compactions, some that no longer are), and
// those blocks decoded; kept so that a later getRepo?since=rev, which sends
// only newer blocks, can be completed and only the new blocks decoded.
type carRepo struct {
	snap   *store.Snapshot
	blocks blockMap
	nodes  map[string]*mst.Node // MST nodes by CID key; never modified
	recs   map[string]carRecord // app.bulleted records by CID key
	// received is how many blocks the read that made it brought
	received int
}

type carRecord struct {
	cid   string
	value map[string]any
}

// SnapshotCAR reads the whole repository as one CAR (com.atproto.sync.getRepo),
// decoding it while it downloads.
func (r *Repo) SnapshotCAR(ctx context.Context) (*store.Snapshot, error) {
	return r.snapshotCAR(ctx, nil)
}

// snapshotCAR reads the whole repository (base nil), or completes base with
// getRepo?since=base.rev: only the blocks written after base come over the
// wire.
func (r *Repo) snapshotCAR(ctx context.Context, base *carRepo) (*store.Snapshot, error) {
	cr, err := r.fetchCAR(ctx, base)
	if err != nil {
		return nil, err
	}
	if base != nil && cr.snap == base.snap { // unchanged
		if cr.received > len(base.blocks)/2 {
			// the whole repository again: this PDS ignores since
			r.mu.Lock()
			r.noSince = true
			r.mu.Unlock()
		}
		return base.snap, nil
	}
	r.mu.Lock()
	r.car = cr
	r.mu.Unlock()
	r.saveCache(cr, base == nil)
	return cr.snap, nil
}

func (r *Repo) fetchCAR(ctx context.Context, base *carRepo) (*carRepo, error) {
	params := url.Values{"did": {r.did.String()}}
	if base != nil {
		params.Set("since", base.snap.Rev)
		r.Stats.Diffs.Add(1)
	} else {
		r.Stats.CARs.Add(1)
	}
	var cr *carRepo
	err := send(ctx, r.c, r.Limits.car(), http.MethodGet, "com.atproto.sync.getRepo", params, nil, false, !r.gzip(), func(body io.Reader) error {
		var err error
		cr, err = readCAR(ctx, body, r.did, base, runtime.GOMAXPROCS(0)-1)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("getRepo: %w", err)
	}
	return cr, nil
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
	cr, err := readCAR(ctx, rd, did, nil, runtime.GOMAXPROCS(0))
	if err != nil {
		return nil, err
	}
	return cr.snap, nil
}

// A record block has a "$type" key (CBOR text of length 5), which no MST
// node or commit has; an app.bulleted record also has the app's NSID prefix.
var (
	typeKey    = []byte("\x65$type")
	recordMark = []byte("app.bulleted.")
)

// readCAR reads a CAR: the whole repository (base nil), or the blocks
// written since base. Blocks are decoded, spread over the CPUs, while the
// rest of the CAR is still arriving; the MST, loaded once all blocks are in,
// says which of them are the current records.
//
// workers is how many goroutines decode: from the network, one core fewer
// than there are, as the reading goroutine needs one (measured on two cores
// against the reference PDS: a cold 10k read 296 ms with one worker, 329 ms
// with two); from a file, all of them.
func readCAR(ctx context.Context, rd io.Reader, did syntax.DID, base *carRepo, workers int) (*carRepo, error) {
	// go-car checks every block against its CID: content addressing is what
	// lets blocks of different reads (and of the cache file) be combined
	cr, err := car.NewCarReader(bufio.NewReaderSize(rd, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("reading CAR header: %w", err)
	}
	if cr.Header.Version != 1 || len(cr.Header.Roots) == 0 {
		return nil, fmt.Errorf("unsupported CAR (version %d, %d roots)", cr.Header.Version, len(cr.Header.Roots))
	}
	root := cr.Header.Roots[0]

	// decoding: app.bulleted records and MST nodes (other apps' records
	// are skipped); which blocks are current is decided by the MST
	type decoded struct {
		rec  carRecord
		node *mst.Node // children not linked yet
		err  error
	}
	workers = max(workers, 1)
	work := make(chan blocks.Block, 1024)
	results := make([]map[string]decoded, workers)
	var wg sync.WaitGroup
	worker := func(w int) {
		defer wg.Done()
		for blk := range work {
			var d decoded
			raw := blk.RawData()
			switch {
			case !bytes.Contains(raw, typeKey):
				d.node, d.err = decodeNode(blk)
			case bytes.Contains(raw, recordMark):
				d.rec.value, d.err = atdata.UnmarshalCBOR(raw)
				d.rec.cid = blk.Cid().String()
			default:
				continue
			}
			results[w][blk.Cid().KeyString()] = d
		}
	}
	started := false
	start := func() { // on the first block: an unchanged repository brings none
		started = true
		for w := range workers {
			results[w] = map[string]decoded{}
			wg.Add(1)
			go worker(w)
		}
	}
	found := func(k string) (decoded, bool) {
		for _, m := range results {
			if d, ok := m[k]; ok {
				return d, true
			}
		}
		return decoded{}, false
	}
	out := &carRepo{}
	bs := blockMap{}
	if base == nil {
		bs = make(blockMap, 1024)
	}
	for {
		blk, err := cr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			close(work)
			wg.Wait()
			return nil, fmt.Errorf("reading CAR: %w", err)
		}
		bs[blk.Cid().KeyString()] = blk
		out.received++
		if blk.Cid() != root {
			if !started {
				start()
			}
			work <- blk
		}
	}
	close(work)
	wg.Wait()
	if base != nil && root.String() == base.snap.Commit {
		unchanged := *base
		unchanged.received = out.received
		return &unchanged, nil
	}
	if base == nil {
		n := 0
		for _, m := range results {
			n += len(m)
		}
		out.blocks, out.nodes, out.recs = bs, map[string]*mst.Node{}, make(map[string]carRecord, n)
	} else {
		out.blocks, out.nodes, out.recs = maps.Clone(base.blocks), maps.Clone(base.nodes), maps.Clone(base.recs)
		maps.Copy(out.blocks, bs)
		bs = out.blocks
	}

	cb, ok := bs[root.KeyString()]
	if !ok {
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
	out.snap = &store.Snapshot{DID: did, Commit: root.String(), Rev: commit.Rev}

	// the MST: unchanged subtrees are base's, the rest is decoded here; a
	// missing node is an error (indigo's loader would leave the subtree out
	// and its Walk would skip it)
	var load func(c cid.Cid) (*mst.Node, error)
	load = func(c cid.Cid) (*mst.Node, error) {
		k := c.KeyString()
		if n, ok := out.nodes[k]; ok {
			return n, nil
		}
		blk, ok := bs[k]
		if !ok {
			return nil, fmt.Errorf("%w: MST node %s is missing", errIncomplete, c)
		}
		d, ok := found(k)
		if !ok || d.node == nil {
			d.node, d.err = decodeNode(blk)
		}
		if d.err != nil {
			return nil, fmt.Errorf("MST node %s: %w", c, d.err)
		}
		n := d.node
		for i, e := range n.Entries {
			if e.ChildCID != nil {
				child, err := load(*e.ChildCID)
				if err != nil {
					return nil, err
				}
				n.Entries[i].Child = child
			}
		}
		out.nodes[k] = n
		return n, nil
	}
	rootNode, err := load(commit.Data)
	if err != nil {
		return nil, err
	}
	tree := mst.Tree{Root: rootNode}
	reachable := 1 + countNodes(rootNode)
	err = tree.Walk(func(key []byte, val cid.Cid) error {
		vk := val.KeyString()
		blk, ok := bs[vk]
		if !ok {
			return fmt.Errorf("%w: record %s is missing", errIncomplete, key)
		}
		reachable++
		k := string(key)
		if !strings.HasPrefix(k, store.Prefix) {
			return nil
		}
		rec, ok := out.recs[vk]
		if !ok {
			d, ok := found(vk)
			if !ok || d.rec.cid == "" { // not decoded as a record
				d.rec.value, d.err = atdata.UnmarshalCBOR(blk.RawData())
				d.rec.cid = val.String()
			}
			if d.err != nil {
				return fmt.Errorf("record %s: %w", k, d.err)
			}
			rec = d.rec
		}
		out.recs[vk] = rec
		coll, rkey, _ := strings.Cut(k, "/")
		out.snap.Records = append(out.snap.Records, store.Record{Collection: coll, RKey: rkey, CID: rec.cid, Value: rec.value})
		return nil
	})
	if err != nil {
		return nil, err
	}
	// blocks, nodes and records no longer reachable pile up across
	// incremental reads: drop them once they are a fifth of what is kept
	if len(out.blocks) > reachable+reachable/4+64 {
		out.compact(root, &tree)
	}
	// MST order is key order, which is (collection, rkey) order for the
	// app's collection names; sort only if that ever stops being true
	if !slices.IsSortedFunc(out.snap.Records, compareRecords) {
		sortRecords(out.snap.Records)
	}
	return out, nil
}

// compact keeps only what is reachable from the commit root.
func (c *carRepo) compact(root cid.Cid, tree *mst.Tree) {
	blocks := make(blockMap, len(c.blocks))
	nodes := make(map[string]*mst.Node, len(c.nodes))
	recs := make(map[string]carRecord, len(c.recs))
	blocks[root.KeyString()] = c.blocks[root.KeyString()]
	var keep func(n *mst.Node)
	keep = func(n *mst.Node) {
		k := n.CID.KeyString()
		nodes[k], blocks[k] = n, c.blocks[k]
		for _, e := range n.Entries {
			if e.Child != nil {
				keep(e.Child)
			}
		}
	}
	keep(tree.Root)
	_ = tree.Walk(func(_ []byte, val cid.Cid) error {
		k := val.KeyString()
		blocks[k] = c.blocks[k]
		if r, ok := c.recs[k]; ok {
			recs[k] = r
		}
		return nil
	})
	c.blocks, c.nodes, c.recs = blocks, nodes, recs
}

func decodeNode(blk blocks.Block) (*mst.Node, error) {
	nd, err := mst.NodeDataFromCBOR(bytes.NewReader(blk.RawData()))
	if err != nil {
		return nil, err
	}
	c := blk.Cid()
	n := nd.Node(&c)
	return &n, nil
}

func countNodes(n *mst.Node) int {
	count := 1
	for _, e := range n.Entries {
		if e.Child != nil {
			count += countNodes(e.Child)
		}
	}
	return count
}
