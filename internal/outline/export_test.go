package outline

import (
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// FullBuilds is how many times Next fell back to building the whole tree.
func FullBuilds() int64 { return fullBuilds.Load() }

// ParentKey is Tree.parentKey (tests).
func (t *Tree) ParentKey(p string) (string, string) { return t.parentKey(p) }

// SlowParentKey is parentKey through the URI parser alone (tests).
func (t *Tree) SlowParentKey(p string) (string, string) {
	saved := t.DID
	defer func() { t.DID = saved }()
	u, err := syntax.ParseATURI(p)
	switch {
	case p == "":
		return "", ""
	case err != nil:
		return "", "parent is not a valid AT-URI"
	case u.Authority().String() != t.DID.String():
		return "", "parent is in another repository"
	case u.Collection().String() != lexicon.Node:
		return "", "parent is not an app.bulleted.node"
	}
	return u.RecordKey().String(), ""
}

// Nexts is how many times Tree.Next was called.
func Nexts() int64 { return nexts.Load() }

// Forward is Engine.forward (tests).
func (e *Engine) Forward(prev *Tree, commit, rev string, changes []store.Record) *Tree {
	return e.forward(prev, commit, rev, changes)
}

// Keep makes t the engine's kept tree (tests).
func (e *Engine) Keep(t *Tree) *Tree { return e.keep(t) }

// Cut is cutBatches (tests).
var Cut = cutBatches

// For the external tests: the file journal, the in-memory plan store and
// a function as an intent, unexported from the engine's surface.
type (
	FileJournal = fileJournal
	MemoryPlans = memoryPlans
	PlanFunc    = planFunc
)

// NewFileJournal is newFileJournal (tests).
var NewFileJournal = newFileJournal

// Copied is how many items of b are in an array (a chunk) that a does not
// share with it: what making b from a copied (tests).
func Copied(a, b Kids) int {
	shared := map[**Item]bool{}
	for _, part := range a.arrays() {
		shared[&part[0]] = true
	}
	n := 0
	for _, part := range b.arrays() {
		if !shared[&part[0]] {
			n += len(part)
		}
	}
	return n
}

// arrays is the list's chunks (its one array when it has no directory).
func (k Kids) arrays() [][]*Item {
	if k.c == 0 {
		if k.n == 0 {
			return nil
		}
		return [][]*Item{k.flat()}
	}
	var out [][]*Item
	for i := range k.chunks() {
		out = append(out, k.chunks()[i].items())
	}
	return out
}
