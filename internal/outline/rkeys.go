package outline

import "regexp"

// refusedKeys are the reference PDS's checks of a record key for slurs
// (@atproto/pds dist/handle/explicit-slurs.js, hasExplicitSlur, applied by
// repo/prepare.js to every rkey a write names: "Unacceptable slur in record
// key", HTTP 400). Each character class is cut to its ASCII members, which
// is exact for the keys this engine mints (TIDs: 2-7 and a-z, no '.', '-'
// or '_'): the cut patterns agreed with the PDS's own on two million random
// TID-shaped keys when they were cut.
var refusedKeys = func() []*regexp.Regexp {
	var out []*regexp.Regexp
	for _, p := range []string{
		`\b[c][hH][iI1l][nN][k][sS]?\b`,
		`\b[c][Oo0]{2}[nN][sS]?\b`,
		`\b[f][aA@4][gG]{1,2}([Oo0e3EiI1l][tT]{1,2}([rR][yY]|[rR][iI1l][e3E])?)?[sS]?\b`,
		`\b[k][iI1lyY][k][e3E]([rR][yY]|[rR][iI1l][e3E])?[sS]*\b`,
		`\b[nN][iI1loOa4A][gGq]{2}(l[e3E]t|[e3EaA][rR]?|n[Oo0][gGq]|[a4A]?)?[sS]?\b`,
		`[nN][iI1loOa4A][gGq]{2}(l[e3E]t|[e3E][rR])[sS]?`,
		`\b[tT][rR][aA4]+[nN]{1,2}([iI1l][e3E]|[yY]|[e3E][rR])[sS]?\b`,
	} {
		out = append(out, regexp.MustCompile(p))
	}
	return out
}()

// refusedKey reports whether the reference PDS would refuse k as a record
// key (a minted TID that happens to spell a slur: about one in a million).
func refusedKey(k string) bool {
	for _, re := range refusedKeys {
		if re.MatchString(k) {
			return true
		}
	}
	return false
}
