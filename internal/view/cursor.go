package view

// CursorRev is the revision of the tree a read_outline cursor was made
// from ("" for a cursor that carries none, made before cursors did), so
// that the next page can be read from the same tree while it is kept
// (tools.Snapshots) or say that the outline changed in between.
func CursorRev(s string) (string, error) {
	c, err := decodeCursor(s)
	return c.R, err
}
