package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/bluesky-social/indigo/atproto/syntax"
)

// ErrInvalidRecords means an import found records that do not validate;
// nothing was imported.
var ErrInvalidRecords = errors.New("the CAR holds invalid records")

// ImportReport says what an import did.
type ImportReport struct {
	SourceDID string   `json:"sourceDid"`
	Records   int      `json:"records"`   // app.bulleted records imported
	Replaced  int      `json:"replaced"`  // records the repository held before
	Rewritten int      `json:"rewritten"` // same-repository references moved to this store's DID
	Invalid   []string `json:"invalid,omitempty"`
	// OtherApps counts the CAR's records of other apps (not app.bulleted),
	// which an import leaves out.
	OtherApps int `json:"otherApps,omitempty"`
}

// ImportOptions tune ImportCAR.
type ImportOptions struct {
	// Validate checks one record (value, collection, its URI in this store);
	// nil skips validation.
	Validate func(value map[string]any, collection string, self syntax.ATURI) error
	// AllowInvalid imports records that do not validate (they are still
	// listed in the report); by default one invalid record refuses the
	// whole import.
	AllowInvalid bool
}

// ImportCAR replaces the repository's app.bulleted records with a CAR's (an
// export of this or another store, or a PDS's getRepo), re-committed under
// this store's key and DID. References to the source repository (node and
// mirror parent and original, note and comment subject, policy and outline
// root) are rewritten to this store's DID; references to other identities
// are left alone. The swap is one commit: the new records' blocks are
// appended to the log and HEAD is replaced last, so a process killed at any
// point leaves the old repository or the new one, whole.
func (l *Local) ImportCAR(ctx context.Context, r io.Reader, opts ImportOptions) (*ImportReport, error) {
	src, err := readImportCAR(ctx, r)
	if err != nil {
		return nil, err
	}
	rep := &ImportReport{SourceDID: src.did, OtherApps: src.others}
	from := "at://" + rep.SourceDID + "/"
	to := "at://" + l.did.String() + "/"
	recs := make([]importRecord, 0, len(src.paths))
	for i, k := range src.paths {
		if i%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		val, err := atdata.UnmarshalCBOR(src.recs[src.vals[i]])
		if err != nil {
			return nil, fmt.Errorf("%w: record %s: %w", ErrDamagedCAR, k, err)
		}
		if rep.SourceDID != l.did.String() {
			for _, f := range []string{"parent", "original", "subject", "root"} {
				if s, ok := val[f].(string); ok && strings.HasPrefix(s, from) {
					val[f] = to + strings.TrimPrefix(s, from)
					rep.Rewritten++
				}
			}
		}
		coll, rkey, _ := strings.Cut(k, "/")
		if opts.Validate != nil {
			self, err := syntax.ParseATURI(to + coll + "/" + rkey)
			if err != nil {
				return nil, fmt.Errorf("%w: record %s: %w", ErrDamagedCAR, k, err)
			}
			if err := opts.Validate(val, coll, self); err != nil {
				rep.Invalid = append(rep.Invalid, k+": "+err.Error())
			}
		}
		out, err := atdata.MarshalCBOR(val)
		if err != nil {
			return nil, fmt.Errorf("record %s: %w", k, err)
		}
		recs = append(recs, importRecord{k, out})
	}
	src = nil // the CAR's blocks are no longer needed
	sort.Strings(rep.Invalid)
	if len(rep.Invalid) > 0 && !opts.AllowInvalid {
		return rep, fmt.Errorf("%w: %d record(s), e.g. %s; nothing was imported", ErrInvalidRecords, len(rep.Invalid), rep.Invalid[0])
	}
	rep.Records = len(recs)
	l.mu.Lock()
	defer l.mu.Unlock()
	err = l.locked(ctx, true, func() error {
		rep.Replaced = l.recs.n
		root, err := l.commitRecords(ctx, recs)
		if err != nil {
			return l.dropPending(err)
		}
		if err := l.persist(root); err != nil {
			return l.dropPending(err)
		}
		l.snap = nil
		return l.setRoot(ctx, root)
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// dropPending forgets blocks of a commit that did not happen.
func (l *Local) dropPending(err error) error {
	for _, b := range l.bs.pending {
		delete(l.bs.m, b.Cid())
	}
	l.bs.pending = nil
	return err
}
