package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"slices"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Subscriptions are the sessions' resource subscriptions (resources/
// subscribe), and the tree of each subscribed repository last seen.
// CommitSeen is the one way news arrives: a write through this server, a
// resource read, a resources/list, or (later) the firehose's commit event
// all pass the tree they have, and each subscribed session whose resource
// differs between the last tree seen and that one gets one
// notifications/resources/updated for the URI it subscribed to.
//
// Bounded: MaxSubscriptions a session, MaxSubscribedSessions sessions;
// a session's subscriptions end with it (or when a notification finds it
// gone). Nothing here holds a lock across I/O: notifications go to the
// sessions' queues (mcp-go drops one to a session whose queue is full).
type Subscriptions struct {
	mu       sync.Mutex
	srv      *mcpserver.MCPServer
	sessions map[string]map[string]subscription // session ID → URI → what
	last     map[string]*outline.Tree           // repository DID → the tree last seen
	refs     map[string]int                     // repository DID → subscriptions to it
	// send delivers one update (nil: the server's).
	send func(session, uri string) error
	// senders deliver the updates of subscriptions/listen streams (by
	// their key in sessions).
	senders map[string]func(uri string) error
	// missed: session → the oldest revision a session's update failed to
	// leave after (its stream broke while told): toldOf goes no further,
	// so its next stream, on any instance, tells it again
	missed map[string]string
}

// subscription is what a URI names: a repository and an item ID ("" for
// the whole outline, "n/KEY" a node's subtree, "m/KEY" a mirror).
type subscription struct{ did, id string }

// NewSubscriptions returns an empty set of subscriptions. Pass it in
// Options.Subscriptions to call CommitSeen from outside (a firehose).
func NewSubscriptions() *Subscriptions {
	return &Subscriptions{sessions: map[string]map[string]subscription{}, last: map[string]*outline.Tree{}, refs: map[string]int{}, senders: map[string]func(string) error{}, missed: map[string]string{}}
}

func (s *Subscriptions) bind(srv *mcpserver.MCPServer) {
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
}

// Watching reports whether any session subscribes to a resource of did.
func (s *Subscriptions) Watching(did string) bool { return s != nil && s.watching(did) }

// watching reports whether any session subscribes to a resource of did.
func (s *Subscriptions) watching(did string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.last[did]
	return ok
}

// add checks (keep false) or records (keep true) session's subscription
// to uri, which names id in t's repository.
func (s *Subscriptions) add(session, uri string, t *outline.Tree, id string, keep bool) error {
	did := t.DID.String()
	s.mu.Lock()
	mine, known := s.sessions[session]
	_, again := mine[uri]
	switch {
	case again:
	case !known && len(s.sessions) >= MaxSubscribedSessions:
		s.mu.Unlock()
		return fmt.Errorf("this server keeps subscriptions for at most %d sessions; try again later", MaxSubscribedSessions)
	case len(mine) >= MaxSubscriptions:
		s.mu.Unlock()
		return fmt.Errorf("this session has %d subscriptions, the most a session may hold; unsubscribe from one first", MaxSubscriptions)
	}
	_, watched := s.last[did]
	s.mu.Unlock()
	if !keep {
		return nil
	}
	if watched {
		// the subscriptions already held hear of what changed up to t
		// before this one starts from t
		s.CommitSeen(t)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions[session] == nil {
		s.sessions[session] = map[string]subscription{}
	}
	if old, ok := s.sessions[session][uri]; ok {
		s.unref(old.did)
	}
	s.sessions[session][uri] = subscription{did, id}
	s.refs[did]++
	if s.last[did] == nil || s.last[did].Rev < t.Rev {
		s.last[did] = t
	}
	return nil
}

// setSender makes send deliver session's updates.
func (s *Subscriptions) setSender(session string, send func(uri string) error) {
	s.mu.Lock()
	s.senders[session] = send
	s.mu.Unlock()
}

// remove ends session's subscription to uri.
func (s *Subscriptions) remove(session, uri string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sub, ok := s.sessions[session][uri]; ok {
		delete(s.sessions[session], uri)
		s.unref(sub.did)
	}
	if len(s.sessions[session]) == 0 {
		delete(s.sessions, session)
		delete(s.senders, session)
		delete(s.missed, session)
	}
}

// drop ends all of session's subscriptions.
func (s *Subscriptions) drop(session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sub := range s.sessions[session] {
		s.unref(sub.did)
	}
	delete(s.sessions, session)
	delete(s.senders, session)
	delete(s.missed, session)
}

// unref counts one subscription to did less, and lets go of its tree
// when none is left (s.mu held).
func (s *Subscriptions) unref(did string) {
	if s.refs[did]--; s.refs[did] <= 0 {
		delete(s.refs, did)
		delete(s.last, did)
	}
}

// uris are the URIs session subscribes to.
func (s *Subscriptions) uris(session string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for uri := range s.sessions[session] {
		out = append(out, uri)
	}
	return out
}

// Count is the number of subscriptions held (all sessions).
func (s *Subscriptions) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, subs := range s.sessions {
		n += len(subs)
	}
	return n
}

// CommitSeen is the hook for every commit seen in a repository: t is its
// tree now. Each session subscribed to a resource of t's repository whose
// content differs between the tree last seen and t gets one
// notifications/resources/updated; t becomes the tree last seen. A tree
// not newer than the last one seen, or of a repository nobody subscribes
// to, changes nothing. It returns the number of notifications sent.
func (s *Subscriptions) CommitSeen(t *outline.Tree) int {
	if s == nil || t == nil {
		return 0
	}
	did := t.DID.String()
	s.mu.Lock()
	prev, ok := s.last[did]
	if !ok || prev == nil || prev.Commit == t.Commit || t.Rev < prev.Rev {
		s.mu.Unlock()
		return 0
	}
	s.last[did] = t
	type target struct {
		session, uri, id string
		send             func(string) error
	}
	var targets []target
	for session, subs := range s.sessions {
		for uri, sub := range subs {
			if sub.did == did {
				targets = append(targets, target{session, uri, sub.id, s.senders[session]})
			}
		}
	}
	send, srv := s.send, s.srv
	s.mu.Unlock()
	// in a stable order (by session, then URI)
	slices.SortFunc(targets, func(a, b target) int {
		return cmp.Or(strings.Compare(a.session, b.session), strings.Compare(a.uri, b.uri))
	})
	d := newDiff(prev, t)
	sent := 0
	for _, tg := range targets {
		if !d.touched(tg.id) {
			continue
		}
		if s.deliver(send, srv, tg.session, tg.uri, tg.send) {
			sent++
			continue
		}
		s.mu.Lock()
		if _, held := s.sessions[tg.session]; held {
			if m, ok := s.missed[tg.session]; !ok || prev.Rev < m {
				s.missed[tg.session] = prev.Rev
			}
		}
		s.mu.Unlock()
	}
	return sent
}

// deliver sends one notifications/resources/updated of uri to session
// (by own, if set; else by send or srv); a session found gone ends its
// subscriptions. It reports whether it was sent.
func (s *Subscriptions) deliver(send func(session, uri string) error, srv *mcpserver.MCPServer, session, uri string, own func(string) error) bool {
	var err error
	switch {
	case own != nil:
		err = own(uri)
	case send != nil:
		err = send(session, uri)
	case srv == nil:
		err = errors.New("no server")
	default:
		err = srv.SendNotificationToSpecificClient(session, mcp.MethodNotificationResourceUpdated, map[string]any{"uri": uri})
	}
	if errors.Is(err, mcpserver.ErrSessionNotFound) {
		s.drop(session)
	}
	return err == nil
}

// notify sends session one notifications/resources/updated of uri, if it
// subscribes to it here (a subscription loaded from a store whose
// repository moved since the revision it was told of: substore.go).
func (s *Subscriptions) notify(session, uri string) bool {
	s.mu.Lock()
	_, ok := s.sessions[session][uri]
	send, srv, own := s.send, s.srv, s.senders[session]
	s.mu.Unlock()
	return ok && s.deliver(send, srv, session, uri, own)
}

// toldOf is the revision session's subscriptions were told of here: the
// oldest tree last seen of their repositories, or before an update that
// failed to reach the session ("": none).
func (s *Subscriptions) toldOf(session string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	rev := ""
	for _, sub := range s.sessions[session] {
		if t := s.last[sub.did]; t != nil && (rev == "" || t.Rev < rev) {
			rev = t.Rev
		}
	}
	if m, ok := s.missed[session]; ok && rev != "" && m < rev {
		rev = m
	}
	return rev
}

// toldRev is the revision of did's tree this instance's subscriptions
// last saw ("": none): what their sessions were told of.
func (s *Subscriptions) toldRev(did string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.last[did]; t != nil {
		return t.Rev
	}
	return ""
}

// diff tells which subscribed resources differ between two trees of one
// repository. Items are never modified once built, so an item shared by
// both trees is an unchanged subtree; others are compared by record CID,
// note, detached state and children.
type diff struct {
	before, after *outline.Tree
	whole         bool            // the whole outline's rendering changed
	extra         map[string]bool // item IDs touched by mirrors, comments, outline records and policies
	memo          map[string]bool
}

func newDiff(before, after *outline.Tree) *diff {
	d := &diff{before: before, after: after, extra: map[string]bool{}, memo: map[string]bool{}}
	d.whole = listChanged(before.Roots, after.Roots)
	// comments, outline records (titles, contributors) and comment
	// policies render at the bullet they name, and above it
	for _, r := range changedRecords(before, after) {
		field := "root"
		if r.coll == lexicon.Comment {
			field = "subject"
		}
		target, _ := r.value[field].(string)
		if target == "" {
			d.whole = true // the whole outline's (self)
			continue
		}
		if u, err := parseAT(target); err == nil && u.did == after.DID.String() && u.coll == lexicon.Node {
			d.chain(before, before.Nodes.Get(u.rkey))
			d.chain(after, after.Nodes.Get(u.rkey))
		}
	}
	// a mirror shows its original live: a change under the original
	// touches the mirror and everything above it (and so on, for mirrors
	// inside originals)
	for changed := true; changed; {
		changed = false
		for _, m := range after.Mirrors.All() {
			if d.extra["m/"+m.Key()] {
				continue
			}
			u, err := parseAT(m.Str("original"))
			if err != nil || u.did != after.DID.String() || u.coll != lexicon.Node {
				continue
			}
			if d.extra["n/"+u.rkey] || d.changed("n/"+u.rkey) {
				d.chain(after, m)
				d.chain(before, before.Mirrors.Get(m.Key()))
				changed = true
			}
		}
	}
	if len(d.extra) > 0 {
		d.whole = true
	}
	return d
}

// chain marks it and its ancestors in t as touched.
func (d *diff) chain(t *outline.Tree, it *outline.Item) {
	for ; it != nil; it = t.Parent(it) {
		d.extra[itemID(it)] = true
	}
}

// touched reports whether the resource of item ID id ("" the whole
// outline) differs.
func (d *diff) touched(id string) bool {
	if id == "" {
		return d.whole
	}
	return d.extra[id] || d.changed(id)
}

func (d *diff) changed(id string) bool {
	if c, ok := d.memo[id]; ok {
		return c
	}
	get := func(t *outline.Tree) *outline.Item {
		if strings.HasPrefix(id, "m/") {
			return t.Mirrors.Get(id[2:])
		}
		return t.Nodes.Get(id[2:])
	}
	c := itemChanged(get(d.before), get(d.after))
	d.memo[id] = c
	return c
}

func itemChanged(a, b *outline.Item) bool {
	if a == b {
		return false
	}
	if a == nil || b == nil || a.Rec.CID == "" || a.Rec.CID != b.Rec.CID || a.Detached != b.Detached || noteCID(a) != noteCID(b) {
		return true
	}
	return listChanged(a.Children, b.Children)
}

func listChanged(a, b outline.Kids) bool {
	if a.Len() != b.Len() {
		return true
	}
	for i, it := range a.All() {
		if itemChanged(it, b.At(i)) {
			return true
		}
	}
	return false
}

func noteCID(it *outline.Item) string {
	if it.Note == nil {
		return ""
	}
	if it.Note.CID == "" {
		return "?" + fmt.Sprint(it.Note.Value)
	}
	return it.Note.CID
}

type changedRecord struct {
	coll  string
	value map[string]any
}

// changedRecords are the comments, outline records and comment policies
// created, changed or deleted between two trees (each version's value).
func changedRecords(before, after *outline.Tree) []changedRecord {
	var out []changedRecord
	type rec struct {
		cid   string
		value store.Value
	}
	compare := func(coll string, b, a map[string]rec) {
		for k, x := range b {
			if y, ok := a[k]; !ok || y.cid != x.cid || x.cid == "" {
				out = append(out, changedRecord{coll, x.value.Map()})
			}
		}
		for k, y := range a {
			if x, ok := b[k]; !ok || y.cid != x.cid || y.cid == "" {
				out = append(out, changedRecord{coll, y.value.Map()})
			}
		}
	}
	outlines := func(t *outline.Tree) map[string]rec {
		m := map[string]rec{}
		for k, r := range t.Outlines.All() {
			m[k] = rec{r.CID, r.Value}
		}
		return m
	}
	policies := func(t *outline.Tree) map[string]rec {
		m := map[string]rec{}
		for k, r := range t.Policies.All() {
			m[k] = rec{r.CID, r.Value}
		}
		return m
	}
	compare(lexicon.Outline, outlines(before), outlines(after))
	compare(lexicon.CommentPolicy, policies(before), policies(after))
	if !sameComments(before, after) {
		comments := func(t *outline.Tree) map[string]rec {
			m := map[string]rec{}
			for _, r := range t.Comments {
				m[r.RKey] = rec{r.CID, r.Value}
			}
			return m
		}
		compare(lexicon.Comment, comments(before), comments(after))
	}
	return out
}

func sameComments(before, after *outline.Tree) bool {
	a, b := before.Comments, after.Comments
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	for i := range a {
		if a[i].RKey != b[i].RKey || a[i].CID != b[i].CID || a[i].CID == "" {
			return false
		}
	}
	return true
}

// Seen is the hook for a commit heard of outside any call (the embedded
// store's watch of its HEAD, a firehose): when anyone subscribes to e's
// repository, e's tree is brought forward and CommitSeen sends the
// updates. It returns the number sent.
func (s *Subscriptions) Seen(ctx context.Context, e *outline.Engine) int {
	if s == nil || e == nil || !s.watching(e.Repo.DID().String()) {
		return 0
	}
	t, err := e.Tree(ctx)
	if err != nil {
		return 0 // the next call reads again and says what failed
	}
	return s.CommitSeen(t)
}
