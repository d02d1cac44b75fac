package search

import "testing"

// For the external tests (package search_test, which may import
// internal/outline/intent: intent imports search).

// SameScan checks that x's scan is fresh's (sameScan).
func SameScan(t *testing.T, x, fresh *Index) { t.Helper(); sameScan(t, x, fresh) }

// Blocks is how many blocks x's scan has.
func Blocks(x *Index) int { return len(x.blocks) }

// Relaid is how many blocks x's last update laid out again.
func Relaid(x *Index) int { return x.relaid }

// sameScan checks that x's scan is fresh's: the same items in the same
// order, with the same subtree sizes and the same texts, its blocks each
// laid out from their rows' entries.
func sameScan(t *testing.T, x, fresh *Index) {
	t.Helper()
	checkCorpus(t, x)
	flat := func(x *Index) (rows []row, text []string) {
		for _, b := range x.blocks {
			rows = append(rows, b.rows...)
			for i := range b.rows {
				text = append(text, string(b.text.buf[b.text.off[i]:b.text.off[i+1]]))
			}
		}
		return rows, text
	}
	r1, t1 := flat(x)
	r2, t2 := flat(fresh)
	if len(r1) != len(r2) || x.rows() != len(r1) {
		t.Fatalf("%d rows (%d counted), a fresh index %d", len(r1), x.rows(), len(r2))
	}
	for i := range r1 {
		if r1[i].it != r2[i].it || r1[i].size != r2[i].size || t1[i] != t2[i] {
			t.Fatalf("row %d: %s (subtree %d, %q), a fresh index %s (subtree %d, %q)", i, r1[i].it.Key(), r1[i].size, t1[i], r2[i].it.Key(), r2[i].size, t2[i])
		}
	}
}
