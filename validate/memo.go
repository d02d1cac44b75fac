package validate

import (
	"sync"

	"github.com/bluesky-social/indigo/atproto/syntax"
)

// memo remembers the outcome of parsing strings that repeat across the
// records of one large plan (the parent URI of a thousand siblings, the
// createdAt of one operation), so that each is parsed once, not once per
// record. It is bounded: past memoSize entries it starts over.
type memo struct {
	mu  sync.Mutex
	m   map[string]memoEntry
	max int
}

type memoEntry struct {
	uri syntax.ATURI
	err error
}

const memoSize = 1 << 14

var uriMemo = &memo{m: map[string]memoEntry{}, max: memoSize}

// parseATURI is syntax.ParseATURI, memoised.
func parseATURI(s string) (syntax.ATURI, error) {
	uriMemo.mu.Lock()
	e, ok := uriMemo.m[s]
	uriMemo.mu.Unlock()
	if ok {
		return e.uri, e.err
	}
	u, err := syntax.ParseATURI(s)
	uriMemo.mu.Lock()
	if len(uriMemo.m) >= uriMemo.max {
		uriMemo.m = map[string]memoEntry{}
	}
	uriMemo.m[s] = memoEntry{u, err}
	uriMemo.mu.Unlock()
	return u, err
}

// stringMemo remembers which (format, string) pairs passed a format check.
var stringMemo = struct {
	sync.Mutex
	m map[[2]string]error
}{m: map[[2]string]error{}}

func formatChecked(format, s string, check func() error) error {
	k := [2]string{format, s}
	stringMemo.Lock()
	err, ok := stringMemo.m[k]
	stringMemo.Unlock()
	if ok {
		return err
	}
	err = check()
	stringMemo.Lock()
	if len(stringMemo.m) >= memoSize {
		stringMemo.m = map[[2]string]error{}
	}
	stringMemo.m[k] = err
	stringMemo.Unlock()
	return err
}
