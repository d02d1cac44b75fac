package pds

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// What changed since a revision (store.Historian), from the moves of the
// head this Repo followed: the commits getRepo?since= brought (advance),
// those the followed stream delivered (Follow), and our own (Apply), each
// with its records' values before and after. The history reaches back to
// the last whole read of the repository and at most History moves: what
// is older is said (Since.Cut), never left out silently. Several commits
// read together by one getRepo?since= are one move, so a rev between them
// is answered from the move before it, and said.

// atHead is each change's record at the head known (Value nil: absent):
// from our own commits on top of the kept repository, else from it.
// r.mu is held; r.car is not yet brought past the head.
func (r *Repo) atHead(changes []store.Record) []store.Record {
	if r.car == nil {
		return nil
	}
	own := r.history[len(r.history)-r.pending:]
	out := make([]store.Record, len(changes))
	for i, ch := range changes {
		out[i] = store.Record{Collection: ch.Collection, RKey: ch.RKey}
		found := false
		for j := len(own) - 1; j >= 0 && !found; j-- {
			for _, o := range own[j].changes {
				if o.Collection == ch.Collection && o.RKey == ch.RKey {
					out[i], found = o, true
					break
				}
			}
		}
		if found {
			continue
		}
		v, val, err := r.car.lookup([]byte(ch.Collection + "/" + ch.RKey))
		if err == nil && v.Defined() {
			out[i].CID, out[i].Value = v.String(), val
		}
	}
	return out
}

// History implements store.Historian. It first asks the PDS what changed
// since the head known (one request), so that the answer counts to the
// repository's head.
func (r *Repo) History(ctx context.Context, q store.HistoryQuery) (*store.Since, error) {
	if q.Rev != "" {
		if _, err := syntax.ParseTID(q.Rev); err != nil {
			return nil, fmt.Errorf("%w: %q is not a repo rev (a TID)", store.ErrUnknownRev, q.Rev)
		}
	}
	if r.ListOnly {
		return nil, fmt.Errorf("the repository is read by listRecords here, which keeps no history of its commits")
	}
	r.mu.Lock()
	head := r.head
	r.mu.Unlock()
	if head == "" {
		if _, err := r.Snapshot(ctx); err != nil {
			return nil, err
		}
	} else if _, _, _, _, err := r.Changes(ctx, head); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// the moves that lead to the head, oldest first
	h := r.history
	i := len(h) - 1
	if i >= 0 && h[i].to == r.head {
		for i > 0 && h[i-1].to == h[i].from {
			i--
		}
		h = h[i:]
	} else {
		h = nil
	}
	// points: the revs of the commits between the moves (h[j] goes from
	// point j to point j+1)
	points := make([]string, 0, len(h)+1)
	commits := make([]string, 0, len(h)+1)
	if len(h) == 0 {
		points, commits = append(points, r.headRev), append(commits, r.head)
	} else {
		points, commits = append(points, h[0].fromRev), append(commits, h[0].from)
		for _, t := range h {
			points, commits = append(points, t.rev), append(commits, t.to)
		}
	}
	end := len(points) - 1
	if q.Until != "" {
		end = -1
		for j, p := range points {
			if p == q.Until {
				end = j
			}
		}
		if end < 0 {
			return nil, fmt.Errorf("%w: the page's revision %s is no longer in the history this server keeps: start again", store.ErrUnknownRev, q.Until)
		}
	}
	oldest := points[0]
	gone := fmt.Sprintf("this server has followed the repository's commits one by one only since rev %s (%s: its last whole read, or the oldest of the %d moves it keeps)", oldest, revTime(oldest), History)
	start, cut := -1, ""
	switch {
	case q.Rev != "":
		for j := end; j >= 0; j-- {
			if points[j] == q.Rev {
				start = j
				break
			}
		}
		switch {
		case start >= 0:
		case q.Rev > points[end]:
			return nil, fmt.Errorf("%w: rev %s is newer than the repository's %s", store.ErrUnknownRev, q.Rev, points[end])
		case q.Rev < oldest:
			start, cut = 0, gone+fmt.Sprintf(": the changes since then are listed; those between rev %s and it cannot be told", q.Rev)
		default:
			for j := end; j >= 0; j-- {
				if points[j] < q.Rev {
					start = j
					break
				}
			}
			cut = fmt.Sprintf("rev %s is not a commit this server saw on its own (it read several commits at once): the changes since rev %s, the one before it, are listed, so some may be older than rev %s", q.Rev, points[start], q.Rev)
		}
	default:
		for j := end; j >= 0; j-- {
			if tid, err := syntax.ParseTID(points[j]); err == nil && !tid.Time().After(q.Time) {
				start = j
				break
			}
		}
		if start < 0 {
			start, cut = 0, gone+fmt.Sprintf(", later than %s: the changes since then are listed, earlier ones cannot be told", q.Time.UTC().Format(time.RFC3339))
		}
	}
	out := &store.Since{Rev: points[start], Commit: commits[start], Head: commits[end], HeadRev: points[end], Commits: end - start, Cut: cut}
	type state struct {
		first, last store.Record
		known       bool // first is known
		at          int
	}
	touched := map[string]*state{}
	var order []string
	unknown := 0
	for j := start; j < end; j++ {
		t := h[j]
		for k, ch := range t.changes {
			key := ch.Collection + "/" + ch.RKey
			s := touched[key]
			if s == nil {
				s = &state{}
				if k < len(t.before) {
					s.first, s.known = t.before[k], true
				}
				touched[key] = s
				order = append(order, key)
			}
			s.last, s.at = ch, j
		}
	}
	// in the order of their last change
	byAt := make([][]string, end-start+1)
	for _, key := range order {
		s := touched[key]
		if s.known && s.first.CID == s.last.CID {
			continue // back to what it was
		}
		byAt[s.at-start] = append(byAt[s.at-start], key)
	}
	for _, keys := range byAt {
		for _, key := range keys {
			s := touched[key]
			ch := store.Changed{Collection: s.last.Collection, RKey: s.last.RKey, Commit: h[s.at].to, Rev: h[s.at].rev,
				After: s.last.Value, AfterCID: s.last.CID, Absent: s.last.CID == ""}
			if s.known {
				ch.Before, ch.BeforeCID, ch.BeforeAbsent = s.first.Value, s.first.CID, s.first.CID == ""
			} else {
				unknown++ // said as edited
				ch.Before, ch.BeforeCID = s.last.Value, s.last.CID
			}
			out.Changed = append(out.Changed, ch)
		}
	}
	if unknown > 0 {
		msg := fmt.Sprintf("%d record(s) changed in commits this server took in before it kept records' earlier values: they are said as edited, which may be a creation or a move", unknown)
		out.Cut = strings.TrimPrefix(out.Cut+"; "+msg, "; ")
	}
	return out, nil
}

// revTime is the time of a rev TID ("?" if it is not one).
func revTime(rev string) string {
	tid, err := syntax.ParseTID(rev)
	if err != nil {
		return "?"
	}
	return tid.Time().UTC().Format(time.RFC3339)
}

var _ store.Historian = (*Repo)(nil)
