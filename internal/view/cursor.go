package view

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
)

// CursorRev is the revision of the tree a read_outline cursor was made
// from ("" for a cursor that carries none, made before cursors did), so
// that the next page can be read from the same tree while it is kept
// (tools.Snapshots) or say that the outline changed in between.
func CursorRev(s string) (string, error) {
	c, err := decodeCursor(s)
	return c.R, err
}

// CursorContributions is the ContributionsPrint a read_outline cursor was
// made with ("" when it rendered no contributors' bullets).
func CursorContributions(s string) string {
	c, _ := decodeCursor(s)
	return c.C
}

// ContributionsPrint names the contributors' repositories whose bullets a
// read renders in place, at the commits read ("" when there are none), in
// 12 hex digits: a cursor carries it, so that a page read after one of them
// changed can say so (contributors' trees are read live, not kept).
func ContributionsPrint(c Contributions) string {
	var ids []string
	for _, cs := range c {
		for _, x := range cs {
			ids = append(ids, x.Tree.DID.String()+"@"+x.Tree.Rev+"@"+x.Tree.Commit)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	slices.Sort(ids)
	h := fnv.New64a()
	h.Write([]byte(strings.Join(slices.Compact(ids), " ")))
	return fmt.Sprintf("%012x", h.Sum64()&(1<<48-1))
}
