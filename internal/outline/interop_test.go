package outline_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// interopLines reads an AT Protocol interop syntax vector file (copied in
// validate/testdata/interop, see SOURCE.md there).
func interopLines(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "validate", "testdata", "interop", "syntax", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text(); strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no vectors", name)
	}
	return out
}

// TestInteropParentKey runs the interop AT-URI and record-key vectors
// through the tree's parent reader, whose fast path skips the URI parser:
// it must agree with the parser on every vector, both as given and with the
// vector's tail put under this repository's node collection (where the fast
// path applies).
func TestInteropParentKey(t *testing.T) {
	t.Parallel()
	did := syntax.DID("did:plc:interop000000000000000000")
	tr := &outline.Tree{DID: did}
	prefix := "at://" + did.String() + "/" + lexicon.Node + "/"
	agree := func(p string) {
		k, why := tr.ParentKey(p)
		wk, wwhy := tr.SlowParentKey(p)
		if k != wk || why != wwhy {
			t.Errorf("parent %q: fast path gives (%q, %q), the parser (%q, %q)", p, k, why, wk, wwhy)
		}
	}
	for _, s := range interopLines(t, "aturi_syntax_valid.txt") {
		agree(s)
	}
	for _, s := range interopLines(t, "aturi_syntax_invalid.txt") {
		agree(s)
		if _, why := tr.ParentKey(s); why == "" {
			t.Errorf("parent %q: accepted; the vectors say it is not an AT-URI", s)
		}
	}
	for _, k := range interopLines(t, "recordkey_syntax_valid.txt") {
		agree(prefix + k)
		if got, why := tr.ParentKey(prefix + k); got != k || why != "" {
			t.Errorf("record key %q: parent read as (%q, %q)", k, got, why)
		}
	}
	for _, k := range interopLines(t, "recordkey_syntax_invalid.txt") {
		agree(prefix + k)
		if got, why := tr.ParentKey(prefix + k); why == "" && got == k {
			t.Errorf("record key %q: accepted; the vectors say it is invalid", k)
		}
	}
}
