package intent

import (
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Comment comments on Subject (any identity's bullet: an at:// URI, or a
// record key of this repository). The comment is a record of this
// repository; it renders only where the bullet owner's policy allows.
type Comment struct {
	Subject string
	Text    string
}

// Plan implements outline.Intent with the kit alone.
func (c Comment) Plan(p *outline.Planner) error {
	uri := c.Subject
	if !strings.HasPrefix(uri, "at://") {
		it, err := p.Node(c.Subject)
		if err != nil {
			return err
		}
		uri = p.NodeURI(it.Key())
	}
	v := map[string]any{"$type": lexicon.Comment, "subject": uri, "text": c.Text, "createdAt": p.Stamp()}
	p.Facets(v, c.Text)
	p.Create(lexicon.Comment, v, "")
	p.Note("a comment renders only where the bullet owner's comment policy allows it")
	p.Summary("comment on %s", uri)
	return nil
}
