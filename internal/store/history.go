package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bluesky-social/indigo/atproto/repo/mst"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"
)

// What changed since a revision, from a repository's own history: the
// embedded store reads the commits its block log still holds (a
// compaction keeps only the commit current then, so history before it is
// gone, and said: Since.Cut), a PDS its followed commits.

// ErrUnknownRev means a revision the repository never had (or, for a time,
// none that old or new): the argument is wrong, not the repository.
var ErrUnknownRev = errors.New("not a revision of this repository")

// HistoryQuery asks what changed after Rev (a repo rev TID), or after the
// state the repository was in at Time when Rev is empty, up to Until (a
// rev; "" : the head), so that the pages of one answer count from the same
// two revisions.
type HistoryQuery struct {
	Rev   string
	Time  time.Time
	Until string
}

// Changed is one record whose value differs between the two revisions:
// Before and After are its values there (zero: absent), Commit and Rev the
// commit that last changed it.
type Changed struct {
	Collection, RKey     string
	Before, After        Value
	BeforeCID, AfterCID  string
	Commit, Rev          string
	BeforeAbsent, Absent bool // not in the repository at the first revision, at the last
}

// Since is what a repository's history tells changed between two of its
// revisions.
type Since struct {
	Rev     string // what the changes count from: the revision asked, the one in force at the time asked, or the oldest kept (Cut)
	Commit  string // its commit
	Head    string // what they count to (the query's Until, or the head)
	HeadRev string
	Commits int       // commits between the two
	Changed []Changed // in the order of their last change (oldest first)
	// Cut says what history the repository no longer holds ("": none):
	// changes before Rev cannot be told.
	Cut string
}

// Historian is implemented by repositories that can tell, from their own
// history, what changed since a revision or a time.
type Historian interface {
	History(ctx context.Context, q HistoryQuery) (*Since, error)
}

// MaxHistoryCommits bounds the commits one History reads.
const MaxHistoryCommits = 20_000

// mstNode is one decoded MST node: its entries and subtrees.
type mstNode struct {
	keys []string
	vals []cid.Cid
	subs []cid.Cid
}

// History implements Historian from the commits of the block log.
func (l *Local) History(ctx context.Context, q HistoryQuery) (*Since, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out *Since
	err := l.locked(ctx, false, func() error {
		var err error
		out, err = l.since(ctx, q)
		return err
	})
	return out, err
}

func (l *Local) since(ctx context.Context, q HistoryQuery) (*Since, error) {
	if q.Rev != "" {
		if _, err := syntax.ParseTID(q.Rev); err != nil {
			return nil, fmt.Errorf("%w: %q is not a repo rev (a TID)", ErrUnknownRev, q.Rev)
		}
	}
	// the chain: the log's commits of this store, oldest first, up to HEAD
	cands := l.logCommits()
	var chain []candidate
	for _, cd := range slices.Backward(cands) {
		if l.checkSigned(cd.c, &cd.commit) != nil {
			continue
		}
		chain = append(chain, cd)
		if cd.c == l.root {
			break
		}
	}
	if len(chain) == 0 || chain[len(chain)-1].c != l.root {
		return nil, fmt.Errorf("%w: HEAD's commit %s is not among the block log's commits", ErrCorrupt, l.root)
	}
	end := len(chain) - 1
	if q.Until != "" {
		end = slices.IndexFunc(chain, func(cd candidate) bool { return cd.commit.Rev == q.Until })
		if end < 0 {
			return nil, fmt.Errorf("%w: the page's revision %s is no longer in the block log (compacted since): start again", ErrUnknownRev, q.Until)
		}
	}
	oldest := chain[0]
	start, cut := -1, ""
	switch {
	case q.Rev != "":
		start = slices.IndexFunc(chain[:end+1], func(cd candidate) bool { return cd.commit.Rev == q.Rev })
		if start < 0 {
			switch {
			case q.Rev > chain[end].commit.Rev:
				return nil, fmt.Errorf("%w: rev %s is newer than the repository's %s", ErrUnknownRev, q.Rev, chain[end].commit.Rev)
			case q.Rev < oldest.commit.Rev:
				if empty, err := l.emptyTree(ctx, oldest.commit.Data); err == nil && empty {
					return nil, fmt.Errorf("%w: rev %s is older than the repository's first commit (rev %s)", ErrUnknownRev, q.Rev, oldest.commit.Rev)
				}
				start = 0
				cut = fmt.Sprintf("the repository no longer holds its history before rev %s (%s): the embedded store's block log was compacted, which keeps only the commit current then; changes since that rev are listed, earlier ones (after rev %s) cannot be told", oldest.commit.Rev, revTime(oldest.commit.Rev), q.Rev)
			default:
				return nil, fmt.Errorf("%w: the repository has no commit with rev %s (its revs since %s are its commits')", ErrUnknownRev, q.Rev, oldest.commit.Rev)
			}
		}
	default:
		// the state at the time: the newest commit made by then
		for i := end; i >= 0; i-- {
			if tid, err := syntax.ParseTID(chain[i].commit.Rev); err == nil && !tid.Time().After(q.Time) {
				start = i
				break
			}
		}
		if start < 0 {
			start = 0
			if empty, err := l.emptyTree(ctx, oldest.commit.Data); err != nil || !empty {
				cut = fmt.Sprintf("the repository no longer holds its history before rev %s (%s), later than %s: the embedded store's block log was compacted, which keeps only the commit current then; changes since that rev are listed, earlier ones cannot be told", oldest.commit.Rev, revTime(oldest.commit.Rev), q.Time.UTC().Format(time.RFC3339))
			}
		}
	}
	if end-start > MaxHistoryCommits {
		return nil, fmt.Errorf("%d commits since rev %s: more than the %d one answer reads; ask from a later rev or time", end-start, chain[start].commit.Rev, MaxHistoryCommits)
	}
	out := &Since{Rev: chain[start].commit.Rev, Commit: chain[start].c.String(), Head: chain[end].c.String(), HeadRev: chain[end].commit.Rev, Commits: end - start, Cut: cut}
	nodes := map[cid.Cid]*mstNode{}
	type state struct {
		first, last cid.Cid // value at the start (Undef: absent), now
		at          int     // chain index of the last change
	}
	touched := map[string]*state{}
	set, err := l.treeNodes(ctx, chain[start].commit.Data, nodes) // the nodes of the tree at hand
	if err != nil {
		return nil, fmt.Errorf("commit %s (rev %s): %w", chain[start].c, chain[start].commit.Rev, err)
	}
	prevRoot := chain[start].commit.Data
	for i := start + 1; i <= end; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// the next tree's nodes the tree at hand lacks (a node both have is
		// the same subtree in both: not walked), then the nodes of the
		// tree at hand the next one no longer has (those not under the
		// boundary met); only the entries of those differ
		root := chain[i].commit.Data
		var added, removed []*mstNode
		boundary, seen := map[cid.Cid]bool{}, map[cid.Cid]bool{}
		var addedIDs, removedIDs []cid.Cid
		stack := []cid.Cid{root}
		for len(stack) > 0 {
			c := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if set[c] {
				boundary[c] = true
				continue
			}
			if seen[c] {
				continue
			}
			seen[c] = true
			n, err := l.mstNode(c, nodes)
			if err != nil {
				return nil, fmt.Errorf("commit %s (rev %s): %w", chain[i].c, chain[i].commit.Rev, err)
			}
			added, addedIDs = append(added, n), append(addedIDs, c)
			stack = append(stack, n.subs...)
		}
		stack = append(stack, prevRoot)
		for len(stack) > 0 {
			c := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if boundary[c] || seen[c] {
				continue
			}
			seen[c] = true
			n, err := l.mstNode(c, nodes)
			if err != nil {
				return nil, err
			}
			removed, removedIDs = append(removed, n), append(removedIDs, c)
			stack = append(stack, n.subs...)
		}
		for _, c := range removedIDs {
			delete(set, c)
		}
		for _, c := range addedIDs {
			set[c] = true
		}
		prevRoot = root
		was, now := map[string]cid.Cid{}, map[string]cid.Cid{}
		for _, n := range removed {
			for j, k := range n.keys {
				was[k] = n.vals[j]
			}
		}
		for _, n := range added {
			for j, k := range n.keys {
				now[k] = n.vals[j]
			}
		}
		note := func(k string, before, after cid.Cid) {
			if !strings.HasPrefix(k, Prefix) || before == after {
				return
			}
			s := touched[k]
			if s == nil {
				s = &state{first: before}
				touched[k] = s
			}
			s.last, s.at = after, i
		}
		for k, v := range now {
			note(k, was[k], v)
		}
		for k, v := range was {
			if _, ok := now[k]; !ok {
				note(k, v, cid.Undef)
			}
		}
	}
	keys := make([]string, 0, len(touched))
	for k, s := range touched {
		if s.first != s.last {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		if d := touched[a].at - touched[b].at; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	value := func(c cid.Cid) (Value, error) {
		raw, err := l.bs.raw(c)
		if err != nil {
			return Value{}, err
		}
		return DecodeValue(raw)
	}
	for _, k := range keys {
		s := touched[k]
		coll, rkey, _ := strings.Cut(k, "/")
		ch := Changed{Collection: coll, RKey: rkey, Commit: chain[s.at].c.String(), Rev: chain[s.at].commit.Rev,
			BeforeAbsent: !s.first.Defined(), Absent: !s.last.Defined()}
		var err error
		if s.first.Defined() {
			ch.BeforeCID = s.first.String()
			if ch.Before, err = value(s.first); err != nil {
				return nil, fmt.Errorf("record %s before: %w", k, err)
			}
		}
		if s.last.Defined() {
			ch.AfterCID = s.last.String()
			if ch.After, err = value(s.last); err != nil {
				return nil, fmt.Errorf("record %s: %w", k, err)
			}
		}
		out.Changed = append(out.Changed, ch)
	}
	return out, nil
}

// treeNodes returns the nodes of the MST at root, decoding each node once
// (nodes keeps them across trees: the commits of a history share most).
func (l *Local) treeNodes(ctx context.Context, root cid.Cid, nodes map[cid.Cid]*mstNode) (map[cid.Cid]bool, error) {
	set := map[cid.Cid]bool{}
	stack := []cid.Cid{root}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if set[c] {
			continue
		}
		set[c] = true
		n, err := l.mstNode(c, nodes)
		if err != nil {
			return nil, err
		}
		stack = append(stack, n.subs...)
	}
	return set, nil
}

// mstNode is node c, decoded once (nodes keeps it).
func (l *Local) mstNode(c cid.Cid, nodes map[cid.Cid]*mstNode) (*mstNode, error) {
	if n := nodes[c]; n != nil {
		return n, nil
	}
	raw, err := l.bs.raw(c)
	if err != nil {
		return nil, fmt.Errorf("MST node %s: %w", c, err)
	}
	nd, err := mst.NodeDataFromCBOR(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("MST node %s: %w", c, err)
	}
	n := &mstNode{}
	if nd.Left != nil {
		n.subs = append(n.subs, *nd.Left)
	}
	var prev []byte
	for _, e := range nd.Entries {
		if e.PrefixLen < 0 || int(e.PrefixLen) > len(prev) {
			return nil, fmt.Errorf("MST node %s: key prefix %d longer than the previous key", c, e.PrefixLen)
		}
		key := append(append([]byte{}, prev[:e.PrefixLen]...), e.KeySuffix...)
		n.keys = append(n.keys, string(key))
		n.vals = append(n.vals, e.Value)
		if e.Right != nil {
			n.subs = append(n.subs, *e.Right)
		}
		prev = key
	}
	nodes[c] = n
	return n, nil
}

// emptyTree reports whether the MST at root holds no app.bulleted record.
func (l *Local) emptyTree(ctx context.Context, root cid.Cid) (bool, error) {
	empty := true
	err := l.walkNodes(ctx, root, func(k string, _ cid.Cid) error {
		if strings.HasPrefix(k, Prefix) {
			empty = false
			return errStop
		}
		return nil
	}, nil)
	if errors.Is(err, errStop) {
		err = nil
	}
	return empty, err
}

// revTime is the time a rev TID was made at, or "" if it is not one.
func revTime(rev string) string {
	tid, err := syntax.ParseTID(rev)
	if err != nil {
		return "not a TID"
	}
	return tid.Time().UTC().Format(time.RFC3339)
}
