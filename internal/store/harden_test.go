package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

func node(rk, text string, parent string) Write {
	v := map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": "a0", "createdAt": "2026-07-30T09:30:00.000Z"}
	if parent != "" {
		v["parent"] = parent
	}
	return Write{Op: Create, Collection: "app.bulleted.node", RKey: rk, Value: v}
}

// seeded is a store dir with three commits.
func seeded(t *testing.T) (string, *Local) {
	t.Helper()
	dir := t.TempDir()
	l, err := OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, txt := range []string{"one", "two", "three"} {
		if _, err := l.Apply(ctx, "", []Write{node(fmt.Sprintf("3kaaaaaaaaa%d2", i), txt, "")}); err != nil {
			t.Fatal(err)
		}
	}
	return dir, l
}

func texts(t *testing.T, l *Local) []string {
	t.Helper()
	s, err := l.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range s.Records {
		out = append(out, r.Value.Str("text"))
	}
	return out
}

// sectionOffsets returns where each section of the log starts.
func sectionOffsets(t *testing.T, raw []byte) []int {
	var offs []int
	for off := 0; off < len(raw); {
		n, k := binary.Uvarint(raw[off:])
		if k <= 0 {
			t.Fatalf("bad log at %d", off)
		}
		offs = append(offs, off)
		off += k + int(n)
	}
	return offs
}

// Damage inside the log (not a torn tail) refuses to open and changes
// nothing on disk; a torn tail after HEAD's commit is cut.
func TestDamagedLog(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		damage  func(raw []byte, offs []int) []byte
		opens   bool
		wantAll bool
	}{
		{"flipped length byte in the middle", func(raw []byte, offs []int) []byte {
			raw[offs[len(offs)/2]] ^= 0x40
			return raw
		}, false, false},
		{"huge length in the middle", func(raw []byte, offs []int) []byte {
			var b [binary.MaxVarintLen64]byte
			n := binary.PutUvarint(b[:], 9<<30) // 9 GB
			mid := offs[len(offs)/2]
			return append(append(append([]byte{}, raw[:mid]...), b[:n]...), raw[mid:]...)
		}, false, false},
		{"flipped data byte of a block", func(raw []byte, offs []int) []byte {
			raw[len(raw)-5] ^= 0x01 // inside the last section's block
			return raw
		}, false, false},
		{"torn tail after HEAD's commit", func(raw []byte, offs []int) []byte {
			return append(raw, 0x80, 0x05, 1, 2, 3)
		}, true, true},
		{"garbage varint tail", func(raw []byte, offs []int) []byte {
			return append(raw, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)
		}, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, l := seeded(t)
			want := texts(t, l)
			l.Close()
			path := filepath.Join(dir, "blocks.log")
			raw, _ := os.ReadFile(path)
			damaged := tc.damage(append([]byte{}, raw...), sectionOffsets(t, raw))
			os.WriteFile(path, damaged, 0o600)
			l2, err := OpenLocal(dir)
			after, _ := os.ReadFile(path)
			if !tc.opens {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("opened a damaged store: %v", err)
				}
				if !bytes.Equal(after, damaged) {
					t.Fatal("the refused open changed the log on disk")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l2.Close()
			if got := texts(t, l2); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("records %v, want %v", got, want)
			}
			if !bytes.Equal(after, raw) {
				t.Fatalf("the torn tail was not cut exactly (%d bytes, want %d)", len(after), len(raw))
			}
		})
	}
}

// A process whose view of the log diverged (another process overwrote an
// orphaned tail it had read past) re-reads instead of wedging.
func TestDivergedViewRecovers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, l1 := seeded(t)
	defer l1.Close()
	// a killed process appended whole sections but never moved HEAD
	f, _ := os.OpenFile(filepath.Join(dir, "blocks.log"), os.O_APPEND|os.O_WRONLY, 0)
	for i := 0; i < 50; i++ {
		data := bytes.Repeat([]byte{byte(i)}, 1000)
		c, _ := cid.NewPrefixV1(cid.Raw, multihash.SHA2_256).Sum(data)
		blk, _ := blocks.NewBlockWithCid(data, c)
		var buf bytes.Buffer
		writeSection(&buf, blk.Cid(), blk.RawData())
		f.Write(buf.Bytes())
	}
	f.Close()
	l2, err := OpenLocal(dir) // reads through the orphans
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	// l1 commits where it knows the log ends, over the orphans
	if _, err := l1.Apply(ctx, "", []Write{node("3kbbbbbbbbbb2", "four", "")}); err != nil {
		t.Fatal(err)
	}
	if got := texts(t, l2); len(got) != 4 || got[3] != "four" {
		t.Fatalf("the other process sees %v", got)
	}
}

// import: an export of the same store, another store's export (references
// rewritten), invalid records refused by path, and a process killed
// between the new blocks and HEAD leaves the old repository.
func TestImport(t *testing.T) {
	ctx := context.Background()
	_, a := seeded(t)
	defer a.Close()
	top := "at://" + a.DID().String() + "/app.bulleted.node/3kaaaaaaaaa02"
	if _, err := a.Apply(ctx, "", []Write{node("3kcccccccccc2", "child", top),
		{Op: Create, Collection: "app.bulleted.note", RKey: "3kcccccccccc2", Value: map[string]any{"$type": "app.bulleted.note", "subject": "at://" + a.DID().String() + "/app.bulleted.node/3kcccccccccc2", "text": "n", "createdAt": "2026-07-30T09:30:00.000Z"}},
		node("3kdddddddddd2", "foreign child", "at://did:plc:someoneelse/app.bulleted.node/3kxxxxxxxxxx2")}); err != nil {
		t.Fatal(err)
	}
	var exp bytes.Buffer
	if err := a.ExportCAR(&exp); err != nil {
		t.Fatal(err)
	}
	// the same store
	rep, err := a.ImportCAR(ctx, bytes.NewReader(exp.Bytes()), ImportOptions{Validate: func(map[string]any, string, syntax.ATURI) error { return nil }})
	if err != nil || rep.Records != 6 || rep.Rewritten != 0 || rep.Replaced != 6 {
		t.Fatalf("own export: %+v %v", rep, err)
	}
	// another store
	b, err := OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rep, err = b.ImportCAR(ctx, bytes.NewReader(exp.Bytes()), ImportOptions{})
	if err != nil || rep.Rewritten != 2 || rep.SourceDID != a.DID().String() {
		t.Fatalf("other store: %+v %v", rep, err)
	}
	s, _ := b.Snapshot(ctx)
	for _, r := range s.Records {
		for _, f := range []string{"parent", "subject"} {
			v, _ := r.Value.Text(f)
			if strings.Contains(v, a.DID().String()) {
				t.Fatalf("%s/%s %s still names the source: %s", r.Collection, r.RKey, f, v)
			}
			if r.RKey == "3kdddddddddd2" && f == "parent" && v != "at://did:plc:someoneelse/app.bulleted.node/3kxxxxxxxxxx2" {
				t.Fatalf("a reference to another identity was rewritten: %s", v)
			}
		}
	}
	// invalid records: refused, nothing changed
	before, _ := b.Snapshot(ctx)
	rep, err = b.ImportCAR(ctx, bytes.NewReader(exp.Bytes()), ImportOptions{Validate: func(v map[string]any, coll string, self syntax.ATURI) error {
		if v["text"] == "two" {
			return errors.New("text: too long")
		}
		return nil
	}})
	if !errors.Is(err, ErrInvalidRecords) || len(rep.Invalid) != 1 || !strings.HasPrefix(rep.Invalid[0], "app.bulleted.node/3kaaaaaaaaa12") {
		t.Fatalf("invalid import: %+v %v", rep, err)
	}
	if after, _ := b.Snapshot(ctx); after.Commit != before.Commit {
		t.Fatal("a refused import changed the store")
	}
	// killed between appending the new blocks and replacing HEAD
	beforeHead = func() error { return errors.New("killed") }
	_, err = b.ImportCAR(ctx, bytes.NewReader(exp.Bytes()), ImportOptions{})
	beforeHead = nil
	if err == nil {
		t.Fatal("the hook did not fire")
	}
	dir := b.dir
	b.Close()
	b2, err := OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if after, _ := b2.Snapshot(ctx); after.Commit != before.Commit || len(after.Records) != len(before.Records) {
		t.Fatal("a killed import left a different repository")
	}
}
