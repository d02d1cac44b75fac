package store

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchSettle is how long Watch waits after HEAD moved for more moves
// before it calls back once for all of them.
const watchSettle = 20 * time.Millisecond

// Watch calls changed after each move of HEAD in the store's directory:
// a commit by this process or by another one sharing the directory (a
// second server, a shell's `call`), without polling. Moves close together
// come as one call; changed reads the repository to learn what moved.
// It returns when ctx ends, or at once with an error when the directory
// cannot be watched (the caller then still sees others' commits at its
// next read, as always).
func (l *Local) Watch(ctx context.Context, changed func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", l.dir, err)
	}
	// HEAD is replaced by a rename (atomicfile): watch the directory
	if err := w.Add(l.dir); err != nil {
		w.Close()
		return fmt.Errorf("watching %s: %w", l.dir, err)
	}
	go func() {
		defer w.Close()
		head := filepath.Base(l.headPath())
		var settle <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if filepath.Base(ev.Name) == head && ev.Op&(fsnotify.Create|fsnotify.Write|fsnotify.Rename) != 0 && settle == nil {
					settle = time.After(watchSettle)
				}
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
				// an overflow lost events: a move may be among them
				if settle == nil {
					settle = time.After(watchSettle)
				}
			case <-settle:
				settle = nil
				changed()
			}
		}
	}()
	return nil
}
