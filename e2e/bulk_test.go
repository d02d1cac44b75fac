package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// bulkSpec is what bulk.mjs is told (the keys a person would name) and
// what the test expects, from the generated records.
type bulkSpec struct {
	Level   string   `json:"level"` // the level with the most done todos
	Done    []string `json:"-"`     // its done todos, in order
	Big     string   `json:"big"`   // the biggest level
	Kids    []string `json:"-"`     // its children, in order
	From    string   `json:"from"`  // the run to move: Kids[r0..r1), after Kids[at]
	To      string   `json:"to"`
	After   string   `json:"after"`
	Deleted []string `json:"deleted"` // the FY2026 bullets (replaced, then deleted)
	Old     int      `json:"-"`       // bullets ending in #old, #older
	Older   int      `json:"-"`
	r0, r1  int
	at      int
}

// seedBulk writes a generated outline of n bullets into a new embedded
// store in dir, with what the bulk tasks work on (as the agent's bill in
// server/bill_test.go seeds it): " #old" at the end of 1 bullet in 200,
// " #older" at the end of 1 in 1,600 (with their tag facets), " FY2026
// plan" at the end of every 20th child of the biggest level.
func seedBulk(t *testing.T, dir string, n int) bulkSpec {
	t.Helper()
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	did := l.DID().String()
	recs := outlinegen.Generate(n, 1)
	kids := map[string][]int{} // parent key → indexes, in order (the generator writes siblings in order)
	for i, r := range recs {
		if r.Collection == lexicon.Node {
			p, _ := r.Value.Text("parent")
			kids[p[strings.LastIndexByte(p, '/')+1:]] = append(kids[p[strings.LastIndexByte(p, '/')+1:]], i)
		}
	}
	var s bulkSpec
	for p, ks := range kids {
		if p != "" && (len(ks) > len(kids[s.Big]) || len(ks) == len(kids[s.Big]) && p < s.Big) {
			s.Big = p
		}
	}
	appendText := func(i int, add, tag string) {
		v := recs[i].Value.Map()
		tx, _ := v["text"].(string)
		if tag != "" {
			fs, _ := v["facets"].([]any)
			v["facets"] = append(fs[:len(fs):len(fs)], map[string]any{"index": map[string]any{"byteStart": int64(len(tx) + 1), "byteEnd": int64(len(tx) + len(add))},
				"features": []any{map[string]any{"$type": "app.bsky.richtext.facet#tag", "tag": tag}}})
		}
		v["text"] = tx + add
		recs[i].Value = store.MustValue(v)
	}
	c := 0
	for i, r := range recs {
		if r.Collection != lexicon.Node || r.Value.Get("text") == outlinegen.BudgetReview {
			continue
		}
		switch c++; {
		case c%1600 == 9:
			appendText(i, " #older", "older")
			s.Older++
		case c%200 == 7:
			appendText(i, " #old", "old")
			s.Old++
		}
	}
	for j, i := range kids[s.Big] {
		s.Kids = append(s.Kids, recs[i].RKey)
		if j%20 == 10 {
			appendText(i, " FY2026 plan", "")
			s.Deleted = append(s.Deleted, recs[i].RKey)
		}
	}
	// the level to archive is the big one (a level of leaves: its done
	// todos are the done todos under it); the run to move is taken from
	// what stays in it
	s.Level = s.Big
	var rest []string
	for _, i := range kids[s.Big] {
		if v := recs[i].Value.Map(); v["layout"] == "todo" && v["completedAt"] != nil {
			s.Done = append(s.Done, recs[i].RKey)
		} else {
			rest = append(rest, recs[i].RKey)
		}
	}
	s.Kids = rest
	s.r0, s.r1, s.at = len(rest)/20, len(rest)/20+min(100, len(rest)/10), len(rest)/2
	s.From, s.To, s.After = rest[s.r0], rest[s.r1-1], rest[s.at]
	ws := outlinegen.Writes(recs, did)
	for len(ws) > 0 {
		k := min(len(ws), store.MaxBatch)
		if _, err := l.Apply(context.Background(), "", ws[:k]); err != nil {
			t.Fatal(err)
		}
		ws = ws[k:]
	}
	return s
}

// bulkRun is what bulk.mjs printed.
type bulkRun struct {
	Name, Shown string
	Tasks       []struct {
		Name         string
		Calls, Shown int
	}
	Keys struct {
		Archive, Six string
		SinceShown   int
	}
}

// TestSDKClientBulkTasks: issue #40's bulk tasks through the official MCP
// TypeScript SDK client (bulk.mjs) on a generated 20,000-bullet outline
// (-short: 2,000), as a structured-shown client (named claude-code: auto
// gives it the structured mode, and it is shown the structured content)
// and a text-shown one (another name: both parts, shown the text). Each
// task takes ≤ 3 calls, and the outline read back is right: the Archive
// holds exactly the level's done todos, in order; every #old is #new and
// every #older untouched; the run and the split are in the order asked;
// the FY2026 bullets were replaced and then deleted, and search since
// showed every delete. The calls and shown bytes are logged (the table in
// docs/benchmarks.md).
func TestSDKClientBulkTasks(t *testing.T) {
	n := 20_000
	if testing.Short() {
		n = 2_000
	}
	bin := build(t)
	dir, node, err := pdstest.Setup()
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range []struct{ name, shown string }{{"claude-code", "structured"}, {"bulleted-e2e", "text"}} {
		data := t.TempDir()
		s := seedBulk(t, data, n)
		raw, _ := json.Marshal(s)
		spec := filepath.Join(t.TempDir(), "spec.json")
		if err := os.WriteFile(spec, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(node, filepath.Join(dir, "bulk.mjs"), spec, cl.name, cl.shown, bin, "--store", data)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		i := strings.LastIndex(string(out), "OK ")
		if err != nil || i < 0 {
			t.Fatalf("bulk.mjs %s: %v\n%s", cl.name, err, out)
		}
		var run bulkRun
		if err := json.Unmarshal([]byte(strings.TrimSpace(string(out[i+3:]))), &run); err != nil {
			t.Fatalf("bulk.mjs %s printed %s: %v", cl.name, out[i:], err)
		}
		var b strings.Builder
		for _, tk := range run.Tasks {
			fmt.Fprintf(&b, "\n| %s | %d | %d B |", tk.Name, tk.Calls, tk.Shown)
			if tk.Calls > 3 {
				t.Errorf("%s: %s took %d calls, want ≤ 3", cl.name, tk.Name, tk.Calls)
			}
		}
		t.Logf("%s (shown %s), %d bullets:%s", cl.name, cl.shown, n, b.String())
		checkBulk(t, cl.name, data, s, run)
	}
}

// checkBulk reads the outline in data back after bulk.mjs.
func checkBulk(t *testing.T, who, data string, s bulkSpec, run bulkRun) {
	t.Helper()
	l, err := store.OpenLocal(data)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tr, err := outline.New(l).Tree(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	children := func(k string) []string {
		var ks []string
		if it := tr.Nodes.Get(k); it != nil {
			for c := range it.Children.Items() {
				ks = append(ks, c.Key())
			}
		}
		return ks
	}
	var done []string // the done todos, less the FY2026 ones deleted since
	for _, k := range s.Done {
		if !slices.Contains(s.Deleted, k) {
			done = append(done, k)
		}
	}
	if got := children(run.Keys.Archive); !slices.Equal(got, done) {
		t.Errorf("%s: the Archive %q holds %d bullets, want the level's %d done todos in order (less the deleted)", who, run.Keys.Archive, len(got), len(done))
	}
	if a := tr.Nodes.Get(run.Keys.Archive); a == nil || a.ParentKey() != s.Level {
		t.Errorf("%s: the Archive is not under the level", who)
	}
	newN, older := 0, 0
	for _, it := range tr.Nodes.All() {
		tx := it.Str("text")
		switch {
		case strings.HasSuffix(tx, " #new"):
			newN++
		case strings.HasSuffix(tx, " #older"):
			older++
		case strings.Contains(tx, "#old") || strings.Contains(tx, "#newer") || strings.Contains(tx, "FY202"):
			t.Errorf("%s: %q left", who, tx)
		}
	}
	if newN != s.Old || older != s.Older {
		t.Errorf("%s: %d #new (want %d), %d #older (want %d)", who, newN, s.Old, older, s.Older)
	}
	want := []string{run.Keys.Archive}
	for _, k := range slices.Concat(s.Kids[:s.r0], s.Kids[s.r1:s.at+1], s.Kids[s.r0:s.r1], s.Kids[s.at+1:]) {
		if !slices.Contains(s.Deleted, k) {
			want = append(want, k)
		}
	}
	if got := children(s.Big); !slices.Equal(got, want) {
		t.Errorf("%s: the big level holds %d bullets, not in the order asked (want %d)", who, len(got), len(want))
	}
	for _, k := range s.Deleted {
		if tr.Nodes.Get(k) != nil {
			t.Errorf("%s: %s not deleted", who, k)
		}
	}
	if run.Keys.SinceShown != len(s.Deleted) {
		t.Errorf("%s: search since showed %d of the %d deletes", who, run.Keys.SinceShown, len(s.Deleted))
	}
	secs := children(run.Keys.Six)
	var rows []string
	for i, k := range secs {
		sec := tr.Nodes.Get(k)
		if i > 2 || sec.Str("text") != []string{"First", "Second", "Third"}[i] || sec.Children.Len() != 200 {
			t.Errorf("%s: section %d: %q with %d children", who, i, sec.Str("text"), sec.Children.Len())
		}
		for c := range sec.Children.Items() {
			if c.Str("text") != fmt.Sprintf("row %d", len(rows)) {
				t.Errorf("%s: row %d is %q", who, len(rows), c.Str("text"))
			}
			rows = append(rows, c.Key())
		}
	}
	if len(secs) != 3 || len(rows) != 600 {
		t.Errorf("%s: the split level holds %d sections, %d rows", who, len(secs), len(rows))
	}
}
