package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	atrepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/repo/mst"
	"github.com/bluesky-social/indigo/atproto/syntax"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	car "github.com/ipld/go-car"
	"github.com/multiformats/go-multihash"

	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

var (
	// ErrDamagedCAR means an import found a CAR that is not a whole,
	// well-formed repository: a block that does not hash to its CID, an MST
	// node reached twice (a cycle) or nested deeper than any real MST, keys
	// out of order, a missing node or record. Nothing was imported.
	ErrDamagedCAR = errors.New("the CAR is damaged")
	// ErrCARTooLarge means an import found a CAR over an import's bounds
	// (MaxImportBytes in all, MaxSection a block, lexicon.MaxRepoRecords
	// app.bulleted records). Nothing was imported.
	ErrCARTooLarge = errors.New("the CAR is too large")
)

const (
	// MaxImportBytes bounds the CAR an import reads (the bound package pds
	// puts on a getRepo answer).
	MaxImportBytes = 512 << 20
	// MaxMSTDepth bounds how deep an imported MST may nest: a real MST of
	// 250,000 records is about a dozen levels deep (a level per two bits of
	// leading zeros of a key's SHA-256).
	MaxMSTDepth = 64
	// maxHeader bounds a CAR header (a version and a root or two).
	maxHeader = 64 << 10
)

// maxImportRecords is the bound on the app.bulleted records an import
// brings: the one the engine enforces on every write.
var maxImportRecords = lexicon.MaxRepoRecords

// importSource is what an import keeps of a CAR: its commit's DID, the
// app.bulleted paths in key order with their record CIDs, and the blocks of
// those records. Other apps' records are dropped as they are read.
type importSource struct {
	did    string
	others int // keys of other apps, not imported
	paths  []string
	vals   []cid.Cid
	recs   map[cid.Cid][]byte
}

// readImportCAR reads a repository CAR for an import, within bounds: the
// CAR is streamed (at most MaxImportBytes, a block at most MaxSection),
// every block is checked against its CID (CIDv1, DAG-CBOR, SHA-256, as
// every repository block is) as it arrives, only MST nodes, the commit and
// app.bulleted records are kept, and the MST is walked from the commit with
// every node reached once, no deeper than MaxMSTDepth, keys strictly
// increasing. More than maxImportRecords app.bulleted records refuse it.
func readImportCAR(ctx context.Context, r io.Reader) (*importSource, error) {
	br := bufio.NewReaderSize(&capped{r: r, left: MaxImportBytes}, 64<<10)
	if _, _, err := peekLen(br, maxHeader, "header"); err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("%w: empty file", ErrDamagedCAR)
		}
		return nil, err
	}
	hdr, err := car.ReadHeader(br)
	if err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrDamagedCAR, err)
	}
	if hdr.Version != 1 || len(hdr.Roots) == 0 {
		return nil, fmt.Errorf("%w: unsupported CAR (version %d, %d roots)", ErrDamagedCAR, hdr.Version, len(hdr.Roots))
	}
	root := hdr.Roots[0]
	nodes := map[cid.Cid][]byte{} // blocks without "$type": MST nodes and the commit
	src := &importSource{recs: map[cid.Cid][]byte{}}
	var buf []byte
	for i := 0; ; i++ {
		if i%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		n, k, err := peekLen(br, MaxSection, "block")
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n, max(int(n), 64<<10))
		}
		buf = buf[:n]
		if _, err := br.Discard(k); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, fmt.Errorf("%w: block %d is cut short: %w", ErrDamagedCAR, i+1, unexpected(err))
		}
		cl, c, err := cid.CidFromBytes(buf)
		if err != nil {
			return nil, fmt.Errorf("%w: block %d: %w", ErrDamagedCAR, i+1, err)
		}
		if p := c.Prefix(); p.Version != 1 || p.Codec != cid.DagCBOR || p.MhType != multihash.SHA2_256 {
			return nil, fmt.Errorf("%w: block %s is not DAG-CBOR hashed with SHA-256, as every repository block is", ErrDamagedCAR, c)
		}
		data := buf[cl:]
		if !matches(c, data) {
			return nil, fmt.Errorf("%w: block %s does not hash to its CID", ErrDamagedCAR, c)
		}
		switch {
		case !IsRecordBlock(data):
			nodes[c] = bytes.Clone(data)
		case IsAppRecordBlock(data):
			src.recs[c] = bytes.Clone(data)
		}
	}
	buf = nil
	cb, ok := nodes[root]
	if !ok {
		return nil, fmt.Errorf("%w: no commit block (root %s)", ErrDamagedCAR, root)
	}
	var commit atrepo.Commit
	if err := commit.UnmarshalCBOR(bytes.NewReader(cb)); err != nil {
		return nil, fmt.Errorf("%w: commit %s: %w", ErrDamagedCAR, root, err)
	}
	if commit.Version != 2 && commit.Version != 3 {
		return nil, fmt.Errorf("%w: commit %s: unsupported repository version %d", ErrDamagedCAR, root, commit.Version)
	}
	if _, err := syntax.ParseDID(commit.DID); err != nil {
		return nil, fmt.Errorf("%w: commit %s: %w", ErrDamagedCAR, root, err)
	}
	src.did = commit.DID
	delete(nodes, root)

	w := mstWalk{ctx: ctx, nodes: nodes, seen: map[cid.Cid]bool{}, src: src}
	if err := w.node(commit.Data, 1); err != nil {
		return nil, err
	}
	return src, nil
}

// A record block has a "$type" key (CBOR text of length 5), which no MST
// node or commit has; an app.bulleted record also has the app's prefix.
var (
	typeKey    = []byte("\x65$type")
	recordMark = []byte(Prefix)
)

// IsRecordBlock reports whether a repository block is a record (it has a
// "$type" key), not an MST node or a commit. Reading a CAR, this sorts the
// blocks without decoding them.
func IsRecordBlock(raw []byte) bool { return bytes.Contains(raw, typeKey) }

// IsAppRecordBlock reports whether a record block may be an app.bulleted
// record (it holds the app's prefix); other apps' records are left out.
func IsAppRecordBlock(raw []byte) bool { return bytes.Contains(raw, recordMark) }

// mstWalk walks an imported MST in key order.
type mstWalk struct {
	ctx   context.Context
	nodes map[cid.Cid][]byte
	seen  map[cid.Cid]bool
	src   *importSource
	last  []byte // the last key met
	n     int    // nodes walked
}

func (w *mstWalk) node(id cid.Cid, depth int) error {
	if depth > MaxMSTDepth {
		return fmt.Errorf("%w: the MST nests deeper than %d levels (at node %s); no real MST does", ErrDamagedCAR, MaxMSTDepth, id)
	}
	if w.seen[id] {
		return fmt.Errorf("%w: MST node %s is reached twice (a cycle or a shared subtree)", ErrDamagedCAR, id)
	}
	w.seen[id] = true
	if w.n++; w.n%1024 == 0 && w.ctx.Err() != nil {
		return w.ctx.Err()
	}
	raw, ok := w.nodes[id]
	if !ok {
		return fmt.Errorf("%w: MST node %s is missing", ErrDamagedCAR, id)
	}
	nd, err := mst.NodeDataFromCBOR(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("%w: MST node %s: %w", ErrDamagedCAR, id, err)
	}
	delete(w.nodes, id) // decoded: its bytes are no longer needed
	if nd.Left != nil {
		if err := w.node(*nd.Left, depth+1); err != nil {
			return err
		}
	}
	var prev []byte
	for _, e := range nd.Entries {
		if e.PrefixLen < 0 || e.PrefixLen > int64(len(prev)) {
			return fmt.Errorf("%w: MST node %s: a key shares %d bytes with a previous key of %d", ErrDamagedCAR, id, e.PrefixLen, len(prev))
		}
		key := append(prev[:e.PrefixLen:e.PrefixLen], e.KeySuffix...)
		if !mst.IsValidKey(key) {
			return fmt.Errorf("%w: MST node %s: invalid key %.80q", ErrDamagedCAR, id, key)
		}
		if w.last != nil && bytes.Compare(key, w.last) <= 0 {
			return fmt.Errorf("%w: MST node %s: key %.80q is not after %.80q", ErrDamagedCAR, id, key, w.last)
		}
		w.last, prev = key, key
		if bytes.HasPrefix(key, recordMark) {
			if len(w.src.paths) >= maxImportRecords {
				return fmt.Errorf("%w: more than %d app.bulleted records (the bound on a repository); nothing was imported", ErrCARTooLarge, maxImportRecords)
			}
			coll, rkey, _ := strings.Cut(string(key), "/")
			if _, err := syntax.ParseNSID(coll); err != nil {
				return fmt.Errorf("%w: MST key %.80q is not a record path: %w", ErrDamagedCAR, key, err)
			}
			if _, err := syntax.ParseRecordKey(rkey); err != nil {
				return fmt.Errorf("%w: MST key %.80q is not a record path: %w", ErrDamagedCAR, key, err)
			}
			if _, ok := w.src.recs[e.Value]; !ok {
				return fmt.Errorf("%w: record %s (%s) is missing, or is not an app.bulleted record", ErrDamagedCAR, key, e.Value)
			}
			w.src.paths = append(w.src.paths, string(key))
			w.src.vals = append(w.src.vals, e.Value)
		} else {
			w.src.others++
		}
		if e.Right != nil {
			if err := w.node(*e.Right, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// peekLen is the length of the next CAR section (io.EOF: there is none),
// and the bytes of its varint; refused if over max.
func peekLen(br *bufio.Reader, max uint64, what string) (uint64, int, error) {
	b, err := br.Peek(binary.MaxVarintLen64)
	if len(b) == 0 {
		if err == io.EOF {
			return 0, 0, io.EOF
		}
		return 0, 0, err
	}
	n, k := binary.Uvarint(b)
	switch {
	case k <= 0 && err != nil && err != io.EOF:
		return 0, 0, err
	case k <= 0:
		return 0, 0, fmt.Errorf("%w: malformed %s length", ErrDamagedCAR, what)
	case n == 0:
		return 0, 0, fmt.Errorf("%w: empty %s", ErrDamagedCAR, what)
	case n > max:
		return 0, 0, fmt.Errorf("%w: a %s of %d bytes (at most %d)", ErrCARTooLarge, what, n, max)
	}
	return n, k, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// capped reads at most left bytes of r; one more is ErrCARTooLarge.
type capped struct {
	r    io.Reader
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		var one [1]byte
		if n, _ := io.ReadFull(c.r, one[:]); n == 0 {
			return 0, io.EOF
		}
		return 0, fmt.Errorf("%w: more than %d bytes (MaxImportBytes)", ErrCARTooLarge, int64(MaxImportBytes))
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// importRecord is one record an import writes: its path and DAG-CBOR.
type importRecord struct {
	path string
	raw  []byte
}

// commitRecords puts the blocks of a repository of exactly recs (in key
// order) and its signed commit in l's pending blocks, and returns the
// commit's CID. The MST is built in place (indigo's atproto/repo/mst) and
// encoded once, rather than copied on every insert.
func (l *Local) commitRecords(ctx context.Context, recs []importRecord) (cid.Cid, error) {
	prefix := cid.NewPrefixV1(cid.DagCBOR, multihash.SHA2_256)
	put := func(data []byte) (cid.Cid, error) {
		c, err := prefix.Sum(data)
		if err != nil {
			return cid.Undef, err
		}
		blk, err := blocks.NewBlockWithCid(data, c)
		if err != nil {
			return cid.Undef, err
		}
		return c, l.bs.Put(ctx, blk)
	}
	tree := mst.NewEmptyTree()
	for _, x := range recs {
		c, err := put(x.raw)
		if err != nil {
			return cid.Undef, err
		}
		if _, err := tree.Insert([]byte(x.path), c); err != nil {
			return cid.Undef, fmt.Errorf("record %s: %w", x.path, err)
		}
	}
	data, err := tree.RootCID() // every node's CID, children first
	if err != nil {
		return cid.Undef, err
	}
	var putNode func(n *mst.Node) error
	putNode = func(n *mst.Node) error {
		for _, e := range n.Entries {
			if e.Child != nil {
				if err := putNode(e.Child); err != nil {
					return err
				}
			}
		}
		nd := n.NodeData()
		b, c, err := nd.Bytes()
		if err != nil {
			return err
		}
		if n.CID != nil && *n.CID != *c {
			return fmt.Errorf("MST node encoded as %s, computed as %s", c, n.CID)
		}
		_, err = put(b)
		return err
	}
	if err := putNode(tree.Root); err != nil {
		return cid.Undef, err
	}
	commit := atrepo.Commit{DID: l.did.String(), Version: atrepo.ATPROTO_REPO_VERSION, Data: *data, Rev: syntax.NewTIDClock(0).Next().String()}
	unsigned, err := commit.UnsignedBytes()
	if err != nil {
		return cid.Undef, err
	}
	if commit.Sig, err = l.sign(ctx, commit.DID, unsigned); err != nil {
		return cid.Undef, err
	}
	var buf bytes.Buffer
	if err := commit.MarshalCBOR(&buf); err != nil {
		return cid.Undef, err
	}
	return put(buf.Bytes())
}
