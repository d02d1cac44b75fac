package outline_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/internal/kindgen"
)

// TestKindsGenerated: the Kinds table (errors.go) is the one source of the
// error kinds. zz_kinds.go, the sentinels with their doc comments, is what
// the generator makes from it (stale after an edit of the table until go
// generate runs); the table as compiled is the table as read; names are
// unique; and no Err sentinel of the package is declared outside it.
func TestKindsGenerated(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("errors.go")
	if err != nil {
		t.Fatal(err)
	}
	want, err := kindgen.Generate(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("zz_kinds.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		i := 0
		for i < len(gl) && i < len(wl) && gl[i] == wl[i] {
			i++
		}
		t.Fatalf("zz_kinds.go is stale (run go generate ./internal/outline); line %d differs", i+1)
	}
	rows, _ := kindgen.Table(src)
	if len(rows) != len(outline.Kinds) {
		t.Fatalf("%d rows read, %d compiled", len(rows), len(outline.Kinds))
	}
	names := map[string]bool{}
	for i, k := range outline.Kinds {
		if r := rows[i]; r.Name != k.Name || r.Text != k.Text || k.Err == nil || k.Err.Error() != k.Text {
			t.Errorf("row %d: read %+v, compiled %q %q (err %v)", i, r, k.Name, k.Text, k.Err)
		}
		if names[k.Name] || k.Name == "error" {
			t.Errorf("kind name %q twice (or the name of no kind)", k.Name)
		}
		names[k.Name] = true
	}
	inTable := map[string]bool{}
	for _, r := range rows {
		inTable[r.Var] = true
	}
	for _, v := range sentinels(t) {
		if !inTable[v] {
			t.Errorf("%s is declared outside the Kinds table", v)
		}
	}
}

// sentinels are the package-level vars of package outline named Err… .
func sentinels(t *testing.T) []string {
	files, _ := filepath.Glob("*.go")
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.VAR {
				for _, s := range gd.Specs {
					for _, n := range s.(*ast.ValueSpec).Names {
						if strings.HasPrefix(n.Name, "Err") && f != "zz_kinds.go" {
							out = append(out, n.Name)
						}
					}
				}
			}
		}
	}
	return out
}
