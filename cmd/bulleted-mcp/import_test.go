package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/atdata"
	atrepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/repo/mst"
	"github.com/ipfs/go-cid"
	cbor "github.com/ipfs/go-ipld-cbor"
	"github.com/multiformats/go-multihash"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// The reported crash: `bulleted-mcp import` of a CAR of a few hundred
// bytes whose MST node links to its own CID (written under that CID, which
// its bytes cannot hash to) overflowed the stack after 1 GB. It is refused,
// said on stderr, with exit 1, and the store is left as it was. The stack
// is capped so that a regression fails fast.
func TestImportSelfLinkedCAR(t *testing.T) {
	defer debug.SetMaxStack(debug.SetMaxStack(64 << 20))
	sum := func(b []byte) cid.Cid {
		c, err := cid.NewPrefixV1(cid.DagCBOR, multihash.SHA2_256).Sum(b)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	self := sum([]byte("not the node's bytes"))
	node, _, err := (&mst.NodeData{Left: &self, Entries: []mst.EntryData{}}).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	var cb bytes.Buffer
	if err := (&atrepo.Commit{DID: "did:plc:hostile", Version: 3, Data: self, Rev: "3kaaaaaaaaaa2", Sig: []byte{1}}).MarshalCBOR(&cb); err != nil {
		t.Fatal(err)
	}
	commit := sum(cb.Bytes())
	hdr, err := cbor.DumpObject(map[string]any{"roots": []cid.Cid{commit}, "version": 1})
	if err != nil {
		t.Fatal(err)
	}
	file := carFile(t, hdr, append(commit.Bytes(), cb.Bytes()...), append(self.Bytes(), node...))

	dir := t.TempDir()
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Apply(context.Background(), "", []store.Write{{Op: store.Create, Collection: "app.bulleted.node", RKey: "3kaaaaaaaaaa2",
		Value: map[string]any{"$type": "app.bulleted.node", "text": "kept", "sortKey": "a0", "createdAt": "2026-07-30T09:30:00.000Z"}}}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	head, _ := os.ReadFile(filepath.Join(dir, "HEAD"))
	log, _ := os.ReadFile(filepath.Join(dir, "blocks.log"))

	var so, se bytes.Buffer
	code := run([]string{"import", "--store", dir, file}, nil, &so, &se)
	if code != 1 || !strings.Contains(se.String(), "import refused, the store is unchanged: the CAR is damaged") || !strings.Contains(se.String(), "does not hash to its CID") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, so.String(), se.String())
	}
	head2, _ := os.ReadFile(filepath.Join(dir, "HEAD"))
	log2, _ := os.ReadFile(filepath.Join(dir, "blocks.log"))
	if !bytes.Equal(head, head2) || !bytes.Equal(log, log2) {
		t.Fatal("a refused import changed the store's files")
	}
}

// carFile writes a CAR of a header and sections (CID and block bytes).
func carFile(t *testing.T, parts ...[]byte) string {
	var car []byte
	for _, part := range parts {
		car = binary.AppendUvarint(car, uint64(len(part)))
		car = append(car, part...)
	}
	file := filepath.Join(t.TempDir(), "in.car")
	if err := os.WriteFile(file, car, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// Records of other apps in the CAR are left out, and the import says how
// many on stderr (the old import left them out without a word).
func TestImportSaysOtherAppsLeftOut(t *testing.T) {
	block := func(v any) (cid.Cid, []byte) {
		var b []byte
		var err error
		switch v := v.(type) {
		case map[string]any:
			b, err = atdata.MarshalCBOR(v)
		case cborMarshaler:
			var buf bytes.Buffer
			err = v.MarshalCBOR(&buf)
			b = buf.Bytes()
		}
		if err != nil {
			t.Fatal(err)
		}
		c, err := cid.NewPrefixV1(cid.DagCBOR, multihash.SHA2_256).Sum(b)
		if err != nil {
			t.Fatal(err)
		}
		return c, append(c.Bytes(), b...)
	}
	own, ownSec := block(map[string]any{"$type": "app.bulleted.node", "text": "mine", "sortKey": "a0", "createdAt": "2026-07-30T09:30:00.000Z"})
	other, otherSec := block(map[string]any{"$type": "com.example.post", "text": "not mine"})
	node, nodeSec := block(&mst.NodeData{Entries: []mst.EntryData{
		{KeySuffix: []byte("app.bulleted.node/3kaaaaaaaaaa2"), Value: own},
		{KeySuffix: []byte("com.example.post/3kaaaaaaaaaa2"), Value: other}}})
	commit, commitSec := block(&atrepo.Commit{DID: "did:plc:elsewhere", Version: 3, Data: node, Rev: "3kaaaaaaaaaa2", Sig: []byte{1}})
	hdr, err := cbor.DumpObject(map[string]any{"roots": []cid.Cid{commit}, "version": 1})
	if err != nil {
		t.Fatal(err)
	}
	file := carFile(t, hdr, commitSec, nodeSec, ownSec, otherSec)
	var so, se bytes.Buffer
	if code := run([]string{"import", "--store", t.TempDir(), file}, nil, &so, &se); code != 0 ||
		!strings.Contains(so.String(), "imported 1 record(s)") || !strings.Contains(se.String(), "left out: 1 record(s) of other apps") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, so.String(), se.String())
	}
}

type cborMarshaler interface{ MarshalCBOR(io.Writer) error }
