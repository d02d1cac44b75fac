package view

import (
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// OutlineRef is the app.bulleted.outline record in effect at a level, as in
// app.bulleted.getOutline#outline.
type OutlineRef struct {
	URI          string   `json:"uri"`
	Title        string   `json:"title,omitempty"`
	Description  string   `json:"description,omitempty"`
	ImageAlt     string   `json:"imageAlt,omitempty"`
	Contributors []string `json:"contributors,omitempty"`
}

// OutlineAt returns the outline record in effect at it (nil: the top
// level): the nearest one whose root is it or an ancestor, else `self`.
func OutlineAt(t *outline.Tree, it *outline.Item) *OutlineRef {
	if r, ok := outline.OutlineRecordAt(t, it); ok {
		return ref(t, r)
	}
	return nil
}

func ref(t *outline.Tree, r store.Record) *OutlineRef {
	o := &OutlineRef{URI: "at://" + t.DID.String() + "/" + lexicon.Outline + "/" + r.RKey}
	o.Title, _ = r.Value.Text("title")
	o.Description, _ = r.Value.Text("description")
	o.ImageAlt, _ = r.Value.Text("imageAlt")
	o.Contributors, _ = outline.ContributorsOf(r)
	return o
}

// Contribution is a contributor's bullet hanging under a bullet of the
// owner's outline (the engine's contributor rules: outline.Contributed).
type Contribution = outline.Contribution

// Contributions are the contributors' bullets of one owner's outline, by
// the record key of the owner's bullet they hang under.
type Contributions = outline.Contributions

// Gather reads the repositories of every contributor named in owner's
// outline records and collects the bullets the engine's rules admit
// (outline.Gather). It returns problems worth telling the reader.
func Gather(owner *outline.Tree, other Trees) (Contributions, []string) {
	return outline.Gather(owner, other)
}
