package store

import (
	"context"
	"sync"
	"sync/atomic"
)

// pathBuild is the map of records by path (Local.records) being made from
// one snapshot: made once, by whichever comes first, Prepare in the
// background or the write that needs it (which then waits for a build in
// progress rather than making a second one).
type pathBuild struct {
	snap *Snapshot
	once sync.Once
	m    map[string]*Record
	done atomic.Bool // m is made
}

// pathBuilds counts the maps of records made from a snapshot (tests).
var pathBuilds atomic.Int64

// pathBuildHook, when set, runs at the start of a build (tests: a write
// arriving while Prepare's build is under way).
var pathBuildHook func()

func (p *pathBuild) get() map[string]*Record {
	p.once.Do(func() {
		if pathBuildHook != nil {
			pathBuildHook()
		}
		pathBuilds.Add(1)
		p.m = recordMap(p.snap.Records)
		p.done.Store(true)
	})
	return p.m
}

// pathsOf is the build of s's map (under l.mu): the one under way if it is
// of s, else a new one (a build of an older snapshot is dropped).
func (l *Local) pathsOf(s *Snapshot) *pathBuild {
	if l.paths == nil || l.paths.snap != s {
		l.paths = &pathBuild{snap: s}
	}
	return l.paths
}

// Prepare makes, ahead of the first write, what that write would otherwise
// make on the caller's time: the map of the current records by path (at
// 250,000 records a tenth of a second, most of a first write). It is made
// without holding the store's lock, so reads and writes go on meanwhile; a
// write that comes first waits for this build, or makes the map itself if
// none is under way, and a build of a snapshot that is no longer current
// is dropped. serve runs it in the background after start (tools.Env.Warm).
func (l *Local) Prepare(context.Context) error {
	l.mu.Lock()
	if l.records != nil || l.snap == nil {
		l.mu.Unlock()
		return nil
	}
	p := l.pathsOf(l.snap)
	l.mu.Unlock()
	p.get()
	return nil
}

// awaitBuild waits, without holding the store's lock, for a build of the
// current snapshot's map that is under way (Prepare's), so that a write
// arriving meanwhile does not hold the lock while it waits: reads go on
// until the build is done. If the snapshot moved meanwhile, the write makes
// its own under the lock (recordMap).
func (l *Local) awaitBuild() {
	l.mu.Lock()
	p := l.paths
	if l.records != nil || p == nil || p.snap != l.snap || p.done.Load() {
		p = nil
	}
	l.mu.Unlock()
	if p != nil {
		p.get()
	}
}

// Prepared reports whether the next write finds the map of records by path
// made (Prepare).
func (l *Local) Prepared() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.records != nil {
		return true
	}
	return l.paths != nil && l.paths.snap == l.snap && l.paths.done.Load()
}
