package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/budget"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// remoteFlags select the PDS backend instead of the embedded store.
type remoteFlags struct {
	pds, identifier, plc *string
}

func addRemoteFlags(fs *flag.FlagSet) remoteFlags {
	return remoteFlags{
		pds:        fs.String("pds", os.Getenv("BULLETED_PDS"), "URL of your PDS: use it instead of the embedded store (env BULLETED_PDS); the app password comes from "+pds.PasswordEnv),
		identifier: fs.String("identifier", os.Getenv("BULLETED_IDENTIFIER"), "your handle or DID on the PDS (env BULLETED_IDENTIFIER); with it alone the PDS is found from your identity"),
		plc:        fs.String("plc", os.Getenv("BULLETED_PLC_URL"), "PLC directory URL for identity resolution (env BULLETED_PLC_URL; default the public directory)"),
	}
}

func (f remoteFlags) remote() bool { return *f.pds != "" || *f.identifier != "" }

// backend is the opened repository and what goes with it.
type backend struct {
	env   *tools.Env
	repo  store.Repository
	close func()
	// notices: what opening found and said (a HEAD recovered from the
	// log); printed on stderr, and told in the session's first tool result
	notices []string
}

// tell prints what opening the store found on stderr.
func (b *backend) tell(stderr io.Writer) { printNotices(stderr, b.notices) }

func printNotices(stderr io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintf(stderr, "bulleted-mcp: notice: %s\n", n)
	}
}

// openBackend opens the embedded store in dir, or, with --pds/--identifier,
// logs in to the PDS (session, budget ledger and undo journal kept in dir).
func openBackend(ctx context.Context, dir string, f remoteFlags) (*backend, error) {
	// an OAuth session from `bulleted-mcp login` selects the PDS backend
	// by itself; else --pds/--identifier with an app password
	if !f.remote() && !pds.HasOAuth(dir) {
		l, err := store.OpenLocal(dir)
		if err != nil {
			return nil, fmt.Errorf("opening store %s: %w", dir, err)
		}
		eng, err := newEngine(l, dir)
		if err != nil {
			l.Close()
			return nil, err
		}
		return &backend{env: &tools.Env{Engine: eng, WriteRefused: l.WriteRefused()}, repo: l, close: func() { l.Close() }, notices: append(l.Notices(), eng.Notices()...)}, nil
	}
	directory := pds.Directory(*f.plc)
	c, did, _, err := pds.Login{PDS: *f.pds, Identifier: *f.identifier, Password: os.Getenv(pds.PasswordEnv), Dir: dir, Directory: directory}.OpenPreferOAuth(ctx)
	if err != nil {
		return nil, err
	}
	r := pds.New(c, did)
	name := strings.ReplaceAll(did.String(), ":", "_")
	r.Cache = filepath.Join(dir, "repo-"+name+".car")
	// a save encodes the whole repository at once (after a whole read, or
	// the stream's catch-up): at 100k records the process held its peak,
	// 470 MB for 110 MB kept, since nothing made the collector run again
	r.AfterCacheSave = func() { go debug.FreeOSMemory() }
	// and a whole read's download and decoding go back at once, before the
	// tree is built on top of them (249k records: a collection of 50 ms
	// against a read of several seconds; with the MST kept as its blocks,
	// RSS after the first read 406 → 319 MB and its peak 414 → 351 MB)
	r.AfterWholeRead = debug.FreeOSMemory
	r.Cursor = filepath.Join(dir, "stream-"+name+".json") // the commit stream's position, with the cache (serve --follow)
	r.Directory = directory                               // to verify the stream's commits
	ledgerPath := filepath.Join(dir, "budget-"+name+".json")
	notes := &store.Notices{}
	r.Notices = notes // a read cache that could not be written (serve says it on stderr too: Warn)
	if n := missingLedger(ledgerPath, dir, did.String(), time.Now()); n != "" {
		notes.Add(n)
	}
	ledger, err := budget.New(ledgerPath)
	if err != nil {
		return nil, err
	}
	r.Budget = ledger
	resolver := &pds.Resolver{Client: c, Directory: directory}
	others := newOtherTrees((&pds.Others{Resolver: resolver}).Snapshot).get
	eng, err := outline.Open(r, outline.Options{Resolver: resolver, Others: others, Operations: dir})
	if err != nil {
		return nil, err
	}
	env := &tools.Env{Engine: eng, Notices: notes}
	return &backend{env: env, repo: r, close: func() {}, notices: append(notes.All(), eng.Notices()...)}, nil
}

// missingLedger says so when the budget ledger at path is missing while the
// operations journal in dir shows did's writes landed within the budget's
// rolling day: the ledger starts from zero, so it does not count them.
func missingLedger(path, dir, did string, now time.Time) string {
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return ""
	}
	dayOps, day := store.JournalSpend(dir, did, now.Add(-budget.Day))
	if dayOps == 0 {
		return ""
	}
	_, hour := store.JournalSpend(dir, did, now.Add(-budget.Window))
	return fmt.Sprintf("The write budget ledger %s is missing, but the operations journal (ops/) records %d operation(s) started in the last 24 hours that landed writes worth at least %d points (%d in the last hour); a new ledger starts from zero and does not count them, so the rolling limits (%d points an hour, %d a day) may be overspent. Write less than usual until an hour (and a day) has passed; restore the ledger from a backup if there is one.",
		filepath.Base(path), dayOps, day, hour, budget.Limit, budget.DayLimit)
}

// otherTrees turns other identities' snapshots into outline trees, keeping
// the last tree of the few identities read most recently so that an
// unchanged repository is not rebuilt and a changed one is rebuilt from its
// previous tree (outline.Rebuild reuses its parsed items).
type otherTrees struct {
	snapshot func(ctx context.Context, ident string) (*store.Snapshot, error)

	mu    sync.Mutex
	trees []*outline.Tree // most recently used first
}

// keptTrees bounds the trees kept: a tree holds its snapshot, which
// pds.Others may already have dropped under its own memory bound.
const keptTrees = 4

func newOtherTrees(snapshot func(ctx context.Context, ident string) (*store.Snapshot, error)) *otherTrees {
	return &otherTrees{snapshot: snapshot}
}

func (o *otherTrees) get(ctx context.Context, ident string) (*outline.Tree, error) {
	s, err := o.snapshot(ctx, ident)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	var prev *outline.Tree
	for i, t := range o.trees {
		if t.DID == s.DID {
			prev = t
			o.trees = slices.Delete(o.trees, i, i+1)
			break
		}
	}
	o.mu.Unlock()
	t := prev
	if t == nil || t.Commit != s.Commit {
		t = outline.Rebuild(s, prev)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.trees = slices.DeleteFunc(o.trees, func(x *outline.Tree) bool { return x.DID == s.DID })
	o.trees = append([]*outline.Tree{t}, o.trees...)
	if len(o.trees) > keptTrees {
		o.trees = o.trees[:keptTrees]
	}
	return t, nil
}

var _ outline.Resolver = (*pds.Resolver)(nil)
