package pds

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"runtime"
	"strings"
	"sync"

	"github.com/bluesky-social/indigo/atproto/atdata"
	atrepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/repo/mst"
	"github.com/bluesky-social/indigo/atproto/syntax"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	car "github.com/ipld/go-car"

	"github.com/bulleted-mcp/bulleted-mcp/store"
)

// errIncomplete: the blocks at hand do not hold the whole MST or every
// record (a getRepo?since= answer that does not fit what was kept).
var errIncomplete = errors.New("the CAR does not hold the whole repository")

// blockMap is a CID-keyed block store.
type blockMap map[string]blocks.Block

func (m blockMap) Get(_ context.Context, c cid.Cid) (blocks.Block, error) {
	if b, ok := m[c.KeyString()]; ok {
		return b, nil
	}
	return nil, &ipld.ErrNotFound{Cid: c}
}

// Repo is one downloaded repository: its snapshot and exactly the blocks
// reachable from its commit (kept so that a later getRepo?since=rev, which
// sends only newer blocks, can be completed).
type carRepo struct {
	snap   *store.Snapshot
	blocks blockMap
	// values of the snapshot's records by CID
	values map[string]map[string]any
}

// SnapshotCAR reads the whole repository as one CAR (com.atproto.sync.getRepo),
// decoding it while it downloads.
func (r *Repo) SnapshotCAR(ctx context.Context) (*store.Snapshot, error) {
	cr, err := r.fetchCAR(ctx, nil)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.car = cr
	r.mu.Unlock()
	return cr.snap, nil
}

// snapshotSince completes base with getRepo?since=base.rev: only the blocks
// written after base come over the wire.
func (r *Repo) snapshotSince(ctx context.Context, base *carRepo) (*store.Snapshot, error) {
	cr, err := r.fetchCAR(ctx, base)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.car = cr
	r.mu.Unlock()
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
	err := send(ctx, r.c, http.MethodGet, "com.atproto.sync.getRepo", params, nil, false, !r.gzip(), func(body io.Reader) error {
		var err error
		cr, err = readCAR(ctx, body, r.did, base)
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
	// PDS on a loopback address, where bandwidth is free and compressing
	// only costs the server time.
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
	return err != nil || !ip.IsLoopback()
}

// ReadCAR turns a repository CAR into a snapshot of its app.bulleted.*
// records.
func ReadCAR(ctx context.Context, rd io.Reader, did syntax.DID) (*store.Snapshot, error) {
	cr, err := readCAR(ctx, rd, did, nil)
	if err != nil {
		return nil, err
	}
	return cr.snap, nil
}

// recordMark is in every app.bulleted record block (its $type) and in no
// MST node or commit block.
var recordMark = []byte("app.bulleted.")

// readCAR reads a CAR: the whole repository (base nil), or the blocks
// written since base. Record blocks are decoded, spread over the CPUs, while
// the rest of the CAR is still arriving; the MST, walked once all blocks are
// in, says which of them are the current records.
func readCAR(ctx context.Context, rd io.Reader, did syntax.DID, base *carRepo) (*carRepo, error) {
	cr, err := car.NewCarReader(bufio.NewReaderSize(rd, 256<<10))
	if err != nil {
		return nil, fmt.Errorf("reading CAR header: %w", err)
	}
	if cr.Header.Version != 1 || len(cr.Header.Roots) == 0 {
		return nil, fmt.Errorf("unsupported CAR (version %d, %d roots)", cr.Header.Version, len(cr.Header.Roots))
	}
	root := cr.Header.Roots[0]

	type decoded struct {
		v   map[string]any
		err error
	}
	workers := runtime.GOMAXPROCS(0)
	work := make(chan blocks.Block, 1024)
	results := make([]map[string]decoded, workers)
	var wg sync.WaitGroup
	for w := range workers {
		results[w] = map[string]decoded{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for blk := range work {
				v, err := atdata.UnmarshalCBOR(blk.RawData())
				results[w][blk.Cid().KeyString()] = decoded{v, err}
			}
		}()
	}
	var bs blockMap
	if base != nil {
		bs = make(blockMap, len(base.blocks)+64)
		for k, b := range base.blocks {
			bs[k] = b
		}
	} else {
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
		if bytes.Contains(blk.RawData(), recordMark) && blk.Cid() != root {
			work <- blk
		}
	}
	close(work)
	wg.Wait()

	cb, err := bs.Get(ctx, root)
	if err != nil {
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
	tree, err := mst.LoadTreeFromStore(ctx, bs, commit.Data)
	if err != nil {
		if ipld.IsNotFound(err) {
			return nil, fmt.Errorf("%w: %v", errIncomplete, err)
		}
		return nil, fmt.Errorf("reading MST: %w", err)
	}
	// LoadTreeFromStore leaves out missing subtrees, and Walk skips them
	if tree.IsPartial() {
		return nil, fmt.Errorf("%w: MST nodes are missing", errIncomplete)
	}
	out := &carRepo{
		snap:   &store.Snapshot{DID: did, Commit: root.String(), Rev: commit.Rev},
		blocks: make(blockMap, len(bs)),
		values: map[string]map[string]any{},
	}
	keep := func(c cid.Cid) {
		k := c.KeyString()
		out.blocks[k] = bs[k]
	}
	keep(root)
	var nodes func(n *mst.Node)
	nodes = func(n *mst.Node) {
		if n.CID != nil {
			keep(*n.CID)
		}
		for _, e := range n.Entries {
			if e.Child != nil {
				nodes(e.Child)
			}
		}
	}
	nodes(tree.Root)
	err = tree.Walk(func(key []byte, val cid.Cid) error {
		vk := val.KeyString()
		blk, ok := bs[vk]
		if !ok {
			return fmt.Errorf("%w: record %s is missing", errIncomplete, key)
		}
		out.blocks[vk] = blk
		k := string(key)
		if !strings.HasPrefix(k, store.Prefix) {
			return nil
		}
		cs := val.String()
		v, found := base.value(cs)
		if !found {
			var d decoded
			for _, m := range results {
				if d, found = m[vk]; found {
					break
				}
			}
			if !found {
				d.v, d.err = atdata.UnmarshalCBOR(blk.RawData())
			}
			if d.err != nil {
				return fmt.Errorf("record %s: %w", k, d.err)
			}
			v = d.v
		}
		out.values[cs] = v
		coll, rkey, _ := strings.Cut(k, "/")
		out.snap.Records = append(out.snap.Records, store.Record{Collection: coll, RKey: rkey, CID: cs, Value: v})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortRecords(out.snap.Records)
	return out, nil
}

// value is the decoded value of a record block base already had.
func (c *carRepo) value(cid string) (map[string]any, bool) {
	if c == nil {
		return nil, false
	}
	v, ok := c.values[cid]
	return v, ok
}
