package store

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	atrepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/ipfs/go-cid"

	"github.com/bulleted-mcp/bulleted-mcp/internal/atomicfile"
)

// CompactShare is the share of the block log that may be blocks no commit
// uses any more (earlier versions of records and MST nodes) before opening
// the store compacts it.
const CompactShare = 0.25

// compactMin is the fewest unused blocks worth a compaction.
const compactMin = 2048

// CompactReport says what a compaction did.
type CompactReport struct {
	Blocks, Kept     int   // blocks in the log before, and kept
	Before, After    int64 // log size in bytes
	AlreadyCompacted bool  // nothing to drop
}

// Compact rewrites the block log with only the blocks of the current commit
// (the commit, its MST nodes and its records). The new log is written
// beside the old one, synced, and renamed over it, so a crash leaves one or
// the other whole; HEAD does not change. Other processes using the
// directory notice the new file at their next access and read it.
func (l *Local) Compact(ctx context.Context) (CompactReport, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var rep CompactReport
	err := l.locked(ctx, true, func() error {
		var err error
		rep, err = l.compact(ctx)
		return err
	})
	return rep, err
}

// stale reports whether the log holds enough unused blocks to compact.
func (l *Local) stale() bool {
	unused := l.bs.at.len() - l.reachable
	return unused >= compactMin && float64(unused) > CompactShare*float64(l.bs.at.len())
}

func (l *Local) compactPath() string { return filepath.Join(l.dir, "blocks.log.compact") }

// compact runs under the exclusive lock, after refresh.
func (l *Local) compact(ctx context.Context) (CompactReport, error) {
	rep := CompactReport{Blocks: l.bs.at.len(), Before: l.logOff}
	if !l.verified || !l.root.Defined() {
		// only a commit loaded whole and verified with signing.key in this
		// process says which blocks are garbage
		return rep, fmt.Errorf("%w: not compacting: the current commit was not verified in this process", ErrCorrupt)
	}
	cb, err := l.bs.Get(ctx, l.root)
	if err != nil {
		return rep, err
	}
	var commit atrepo.Commit
	if err := commit.UnmarshalCBOR(bytes.NewReader(cb.RawData())); err != nil {
		return rep, fmt.Errorf("commit %s: %w", l.root, err)
	}
	keep := []cid.Cid{l.root}
	err = l.walkNodes(ctx, commit.Data, func(_ string, v cid.Cid) error {
		keep = append(keep, v)
		return nil
	}, func(c cid.Cid) { keep = append(keep, c) })
	if err != nil {
		return rep, err
	}
	if len(keep) >= l.bs.at.len() {
		rep.Kept, rep.After, rep.AlreadyCompacted = len(keep), l.logOff, true
		return rep, nil
	}
	tmp := l.compactPath()
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return rep, err
	}
	fail := func(err error) (CompactReport, error) {
		f.Close()
		os.Remove(tmp)
		return rep, err
	}
	at := newSpans(len(keep))
	var buf bytes.Buffer
	var off int64
	for _, c := range keep {
		if _, dup := at.get(c); dup {
			continue // the same record value under two keys
		}
		blk, err := l.bs.Get(ctx, c)
		if err != nil {
			return fail(err)
		}
		buf.Reset()
		writeSection(&buf, c, blk.RawData())
		if _, err := f.Write(buf.Bytes()); err != nil {
			return fail(err)
		}
		at.set(c, span{off + int64(buf.Len()-len(blk.RawData())), uint32(len(blk.RawData()))})
		off += int64(buf.Len())
	}
	at.seal()
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if beforeCompactRename != nil {
		if err := beforeCompactRename(); err != nil {
			return fail(err)
		}
	}
	if err := os.Rename(tmp, l.logPath()); err != nil {
		return fail(err)
	}
	if err := atomicfile.SyncDir(l.dir); err != nil {
		return rep, err
	}
	l.log.Close()
	l.log, l.logOff = f, off
	l.bs.evict() // nothing points into the old log's mapping any more
	l.bs = &memBlocks{m: l.bs.m, pending: l.bs.pending, log: f, at: at}
	l.reachable = at.len()
	rep.Kept, rep.After = at.len(), off
	return rep, nil
}

// beforeCompactRename lets tests stop a compaction after the new log is
// written and before it replaces the old one (a process killed there).
var beforeCompactRename func() error
