package store_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/bluesky-social/indigo/atproto/atdata"
	atrepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/repo/mst"
	"github.com/ipfs/go-cid"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// The AT Protocol interop test vectors (copied in
// validate/testdata/interop, see SOURCE.md there) against the store's own
// record decoder, record CIDs and the MST it writes.

func interopFile(t *testing.T, parts ...string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(append([]string{"..", "..", "validate", "testdata", "interop"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestInteropDataModelFixtures: each fixture's DAG-CBOR decodes, with the
// store's strict fast decoder (or its fallback), to exactly the value its
// JSON form gives through atdata, and RecordCID of that value is the
// fixture's CID.
func TestInteropDataModelFixtures(t *testing.T) {
	t.Parallel()
	var fixtures []struct {
		JSON json.RawMessage `json:"json"`
		CBOR string          `json:"cbor_base64"`
		CID  string          `json:"cid"`
	}
	if err := json.Unmarshal(interopFile(t, "data-model", "data-model-fixtures.json"), &fixtures); err != nil {
		t.Fatal(err)
	}
	if len(fixtures) == 0 {
		t.Fatal("no fixtures")
	}
	for i, fx := range fixtures {
		raw, err := base64.RawStdEncoding.DecodeString(fx.CBOR)
		if err != nil {
			t.Fatalf("fixture %d: %v", i, err)
		}
		want, err := atdata.UnmarshalJSON(fx.JSON)
		if err != nil {
			t.Fatalf("fixture %d: JSON: %v", i, err)
		}
		got, err := store.DecodeRecord(raw)
		if err != nil {
			t.Errorf("fixture %d: DecodeRecord: %v", i, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("fixture %d: decoded %#v, the JSON form is %#v", i, got, want)
		}
		c, err := store.RecordCID(got)
		if err != nil {
			t.Errorf("fixture %d: RecordCID: %v", i, err)
		} else if c != fx.CID {
			t.Errorf("fixture %d: CID %s, want %s", i, c, fx.CID)
		}
	}
}

// TestInteropMST: the MST layer the store writes with puts keys at the
// heights and shares the prefixes the vectors give, and a store's exported
// repository is that MST exactly: every node at the height of its keys,
// and the root the same as a tree built afresh from the same records.
func TestInteropMST(t *testing.T) {
	t.Parallel()
	var heights []struct {
		Key    string `json:"key"`
		Height int    `json:"height"`
	}
	if err := json.Unmarshal(interopFile(t, "mst", "key_heights.json"), &heights); err != nil {
		t.Fatal(err)
	}
	for _, h := range heights {
		if got := mst.HeightForKey([]byte(h.Key)); got != h.Height {
			t.Errorf("height of %q: %d, want %d", h.Key, got, h.Height)
		}
	}
	var prefixes []struct {
		Left, Right string
		Len         int
	}
	if err := json.Unmarshal(interopFile(t, "mst", "common_prefix.json"), &prefixes); err != nil {
		t.Fatal(err)
	}
	for _, p := range prefixes {
		if got := mst.CountPrefixLen([]byte(p.Left), []byte(p.Right)); got != p.Len {
			t.Errorf("common prefix of %q and %q: %d, want %d", p.Left, p.Right, got, p.Len)
		}
	}
	if len(heights) == 0 || len(prefixes) == 0 {
		t.Fatal("no vectors")
	}

	ctx := context.Background()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// enough records for several layers (a key is one layer up in 1 of 4)
	var writes []store.Write
	for i := 0; i < 600; i++ {
		rk := fmt.Sprintf("3k%011d", i)
		writes = append(writes, store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: rk, Value: map[string]any{
			"$type": "app.bulleted.node", "text": fmt.Sprint("bullet ", i), "sortKey": fmt.Sprintf("a%04d", i), "createdAt": "2026-07-30T09:30:00.000Z"}})
	}
	for len(writes) > 0 {
		n := min(len(writes), 200)
		if _, err := l.Apply(ctx, "", writes[:n]); err != nil {
			t.Fatal(err)
		}
		writes = writes[n:]
	}
	var car bytes.Buffer
	if err := l.ExportCAR(&car); err != nil {
		t.Fatal(err)
	}
	commit, repo, err := atrepo.LoadRepoFromCAR(ctx, &car)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.MST.Verify(); err != nil {
		t.Fatalf("the store's MST does not verify: %v", err)
	}
	m := map[string]cid.Cid{}
	if err := repo.MST.WriteToMap(m); err != nil {
		t.Fatal(err)
	}
	if len(m) != 600 {
		t.Fatalf("the exported repository has %d records, want 600", len(m))
	}
	fresh, err := mst.LoadTreeFromMap(m)
	if err != nil {
		t.Fatal(err)
	}
	root, err := fresh.RootCID()
	if err != nil {
		t.Fatal(err)
	}
	if *root != commit.Data {
		t.Fatalf("the store's MST root is %s; the same records make %s", commit.Data, root)
	}
}
