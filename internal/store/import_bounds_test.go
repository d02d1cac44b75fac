package store

import (
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
	"runtime/debug"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/atdata"
	atrepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/repo/mst"
	"github.com/ipfs/go-cid"
	cbor "github.com/ipfs/go-ipld-cbor"
	"github.com/multiformats/go-multihash"
)

// Hostile and oversized CARs handed to an import: each is refused with a
// typed error before anything is written, and the store's files are left
// byte for byte as they were.

// sec is one CAR section: a CID and the bytes written under it (which a
// hostile CAR need not hash to it).
type sec struct {
	c    cid.Cid
	data []byte
}

func sumCID(data []byte) cid.Cid {
	c, err := cid.NewPrefixV1(cid.DagCBOR, multihash.SHA2_256).Sum(data)
	if err != nil {
		panic(err)
	}
	return c
}

func carHeader(root cid.Cid) []byte {
	hdr, err := cbor.DumpObject(map[string]any{"roots": []cid.Cid{root}, "version": 1})
	if err != nil {
		panic(err)
	}
	var lb [binary.MaxVarintLen64]byte
	return append(lb[:binary.PutUvarint(lb[:], uint64(len(hdr)))], hdr...)
}

func rawCAR(root cid.Cid, secs ...sec) []byte {
	buf := bytes.NewBuffer(carHeader(root))
	for _, s := range secs {
		writeSection(buf, s.c, s.data)
	}
	return buf.Bytes()
}

func commitSec(did string, data cid.Cid) sec {
	c := atrepo.Commit{DID: did, Version: 3, Data: data, Rev: "3kaaaaaaaaaa2", Sig: []byte{1, 2, 3}}
	var b bytes.Buffer
	if err := c.MarshalCBOR(&b); err != nil {
		panic(err)
	}
	return sec{sumCID(b.Bytes()), b.Bytes()}
}

func nodeSec(nd mst.NodeData) sec {
	b, c, err := nd.Bytes()
	if err != nil {
		panic(err)
	}
	return sec{*c, b}
}

func recordSec(text string) sec {
	b, err := atdata.MarshalCBOR(map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": "a0", "createdAt": "2026-07-30T09:30:00.000Z"})
	if err != nil {
		panic(err)
	}
	return sec{sumCID(b), b}
}

// entries is the NodeData entries of sorted keys, all naming val, prefix
// compressed as an MST node is.
func entries(keys []string, val cid.Cid) []mst.EntryData {
	out := make([]mst.EntryData, len(keys))
	prev := []byte{}
	for i, k := range keys {
		p := mst.CountPrefixLen(prev, []byte(k))
		out[i] = mst.EntryData{PrefixLen: int64(p), KeySuffix: []byte(k[p:]), Value: val}
		prev = []byte(k)
	}
	return out
}

const srcDID = "did:plc:hostilesource0000000000"

// files is every file of dir with the SHA-256 of its bytes.
func files(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = sha256.Sum256(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// refused imports car into a seeded store, wants an error wrapping kind
// and naming want, and checks nothing changed on disk or in the store.
func refused(t *testing.T, car io.Reader, kind error, want string) {
	t.Helper()
	dir, l := seeded(t)
	defer l.Close()
	ctx := context.Background()
	before, _ := l.Snapshot(ctx)
	disk := files(t, dir)
	rep, err := l.ImportCAR(ctx, car, ImportOptions{})
	if !errors.Is(err, kind) || !strings.Contains(err.Error(), want) {
		t.Fatalf("import: %+v, %v; want %v with %q", rep, err, kind, want)
	}
	for p, h := range files(t, dir) {
		if disk[p] != h {
			t.Fatalf("a refused import changed %s", p)
		}
	}
	if len(files(t, dir)) != len(disk) {
		t.Fatal("a refused import added files")
	}
	l.Close()
	l2, err := OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if after, _ := l2.Snapshot(ctx); after.Commit != before.Commit || len(after.Records) != len(before.Records) {
		t.Fatalf("a refused import left commit %s (%d records), not %s (%d)", after.Commit, len(after.Records), before.Commit, len(before.Records))
	}
}

// The reported crash: an MST node whose subtree link is its own CID,
// written under that CID (so its bytes cannot hash to it). The old import
// followed the link until the stack overflowed (1 GB); the stack is
// capped here so that a regression fails fast instead of taking the
// machine's memory.
func TestImportSelfCycle(t *testing.T) {
	t.Parallel()
	defer debug.SetMaxStack(debug.SetMaxStack(64 << 20))
	self := sumCID([]byte("the node's own CID, which its bytes cannot hash to"))
	nd := mst.NodeData{Left: &self, Entries: []mst.EntryData{}}
	b, _, err := nd.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	commit := commitSec(srcDID, self)
	car := rawCAR(commit.c, commit, sec{self, b})
	if len(car) > 400 {
		t.Fatalf("the CAR is %d bytes", len(car))
	}
	refused(t, bytes.NewReader(car), ErrDamagedCAR, "does not hash to its CID")
}

// A record whose bytes were changed after its CID was taken: the old
// import committed the changed record.
func TestImportBlockNotMatchingCID(t *testing.T) {
	t.Parallel()
	rec := recordSec("as written")
	leaf := nodeSec(mst.NodeData{Entries: entries([]string{"app.bulleted.node/3kaaaaaaaaaa2"}, rec.c)})
	commit := commitSec(srcDID, leaf.c)
	forged := bytes.Replace(rec.data, []byte("as written"), []byte("as changed"), 1)
	refused(t, bytes.NewReader(rawCAR(commit.c, commit, leaf, sec{rec.c, forged})), ErrDamagedCAR, "does not hash to its CID")
	// the same CAR, untouched, imports
	_, l := seeded(t)
	defer l.Close()
	rep, err := l.ImportCAR(context.Background(), bytes.NewReader(rawCAR(commit.c, commit, leaf, rec)), ImportOptions{})
	if err != nil || rep.Records != 1 {
		t.Fatalf("the honest CAR: %+v %v", rep, err)
	}
}

// With valid hashes a cycle cannot be made, but a subtree can be linked
// twice (a node reached twice), and empty nodes can nest deeper than any
// real MST. The old import walked both, yielding the shared subtree's keys
// twice and out of order.
func TestImportNodeTwiceAndTooDeep(t *testing.T) {
	t.Parallel()
	rec := recordSec("x")
	leaf := nodeSec(mst.NodeData{Entries: entries([]string{"app.bulleted.node/3kaaaaaaaaaa2"}, rec.c)})
	e := entries([]string{"app.bulleted.node/3kaaaaaaaaab2"}, rec.c)
	e[0].Right = &leaf.c
	twice := nodeSec(mst.NodeData{Left: &leaf.c, Entries: e})
	commit := commitSec(srcDID, twice.c)
	refused(t, bytes.NewReader(rawCAR(commit.c, commit, twice, leaf, rec)), ErrDamagedCAR, "reached twice")

	chain := func(depth int) []byte {
		secs := []sec{rec, leaf}
		top := leaf.c
		for range depth - 1 {
			n := nodeSec(mst.NodeData{Left: &top, Entries: []mst.EntryData{}})
			secs = append(secs, n)
			top = n.c
		}
		commit := commitSec(srcDID, top)
		return rawCAR(commit.c, append([]sec{commit}, secs...)...)
	}
	refused(t, bytes.NewReader(chain(MaxMSTDepth+1)), ErrDamagedCAR, "deeper than 64")
	_, l := seeded(t)
	defer l.Close()
	if rep, err := l.ImportCAR(context.Background(), bytes.NewReader(chain(MaxMSTDepth)), ImportOptions{}); err != nil || rep.Records != 1 {
		t.Fatalf("an MST %d deep: %+v %v", MaxMSTDepth, rep, err)
	}
}

// tallCAR is a CAR of n app.bulleted records (all the same record block,
// so that it stays small: about 45 bytes a key): a root whose entries
// separate leaves of 999 keys, valid hashes throughout.
func tallCAR(n int) []byte {
	rec := recordSec("many")
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("app.bulleted.node/3k%011d", i)
	}
	var secs []sec
	var rootKeys []string
	var rights []*cid.Cid
	var left *cid.Cid
	for i := 0; i < n; {
		j := min(i+999, n)
		leaf := nodeSec(mst.NodeData{Entries: entries(keys[i:j], rec.c)})
		secs = append(secs, leaf)
		if left == nil {
			left = &leaf.c
		} else {
			rights[len(rights)-1] = &leaf.c
		}
		i = j
		if i < n {
			rootKeys = append(rootKeys, keys[i])
			rights = append(rights, nil)
			i++
		}
	}
	e := entries(rootKeys, rec.c)
	for i := range e {
		e[i].Right = rights[i]
	}
	root := nodeSec(mst.NodeData{Left: left, Entries: e})
	commit := commitSec(srcDID, root.c)
	return rawCAR(commit.c, append([]sec{commit, root, rec}, secs...)...)
}

// The reported case: a CAR of more records than a repository may hold was
// imported, after which every insert was refused. 250,000 is read;
// 250,001 is refused before anything is committed.
func TestImportRecordBound(t *testing.T) {
	t.Parallel()
	src, err := readImportCAR(context.Background(), bytes.NewReader(tallCAR(maxImportRecords)))
	if err != nil || len(src.paths) != maxImportRecords {
		t.Fatalf("%d records: %v", maxImportRecords, err)
	}
	refused(t, bytes.NewReader(tallCAR(maxImportRecords+1)), ErrCARTooLarge, "more than 250000 app.bulleted records")
}

// repeated is a CAR stream of a header and then the same section again
// and again, n times, never held whole.
type repeated struct {
	head, section []byte
	n, off        int
}

func (r *repeated) Read(p []byte) (int, error) {
	if len(r.head) > 0 {
		k := copy(p, r.head)
		r.head = r.head[k:]
		return k, nil
	}
	if r.n == 0 {
		return 0, io.EOF
	}
	k := copy(p, r.section[r.off:])
	if r.off += k; r.off == len(r.section) {
		r.off, r.n = 0, r.n-1
	}
	return k, nil
}

// bigOther is a 1 MiB record of another app.
func bigOther() sec {
	b, err := atdata.MarshalCBOR(map[string]any{"$type": "com.example.blob", "pad": strings.Repeat("x", 1<<20)})
	if err != nil {
		panic(err)
	}
	return sec{sumCID(b), b}
}

// Bytes are bounded: in all (MaxImportBytes, counted as the CAR streams
// in; the old import read it all), and a block (a section claiming more
// than MaxSection is refused before it is allocated). Other apps' records
// are not kept, so the memory an import allocates does not grow with them.
// Not parallel: it counts the process's allocations (runtime.MemStats),
// which parallel tests would add to.
func TestImportByteBounds(t *testing.T) {
	other := bigOther()
	var sb bytes.Buffer
	writeSection(&sb, other.c, other.data)
	root := sumCID([]byte("no commit: reading must stop before it matters"))
	refused(t, &repeated{head: carHeader(root), section: sb.Bytes(), n: MaxImportBytes/len(sb.Bytes()) + 2}, ErrCARTooLarge, "more than 536870912 bytes")

	var lb [binary.MaxVarintLen64]byte
	huge := append(carHeader(root), lb[:binary.PutUvarint(lb[:], MaxSection+1)]...)
	refused(t, bytes.NewReader(huge), ErrCARTooLarge, "a block of 4194305 bytes")

	// 64 MiB of another app's records around one of this app's: the
	// allocations stay far below what was read
	rec := recordSec("kept")
	leaf := nodeSec(mst.NodeData{Entries: entries([]string{"app.bulleted.node/3kaaaaaaaaaa2", "com.example.blob/3kaaaaaaaaaa2"}, rec.c)})
	commit := commitSec(srcDID, leaf.c)
	head := rawCAR(commit.c, commit, leaf, rec)
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	src, err := readImportCAR(context.Background(), &repeated{head: head, section: sb.Bytes(), n: 64})
	runtime.ReadMemStats(&ms1)
	if err != nil || len(src.paths) != 1 || src.others != 1 {
		t.Fatalf("read: %v", err)
	}
	if alloc := ms1.TotalAlloc - ms0.TotalAlloc; alloc > 16<<20 {
		t.Fatalf("reading 64 MiB of other records allocated %d MiB", alloc>>20)
	}
}

// BenchmarkImportCAR imports an export of 20,000 records (-benchmem):
// read is reading the CAR (what an import keeps and allocates before it
// commits), import is the whole import into a fresh store.
func BenchmarkImportCAR(b *testing.B) {
	ctx := context.Background()
	exp := benchExport(b, 20_000)
	b.Run("read", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := readImportCAR(ctx, bytes.NewReader(exp)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(exp)), "CAR-bytes")
	})
	b.Run("import", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			b.StopTimer()
			l, err := OpenLocal(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := l.ImportCAR(ctx, bytes.NewReader(exp), ImportOptions{}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			l.Close()
			b.StartTimer()
		}
	})
}

// benchExport is the CAR export of a store of n records.
func benchExport(b *testing.B, n int) []byte {
	a, err := OpenLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	for i := 0; i < n; i += MaxBatch {
		ws := make([]Write, min(MaxBatch, n-i))
		for j := range ws {
			ws[j] = node(fmt.Sprintf("3k%011d", i+j), fmt.Sprintf("bullet %d with some text in it", i+j), "")
		}
		if _, err := a.Apply(context.Background(), "", ws); err != nil {
			b.Fatal(err)
		}
	}
	var exp bytes.Buffer
	if err := a.ExportCAR(&exp); err != nil {
		b.Fatal(err)
	}
	return exp.Bytes()
}

// commitData is the MST root and signature check of l's current commit.
func commitData(t *testing.T, l *Local) (cid.Cid, string) {
	t.Helper()
	head, rev, err := l.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c, _ := cid.Decode(head)
	raw, err := l.bs.raw(c)
	if err != nil {
		t.Fatal(err)
	}
	var commit atrepo.Commit
	if err := commit.UnmarshalCBOR(bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	pub, err := l.key.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := commit.VerifySignature(pub); err != nil {
		t.Fatalf("commit %s: %v", c, err)
	}
	return commit.Data, rev
}

// An import builds the same MST as the writes that made the records (the
// MST is canonical), under a commit signed by the store's key: a store's
// own export of 2,000 records, imported, leaves its MST root unchanged,
// and the store reopens and takes writes.
func TestImportSameMST(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	l, err := OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < 2000; i += MaxBatch {
		ws := make([]Write, MaxBatch)
		for j := range ws {
			ws[j] = node(fmt.Sprintf("3k%011d", i+j), fmt.Sprintf("bullet %d", i+j), "")
		}
		if _, err := l.Apply(ctx, "", ws); err != nil {
			t.Fatal(err)
		}
	}
	data, rev := commitData(t, l)
	var exp bytes.Buffer
	if err := l.ExportCAR(&exp); err != nil {
		t.Fatal(err)
	}
	if rep, err := l.ImportCAR(ctx, &exp, ImportOptions{}); err != nil || rep.Records != 2000 {
		t.Fatalf("import: %+v %v", rep, err)
	}
	data2, rev2 := commitData(t, l)
	if data2 != data || rev2 <= rev {
		t.Fatalf("MST root %s (rev %s) after the import, %s (rev %s) before", data2, rev2, data, rev)
	}
	l.Close()
	l2, err := OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if _, err := l2.Apply(ctx, "", []Write{node("3kzzzzzzzzzz2", "after", "")}); err != nil {
		t.Fatal(err)
	}
	if s, _ := l2.Snapshot(ctx); len(s.Records) != 2001 {
		t.Fatalf("%d records after reopening and a write", len(s.Records))
	}
}

// An app.bulleted key that is not a record path (collection/rkey), or
// whose record is not in the CAR, refuses the import: the old import
// failed on the first otherwise than as a damaged CAR, and on the second
// failed looking the record up, untyped.
func TestImportBadKeyAndMissingRecord(t *testing.T) {
	t.Parallel()
	rec := recordSec("x")
	for _, c := range []struct {
		key  string
		secs []sec
		want string
	}{
		{"app.bulleted.node/has space", []sec{rec}, "not a record path"},
		{"app.bulleted.node", []sec{rec}, "not a record path"},
		{"app.bulleted.node/3kaaaaaaaaaa2", nil, "is missing"},
	} {
		leaf := nodeSec(mst.NodeData{Entries: entries([]string{c.key}, rec.c)})
		commit := commitSec(srcDID, leaf.c)
		refused(t, bytes.NewReader(rawCAR(commit.c, append([]sec{commit, leaf}, c.secs...)...)), ErrDamagedCAR, c.want)
	}
}
