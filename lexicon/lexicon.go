package lexicon

import (
	"embed"
	"io/fs"
)

// Collection NSIDs of the records this server reads and writes.
const (
	Node          = "app.bulleted.node"
	Note          = "app.bulleted.note"
	Mirror        = "app.bulleted.mirror"
	Comment       = "app.bulleted.comment"
	CommentPolicy = "app.bulleted.commentPolicy"
	Outline       = "app.bulleted.outline"
	Facet         = "app.bsky.richtext.facet"
)

// Collections lists the six record collections, in a stable order.
var Collections = []string{Node, Note, Mirror, Comment, CommentPolicy, Outline}

// IsCollection reports whether nsid is one of the six record collections.
func IsCollection(nsid string) bool {
	for _, c := range Collections {
		if c == nsid {
			return true
		}
	}
	return false
}

// Layouts known to this version (an open set: others are valid and kept).
var Layouts = []string{"bullet", "todo", "h1", "h2", "h3", "codeBlock", "quoteBlock"}

// AllowRules known to this version. Unknown rules grant nothing.
var AllowRules = []string{"mentioned"}

// Limits used by the planner before validation, so it can explain them.
const (
	MaxSortKey       = 512
	MaxNodeBytes     = 10000
	MaxNodeGraphemes = 2000
	MaxNoteBytes     = 100000
	MaxNoteGraphemes = 20000
	MaxRepoRecords   = 250000
)

//go:embed schemas/*.json
var Schemas embed.FS

// Files returns the names of the embedded schema files.
func Files() []string {
	ents, _ := fs.ReadDir(Schemas, "schemas")
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		out = append(out, "schemas/"+e.Name())
	}
	return out
}
