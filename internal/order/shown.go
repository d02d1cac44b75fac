package order

import "strings"

// CompareShown orders two bullets shown under one parent, as the outline
// renders them: by sortKey as bytes, then record key, a bullet before a
// mirror, then the repository ("" for the outline owner's, before any
// contributor's DID).
func CompareShown(aSort, aKey string, aMirror bool, aDID string, bSort, bKey string, bMirror bool, bDID string) int {
	if c := strings.Compare(aSort, bSort); c != 0 {
		return c
	}
	if c := strings.Compare(aKey, bKey); c != 0 {
		return c
	}
	if aMirror != bMirror {
		if !aMirror {
			return -1
		}
		return 1
	}
	return strings.Compare(aDID, bDID)
}
