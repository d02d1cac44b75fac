package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// The agent hears about edits by others: every tool result of a session
// says what changed in the outline since that session's previous result
// by anyone but that session (the person in the app, another device or
// process, another session of this server), from the engine's change log
// (outline.ChangedSince), compactly: how many, in which top-level
// sections, a line each for the first few. Nothing is said when nothing
// changed, on a session's first call, or to requests without a session
// (protocol 2026-07-28 has none).

// Notice bounds: change lines and sections told, and the runes of a
// section's name in them.
const (
	noticeLines    = 5
	noticeSections = 5
	sectionRunes   = 24
)

// seenRevs remembers, per MCP session, the revision of the outline its
// last tool result was told up to. Bounded: MaxSessions sessions (the one
// unused longest is forgotten), and a session unused for SessionIdle is
// forgotten; a session that ends is forgotten (forget).
type seenRevs struct {
	mu   sync.Mutex
	m    map[string]seenRev
	max  int
	idle time.Duration
	now  func() time.Time
	// store, if set, keeps them with the sessions (sessionstore.go)
	store SeenStore
}

type seenRev struct {
	did, rev string
	used     time.Time
}

func newSeenRevs() *seenRevs {
	return &seenRevs{m: map[string]seenRev{}, max: MaxSessions, idle: SessionIdle, now: time.Now}
}

// sessionOf is the id of the request's MCP session ("": none).
func sessionOf(ctx context.Context) string {
	if s := mcpserver.ClientSessionFromContext(ctx); s != nil {
		return s.SessionID()
	}
	return ""
}

// take is what others changed in env's outline since session's previous
// result (nil: nothing to tell), and remembers the revision now told.
func (s *seenRevs) take(session string, env *tools.Env) *outline.Changed {
	if s == nil || session == "" || env == nil || env.Engine == nil {
		return nil
	}
	did := env.Engine.Repo.DID().String()
	if s.store != nil {
		return s.takeStored(session, did, env)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	prev, ok := s.m[session]
	since := ""
	if ok && prev.did == did && now.Sub(prev.used) <= s.idle {
		since = prev.rev
	}
	c := env.Engine.ChangedSince(since, session)
	rev := since
	if c.Rev > rev {
		rev = c.Rev
	}
	if !ok && len(s.m) >= s.max {
		var oldest string
		for id, x := range s.m {
			if oldest == "" || x.used.Before(s.m[oldest].used) {
				oldest = id
			}
		}
		delete(s.m, oldest)
	}
	s.m[session] = seenRev{did: did, rev: rev, used: now}
	if since == "" || !c.Any() {
		return nil
	}
	return c
}

// forget drops what session was told (it ended).
func (s *seenRevs) forget(session string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	delete(s.m, session)
	s.mu.Unlock()
}

// changeNotice is c as the agent is told it: the lines at the head of the
// text, the one-line notice for the structured notices, and the
// changedByOthers object.
func changeNotice(c *outline.Changed) (text []string, notice string, obj map[string]any) {
	if !c.Complete && c.Count == 0 {
		notice = fmt.Sprintf("The outline changed since your last call (revision %s) in ways this server no longer remembers one by one (its log of changes does not reach back that far): search since=%s lists them from the repository's history; read again what you rely on before acting on it.", c.Since, c.Since)
		return []string{notice}, notice, map[string]any{"since": c.Since, "rev": c.Rev, "complete": false}
	}
	about := ""
	if c.Approximate {
		about = "about "
	}
	var who []string
	if c.External > 0 {
		who = append(who, fmt.Sprintf("%d by another writer (the app, another device or process)", c.External))
	}
	if c.Sessions > 0 {
		who = append(who, fmt.Sprintf("%d by another session of this server", c.Sessions))
	}
	names := map[string]string{}
	var secs []string
	var secObjs []map[string]any
	for i, s := range c.Sections {
		names[s.RKey] = clip(s.Text, sectionRunes)
		if i < noticeSections {
			label := fmt.Sprintf("%q", clip(s.Text, sectionRunes))
			if s.RKey != "" {
				label += " " + s.RKey
			}
			secs = append(secs, fmt.Sprintf("%s (%d)", label, s.Count))
			secObjs = append(secObjs, map[string]any{"rkey": s.RKey, "text": clip(s.Text, sectionRunes), "count": s.Count})
		}
	}
	if len(c.Sections) > noticeSections {
		secs = append(secs, fmt.Sprintf("%d more", len(c.Sections)-noticeSections))
	}
	more := ""
	if !c.Complete {
		more = "; earlier changes are no longer remembered one by one"
	}
	head := fmt.Sprintf("%s%d record(s) changed since your last call, not by you: %s%s; in %s. Read them again before acting on what you read earlier", about, c.Count, strings.Join(who, ", "), more, strings.Join(secs, ", "))
	notice = head + " (changedByOthers says which)."
	text = []string{head + ":"}
	var lines []map[string]any
	for i, ch := range c.Changes {
		if i == noticeLines {
			break
		}
		what := ch.Change
		if ch.Collection != "app.bulleted.node" {
			what = strings.TrimPrefix(ch.Collection, "app.bulleted.") + " " + ch.Change
		}
		l := fmt.Sprintf("  - %s %s", what, ch.RKey)
		if ch.Node != "" && ch.Node != ch.RKey {
			l += " on " + ch.Node
		}
		if ch.Text != "" {
			l += fmt.Sprintf(" %q", ch.Text)
		}
		if ch.Section != "" && ch.Section != ch.RKey && ch.Section != ch.Node {
			l += fmt.Sprintf(" (in %q)", names[ch.Section])
		}
		text = append(text, l)
		o := map[string]any{"rkey": ch.RKey, "change": ch.Change, "text": ch.Text}
		if ch.Collection != "app.bulleted.node" {
			o["collection"] = ch.Collection
		}
		if ch.Node != "" {
			o["node"] = ch.Node
		}
		if ch.Section != "" {
			o["section"] = ch.Section
		}
		lines = append(lines, o)
	}
	if n := c.Count - len(lines); n > 0 {
		text = append(text, fmt.Sprintf("  - … %s%d more not listed (search since=%s lists every one)", about, n, c.Since))
	}
	obj = map[string]any{"since": c.Since, "rev": c.Rev, "complete": c.Complete, "count": c.Count,
		"byOtherWriters": c.External, "byOtherSessions": c.Sessions, "sections": secObjs, "changes": lines}
	if c.Approximate {
		obj["approximate"] = true
	}
	return text, notice, obj
}

// clip is s cut to n runes (with an ellipsis).
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for j := range s {
		if i == n-1 {
			return s[:j] + "…"
		}
		i++
	}
	return s
}
