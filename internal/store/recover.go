package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	atrepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"

	"github.com/bulleted-mcp/bulleted-mcp/internal/atomicfile"
)

// The embedded store never takes a state file that is missing or unreadable
// for a new one while the files beside it say there was data: a missing or
// unreadable HEAD is recovered from the block log (the newest commit that
// loads completely and is signed by signing.key), and said; a missing or
// foreign signing.key, or a missing block log that HEAD or the operations
// journal speak of, refuses to open and changes nothing.

// errWrongKey means a commit is not signed by this store's key (or names
// another DID).
var errWrongKey = errors.New("commit not signed by this store's signing.key")

// Noticer is implemented by repositories that found something at open that
// the user must be told (a HEAD recovered from the log): TakeNotices returns
// what has not been told yet, once.
type Noticer interface {
	TakeNotices() []string
}

// Notices is what opening a data directory found and said, each told once
// to the tools (TakeNotices) and all of it to the CLI (All).
type Notices struct {
	mu   sync.Mutex
	all  []string
	told int
}

// Add records a notice.
func (n *Notices) Add(s string) {
	n.mu.Lock()
	n.all = append(n.all, s)
	n.mu.Unlock()
}

// All returns every notice, told or not.
func (n *Notices) All() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.all)
}

// TakeNotices implements Noticer.
func (n *Notices) TakeNotices() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := slices.Clone(n.all[n.told:])
	n.told = len(n.all)
	return out
}

// Notices returns everything opening the store found and said (a HEAD
// recovered from the log), told or not: the CLI prints them on stderr.
func (l *Local) Notices() []string { return l.notes.All() }

// TakeNotices implements Noticer: the notices not yet taken (the first
// tool result of a session carries them).
func (l *Local) TakeNotices() []string { return l.notes.TakeNotices() }

// checkSigned reports whether commit (at root) is this store's: its DID
// and a signature that verifies with signing.key's public key.
func (l *Local) checkSigned(root cid.Cid, commit *atrepo.Commit) error {
	if commit.DID != l.did.String() {
		return fmt.Errorf("%w: commit %s is of %s, signing.key is %s's", errWrongKey, root, commit.DID, l.did)
	}
	if err := commit.VerifySignature(l.pub); err != nil {
		return fmt.Errorf("%w: commit %s: the signature does not verify with signing.key (%v)", errWrongKey, root, err)
	}
	return nil
}

// candidate is a commit block found in the log.
type candidate struct {
	c      cid.Cid
	off    int64
	commit atrepo.Commit
}

// logCommits returns the commit blocks of the log (whole, matching their
// CID), newest first: by place in the log, which is the order they were
// committed in (each commit's blocks are appended after the last, and a
// compaction writes only the current commit), whatever the clock said when
// their revs were made.
func (l *Local) logCommits() []candidate {
	var out []candidate
	for c, sp := range l.bs.at.all() {
		if c.Type() != cid.DagCBOR {
			continue
		}
		raw, err := l.bs.raw(c)
		if err != nil || len(raw) == 0 || raw[0]&0xe0 != 0xa0 || !bytes.Contains(raw, []byte("version")) || !bytes.Contains(raw, []byte("data")) {
			continue // not a CBOR map with a commit's fields
		}
		var commit atrepo.Commit
		if commit.UnmarshalCBOR(bytes.NewReader(raw)) != nil || commit.VerifyStructure() != nil {
			continue
		}
		out = append(out, candidate{c: c, off: sp.off, commit: commit})
	}
	slices.SortFunc(out, func(a, b candidate) int { return cmp.Compare(b.off, a.off) })
	return out
}

// recoverHead makes HEAD the newest commit of the log that is this store's
// (signed with signing.key) and loads completely, rewrites HEAD (atomically)
// and says so; why says what was wrong with HEAD. good is how much of the
// log (size bytes) is whole sections. Nothing is compacted or cut. If no
// commit qualifies, nothing on disk is changed.
func (l *Local) recoverHead(ctx context.Context, why string, good, size int64) error {
	cands := l.logCommits()
	foreign, incomplete := 0, 0
	var foreignDID string
	for _, cd := range cands {
		if err := l.checkSigned(cd.c, &cd.commit); err != nil {
			foreign++
			foreignDID = cd.commit.DID
			continue
		}
		if err := l.setRoot(ctx, cd.c); err != nil {
			incomplete++
			continue
		}
		rewrote := "rewrote HEAD to it"
		if l.readOnly {
			rewrote = "read it from there (the directory is read-only: HEAD was not rewritten)"
		} else if err := atomicfile.Write(l.headPath(), []byte(cd.c.String()+"\n"), 0o600); err != nil {
			return fmt.Errorf("recovered HEAD (commit %s) but could not write it: %w", cd.c, err)
		}
		msg := fmt.Sprintf("The embedded store's HEAD file was %s: recovered it from the block log as commit %s (rev %s, %d records), the newest of the log's %d commit(s) that loads completely and verifies with signing.key, and %s.",
			why, cd.c, cd.commit.Rev, len(l.snap.Records), len(cands), rewrote)
		if incomplete > 0 {
			msg += fmt.Sprintf(" %d newer commit(s) in the log do not load completely (blocks missing): what they wrote is not in the outline.", incomplete)
		}
		if foreign > 0 {
			msg += fmt.Sprintf(" %d commit(s) in the log are not signed by signing.key and were skipped.", foreign)
		}
		if good != size {
			msg += fmt.Sprintf(" The log's last %d bytes (from byte %d) are a torn write, not part of any commit.", size-good, good)
		}
		if n, lost := l.lostJournalCommits(cd.c, cd.commit.Rev); n > 0 {
			msg += fmt.Sprintf(" The operations journal (ops/) records %d landed commit(s) that are not in the log (%s): those writes are lost.", n, strings.Join(lost, "; "))
		}
		msg += " Check the outline; nothing was compacted."
		l.notes.Add(msg)
		return nil
	}
	switch {
	case len(cands) == 0:
		return fmt.Errorf("%w: HEAD is %s and the block log (%d bytes, %d whole) holds no complete commit; nothing was changed. Restore HEAD and blocks.log from a backup; if this directory never held an outline, remove blocks.log and HEAD", ErrCorrupt, why, size, good)
	case foreign > 0 && incomplete == 0:
		return fmt.Errorf("%w: HEAD is %s and none of the block log's %d commit(s) is signed by signing.key (%s; the log's commits are %s's): signing.key is not this store's key; nothing was changed. Restore the store's own signing.key from a backup", ErrCorrupt, why, len(cands), l.did, foreignDID)
	default:
		return fmt.Errorf("%w: HEAD is %s and none of the block log's %d commit(s) loads completely with signing.key (%d do not load, %d are not signed by it); nothing was changed. Restore HEAD and blocks.log from a backup", ErrCorrupt, why, len(cands), incomplete, foreign)
	}
}

// journalOp is what the store reads of a recorded operation (ops/*.json,
// written by the outline engine): whose it is and the commits it landed.
type journalOp struct {
	ID      string    `json:"id"`
	DID     string    `json:"did"`
	Started time.Time `json:"started"`
	Commits []string  `json:"commits"`
	Writes  []struct {
		Op Op `json:"op"`
	} `json:"writes"`
	Batches []int `json:"batches"`
	Landed  int   `json:"landed"`
}

// maxJournalFile bounds what is read of one operation record.
const maxJournalFile = 64 << 20

// journal returns the operations recorded in dir/ops (unreadable records
// are skipped: the engine reports them), with their latest commits.
func journal(dir string) []journalOp { return journalSince(dir, time.Time{}) }

// journalSince is journal of the records written since (by modification
// time): the operations that may have landed commits since.
func journalSince(dir string, since time.Time) []journalOp {
	ents, err := os.ReadDir(filepath.Join(dir, "ops"))
	if err != nil {
		return nil
	}
	var out []journalOp
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if !since.IsZero() {
			if info, err := e.Info(); err != nil || info.ModTime().Before(since) {
				continue
			}
		}
		f, err := os.Open(filepath.Join(dir, "ops", e.Name()))
		if err != nil {
			continue
		}
		dec := json.NewDecoder(io.LimitReader(f, maxJournalFile))
		var op journalOp
		if dec.Decode(&op) == nil {
			for {
				// the lines appended while it ran: the last whole one holds
				// every commit landed
				var d struct {
					Commits []string `json:"commits"`
					Landed  int      `json:"landed"`
				}
				if dec.Decode(&d) != nil {
					break
				}
				op.Commits, op.Landed = d.Commits, d.Landed
			}
			out = append(out, op)
		}
		f.Close()
	}
	return out
}

// lostJournalCommits lists the commits this store's recorded operations
// landed that are not in the block log, as "operation commit": only of
// operations started after root's commit (rev), since a compaction drops
// older commits from the log. n counts them all; lost names the first 5.
func (l *Local) lostJournalCommits(root cid.Cid, rev string) (n int, lost []string) {
	tid, err := syntax.ParseTID(rev)
	if err != nil {
		return 0, nil
	}
	for _, op := range journal(l.dir) {
		if op.DID != l.did.String() || !op.Started.After(tid.Time()) {
			continue
		}
		for _, s := range op.Commits {
			c, err := cid.Decode(s)
			if err != nil || c == root || l.bs.has(c) {
				continue
			}
			if n++; len(lost) < 5 {
				lost = append(lost, "operation "+op.ID+" commit "+s)
			}
		}
	}
	return n, lost
}

// landedOps returns the recorded operations that landed commits and belong
// to did (or, with did empty, to any embedded store: a did:key identity).
func landedOps(dir, did string) []journalOp {
	var out []journalOp
	for _, op := range journal(dir) {
		if len(op.Commits) == 0 {
			continue
		}
		if did == "" && strings.HasPrefix(op.DID, "did:key:") || did != "" && op.DID == did {
			out = append(out, op)
		}
	}
	return out
}

// describeOps names the newest of ops for an error message.
func describeOps(ops []journalOp) string {
	newest := slices.MaxFunc(ops, func(a, b journalOp) int { return strings.Compare(a.ID, b.ID) })
	return fmt.Sprintf("%d operation(s) of %s that landed commits, the newest %s started %s", len(ops), newest.DID, newest.ID, newest.Started.UTC().Format(time.RFC3339))
}

// checkKeyless refuses to make a new signing.key (and so a new, empty
// outline) in a directory whose other files say a store is there: a block
// log with data, a HEAD, or recorded operations of an embedded store that
// landed commits; or the state the PDS backend keeps (a session, a budget
// ledger, a repository cache, operations of a PDS identity), where a new
// embedded outline would silently stand in for the user's repository.
// Nothing is written.
func checkKeyless(dir string) error {
	var found []string
	if info, err := os.Stat(filepath.Join(dir, "blocks.log")); err == nil && info.Size() > 0 {
		found = append(found, fmt.Sprintf("a block log of %d bytes", info.Size()))
	}
	if _, err := os.Lstat(filepath.Join(dir, "HEAD")); err == nil {
		found = append(found, "a HEAD")
	}
	if ops := landedOps(dir, ""); len(ops) > 0 {
		found = append(found, "an operations journal with "+describeOps(ops))
	}
	if len(found) > 0 {
		return fmt.Errorf("%w: signing.key is missing from %s, which holds %s: a new key would be another identity, unable to sign this outline's commits; nothing was changed. Restore signing.key from a backup of this directory", ErrCorrupt, dir, strings.Join(found, " and "))
	}
	// the PDS backend's files (pds.SessionFile, pds.OAuthFile, the budget
	// ledger and repository cache cmd/bulleted-mcp keeps per identity)
	for _, pat := range []string{"oauth-session.json", "session.json", "budget-*.json", "repo-*.car"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, f := range m {
			found = append(found, filepath.Base(f))
		}
	}
	var remote []string
	for _, op := range journal(dir) {
		if len(op.Commits) > 0 && !strings.HasPrefix(op.DID, "did:key:") && !slices.Contains(remote, op.DID) {
			remote = append(remote, op.DID)
		}
	}
	if len(remote) > 0 {
		found = append(found, "operations in ops/ that landed in the repository of "+strings.Join(remote, ", "))
	}
	if len(found) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s holds the PDS backend's state (%s) and no embedded store: opening it as one would start a new, empty outline in place of that repository; nothing was changed. Sign in again (bulleted-mcp login, or --pds/--identifier with the app password), or give an embedded outline a directory of its own (--store)", ErrCorrupt, dir, strings.Join(found, ", "))
}

// JournalSpend is what the operations journal in dir/ops records of did's
// writes since: how many operations started then landed batches, and the
// budget points (Cost) of the writes they landed. It stands in for a budget
// ledger that is missing: the engine's journal outlives it.
func JournalSpend(dir, did string, since time.Time) (ops, points int) {
	for _, op := range journal(dir) {
		if op.DID != did || op.Started.Before(since) || op.Landed <= 0 || op.Landed > len(op.Batches) {
			continue
		}
		end := min(op.Batches[op.Landed-1], len(op.Writes))
		ws := make([]Write, end)
		for i := range ws {
			ws[i].Op = op.Writes[i].Op
		}
		ops++
		points += Cost(ws)
	}
	return ops, points
}

// journalAhead tells (a notice) when the operations journal records commits
// landed after HEAD's commit (root, rev) that HEAD does not include: HEAD,
// or HEAD and the log, put back from an older copy. Only the records
// written since that commit are read. It reports whether it told: then
// the log is not compacted (the newer commits would go).
func (l *Local) journalAhead(root cid.Cid, rev string) bool {
	tid, err := syntax.ParseTID(rev)
	if err != nil {
		return false
	}
	at := tid.Time()
	n, inLog := 0, 0
	var names []string
	for _, op := range journalSince(l.dir, at.Add(-time.Second)) {
		if op.DID != l.did.String() || !op.Started.After(at) {
			continue
		}
		for _, s := range op.Commits {
			c, err := cid.Decode(s)
			if err != nil || c == root {
				continue
			}
			n++
			if l.bs.has(c) {
				inLog++
			}
			if len(names) < 5 {
				names = append(names, "operation "+op.ID+" commit "+s)
			}
		}
	}
	if n == 0 {
		return false
	}
	l.notes.Add(fmt.Sprintf("The embedded store's HEAD names commit %s (rev %s), but the operations journal (ops/) records %d commit(s) landed after it (%s): HEAD, or HEAD and the block log, were put back from an older copy, and the outline lacks those writes. %d of those commits are in the log; nothing was changed or compacted. To go back to the newest commit of the log that loads completely, remove HEAD and open the store again (it is recovered and said); else restore the directory from a backup.",
		root, rev, n, strings.Join(names, "; "), inLog))
	return true
}
