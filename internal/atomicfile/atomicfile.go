package atomicfile

import (
	"io"
	"os"
	"path/filepath"
)

// Write replaces path with data (mode for a new file), creating the parent
// directory (0700) if needed. The temporary file has a name of its own, so
// concurrent writers (two processes sharing a data directory) never write
// into each other's: the last rename wins, whole.
func Write(path string, data []byte, mode os.FileMode) (err error) {
	return WriteFunc(path, mode, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFunc is Write of what fill writes, streamed to the temporary file
// (a large file is never held whole in memory); an error from fill leaves
// path as it was.
func WriteFunc(path string, mode os.FileMode, fill func(io.Writer) error) (err error) {
	if err := writeFunc(path, mode, fill); err != nil {
		return err
	}
	// the rename itself is durable once the directory is synced
	SyncDir(filepath.Dir(path))
	return nil
}

// writeFunc is WriteFunc without the directory's sync.
func writeFunc(path string, mode os.FileMode, fill func(io.Writer) error) (err error) {
	f, err := tempBeside(path, mode)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := fill(f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// tempBeside creates the temporary file a write of path fills, beside it
// (the directory made if needed), with mode.
func tempBeside(path string, mode os.FileMode) (*os.File, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// SyncDir makes renames in dir durable (where the system can; elsewhere a
// no-op).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	d.Sync() // not supported on every system: best effort, like Write's
	return nil
}

// WriteSynced writes data to path, a new file, with the rename made
// before the syncs, and the file's and the directory's syncs run at once
// (one journal commit where the system can join them): path holds data
// for every process as soon as it is renamed; when WriteSynced returns,
// both the data and the name are on disk (the name where the system syncs
// directories: SyncDir). A crash before it returns may leave path short
// or empty: its reader must take such a file as never written whole. On
// an error path is removed again.
func WriteSynced(path string, data []byte, mode os.FileMode) error {
	f, err := tempBeside(path, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	// closed before the rename: a file still open cannot be renamed on
	// every system (Windows)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	dirDone := make(chan struct{})
	go func() {
		defer close(dirDone)
		SyncDir(filepath.Dir(path))
	}()
	err = syncData(path)
	<-dirDone
	if err != nil {
		// not on disk: taken back, so that nobody takes it for written
		os.Remove(path)
		SyncDir(filepath.Dir(path))
	}
	return err
}

// syncData is syncFile (tests make it fail).
var syncData = syncFile

// syncFile flushes path's data to disk.
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
