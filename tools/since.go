package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// search since=REV|TIME: the bullets created, edited, moved or deleted
// since a revision (a repo rev TID, as results and notices give them) or a
// time (RFC 3339, or a date: its start in UTC), from the repository's own
// history (outline.Engine.Since), each with who wrote it. Paged like every
// read: a page holds at most limit changes and fits the result bound; its
// cursor ("^SKIP.UNTIL.PRINT") counts to the revision the first page
// counted to, so that pages neither miss nor repeat a change made while
// they are read.

// sincePrefix starts a cursor of search since.
const sincePrefix = "^"

// parseSince reads since: a rev, or the time it names (not in the future).
func parseSince(s string, now time.Time) (store.HistoryQuery, error) {
	s = strings.TrimSpace(s)
	if _, err := syntax.ParseTID(s); err == nil {
		return store.HistoryQuery{Rev: s}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		if t, err = time.Parse(time.DateOnly, s); err != nil {
			return store.HistoryQuery{}, fmt.Errorf("since %q is neither a repo rev (a TID such as 3ld2zx7xkqs2a, as results give) nor an RFC 3339 time (2026-07-30T09:30:00Z)", s)
		}
	}
	if t.After(now) {
		return store.HistoryQuery{}, fmt.Errorf("since %q is in the future (now is %s)", s, now.UTC().Format(time.RFC3339))
	}
	return store.HistoryQuery{Time: t}, nil
}

// sinceCursor reads a since cursor: the changes to skip and the revision
// the first page counted to; print is the since argument's.
func sinceCursor(c, print string) (skip int, until string, err error) {
	if c == "" {
		return 0, "", nil
	}
	parts := strings.Split(strings.TrimPrefix(c, sincePrefix), ".")
	if !strings.HasPrefix(c, sincePrefix) || len(parts) != 3 {
		return 0, "", errors.New("cursor: not a cursor of search since; call again without it")
	}
	if skip, err = strconv.Atoi(parts[0]); err != nil || skip < 0 {
		return 0, "", errors.New("cursor: not a cursor of search since; call again without it")
	}
	if parts[2] != print {
		return 0, "", errors.New("cursor: it continues a different since; repeat the same since")
	}
	return skip, parts[1], nil
}

func sincePrint(since string) string {
	h := sha256.Sum256([]byte(strings.TrimSpace(since)))
	return hex.EncodeToString(h[:4])
}

// searchSince answers search with since.
func searchSince(ctx context.Context, env *Env, a Args, limit int) (*mcp.CallToolResult, error) {
	since := a.Str("since")
	if limit <= 0 {
		limit = 20 // as search's own default
	}
	for _, f := range []string{"text", "tags", "mentions", "layout", "state", "created_from", "created_to", "completed_from", "completed_to", "under", "depth", "regex"} {
		if v := a.Str(f); v != "" && v != "false" && v != "[]" {
			return badArgs("since: give it without %s (since lists every change; filter with search's other arguments in a separate call)", f)
		}
	}
	if r := strings.TrimPrefix(strings.TrimSpace(a.Str("repo")), "@"); r != "" {
		if t, err := env.Engine.Tree(ctx); err != nil {
			return toolError(err)
		} else if r != t.DID.String() {
			return badArgs("since: works on your own repository's history only; omit repo")
		}
	}
	now := time.Now
	if env.Engine.Now != nil {
		now = env.Engine.Now
	}
	q, err := parseSince(since, now())
	if err != nil {
		return badArgs("%v", err)
	}
	print := sincePrint(since)
	skip, until, err := sinceCursor(a.Str("cursor"), print)
	if err != nil {
		return badArgs("%v", err)
	}
	q.Until = until
	s, err := env.Engine.Since(ctx, q)
	if errors.Is(err, store.ErrUnknownRev) {
		return badArgs("since: %v", err)
	} else if err != nil {
		return toolError(err)
	}
	if skip > len(s.Changes) {
		skip = len(s.Changes)
	}
	did := env.Engine.Repo.DID().String()
	asked := limit
	for {
		page := s.Changes[skip:min(len(s.Changes), skip+limit)]
		cursor := ""
		if skip+len(page) < len(s.Changes) {
			cursor = fmt.Sprintf("%s%d.%s.%s", sincePrefix, skip+len(page), s.HeadRev, print)
		}
		res := sincePage(did, s, page, skip, cursor, limit < asked)
		if size := shownSize(ctx, res, "search"); size > ResultBudget && len(page) > 1 {
			limit = max(1, min(len(page)-1, len(page)*ResultBudget/size))
			continue
		}
		return res, nil
	}
}

// sincePage is one page of changes, as structured content and text.
func sincePage(did string, s *outline.SinceResult, page []outline.SinceChange, skip int, cursor string, shortened bool) *mcp.CallToolResult {
	var notices []string
	if s.Cut != "" {
		notices = append(notices, s.Cut)
	}
	if shortened && cursor != "" {
		notices = append(notices, fmt.Sprintf("this page holds %d change(s), fewer than limit, to fit one result (%d KB); the cursor continues after them", len(page), MaxResult/1000))
	}
	var b strings.Builder
	for _, n := range notices {
		b.WriteString("Note: " + n + "\n")
	}
	fmt.Fprintf(&b, "%d record(s) changed since rev %s%s to rev %s (%d commit(s))", len(s.Changes), s.Rev, revWhen(s.Rev), s.HeadRev, s.Commits)
	if len(page) < len(s.Changes) {
		fmt.Fprintf(&b, "; these are %d–%d, oldest change first", skip+1, skip+len(page))
	}
	b.WriteString(":\n")
	// the structured content groups the page's rows by the commit and
	// writer that last changed them (a run of rows), and within that by
	// what changed, each said once (as the text does): a row is [rkey,
	// text] under its change
	var revs []sinceRev
	for i := 0; i < len(page); {
		c := page[i]
		j := i + 1
		for j < len(page) && page[j].Rev == c.Rev && page[j].By == c.By && page[j].Operation == c.Operation {
			j++
		}
		by := "another writer"
		if c.By == "server" {
			by = "this server, operation " + c.Operation
		}
		fmt.Fprintf(&b, "In rev %s, %s:\n", c.Rev, by)
		g := sinceRev{Rev: c.Rev, By: c.By, Operation: c.Operation, Changes: map[string][][]string{}}
		var order []string
		for _, c := range page[i:j] {
			what := sinceWhat(c)
			if _, ok := g.Changes[what]; !ok {
				order = append(order, what)
			}
			g.Changes[what] = append(g.Changes[what], []string{c.RKey, c.Text})
		}
		for _, what := range order {
			fmt.Fprintf(&b, "%s:\n", what)
			for _, row := range g.Changes[what] {
				text := ""
				if row[1] != "" {
					text = strconv.Quote(row[1]) + " "
				}
				fmt.Fprintf(&b, "- %s·%s\n", text, row[0])
			}
		}
		revs = append(revs, g)
		i = j
	}
	if cursor != "" {
		fmt.Fprintf(&b, "(more changes: call search again with the same since and cursor=%q)\n", cursor)
	}
	sc := map[string]any{"uriPrefix": "at://" + did + "/" + lexicon.Node + "/", "since": s.Rev, "to": s.HeadRev,
		"commits": s.Commits, "total": len(s.Changes), "columns": sinceColumns, "revs": revs}
	if cursor != "" {
		sc["cursor"] = cursor
	}
	if len(notices) > 0 {
		sc["notices"] = notices
	}
	return mcp.NewToolResultStructured(sc, b.String())
}

// sinceColumns names the fields of a since row.
var sinceColumns = []string{"rkey", "text"}

// sinceWhat is what changed of a since row: created, edited, moved,
// "moved, edited" or deleted, with the collection and the bullet for a
// note, comment, policy or outline record.
func sinceWhat(c outline.SinceChange) string {
	what := c.Change
	if c.Collection != "" {
		what += " " + strings.TrimPrefix(c.Collection, "app.bulleted.")
		if c.Node != "" {
			what += " of ·" + c.Node
		}
	}
	return what
}

// sinceRev is a run of a since page's rows last changed by one commit of
// one writer: by is "server" (this server, operation naming its journal's
// operation) or "other" (another writer); changes holds rows of
// sinceColumns (text: the start of the bullet's text, before a delete)
// under what changed (sinceWhat).
type sinceRev struct {
	Rev       string                `json:"rev"`
	By        string                `json:"by"`
	Operation string                `json:"operation,omitempty"`
	Changes   map[string][][]string `json:"changes"`
}

// revWhen is " (TIME)" of a rev TID, or "".
func revWhen(rev string) string {
	tid, err := syntax.ParseTID(rev)
	if err != nil {
		return ""
	}
	return " (" + tid.Time().UTC().Format(time.RFC3339) + ")"
}
