package outline

import (
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"
)

// TestRefusedKeys: keys the reference PDS refuses (found with its own
// hasExplicitSlur on random TID-shaped keys) are caught; minted keys never
// are (a fault-matrix run once stopped on "Unacceptable slur in record
// key" for a minted TID).
func TestRefusedKeys(t *testing.T) {
	for _, k := range []string{"3n3wniqqer6se", "3n3wn4gg3rhwr", "3n3wnoqgerbob"} {
		if !refusedKey(k) {
			t.Errorf("%s: the reference PDS refuses it, refusedKey does not", k)
		}
	}
	for _, k := range []string{"3n3whkso3b5er", "3n3wcuoptqibw", "2222222222222", "zzzzzzzzzzzzz"} {
		if refusedKey(k) {
			t.Errorf("%s: refused, but the PDS accepts it", k)
		}
	}
	kl := &keyList{clock: syntax.NewTIDClock(0)}
	for range 10000 {
		if k := kl.get(); refusedKey(k) {
			t.Fatalf("minted %s", k)
		}
	}
}
