package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
)

// dirFiles is every file under dir with its bytes (the lock file, which
// every open creates and never writes, is left out).
func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "lock" {
			return nil
		}
		raw, err := os.ReadFile(p)
		out[rel] = raw
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameFiles(t *testing.T, before, after map[string][]byte) {
	t.Helper()
	for name, b := range before {
		a, ok := after[name]
		if !ok {
			t.Errorf("%s was removed", name)
		} else if !bytes.Equal(a, b) {
			t.Errorf("%s changed (%d bytes, was %d)", name, len(a), len(b))
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("%s was created", name)
		}
	}
}

// bulleted is a store dir with n bullets written in batches of MaxBatch;
// it returns HEAD's contents and the log size.
func bulleted(t *testing.T, n int) (dir, head string, size int64) {
	t.Helper()
	dir = t.TempDir()
	l, err := OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < n; i += MaxBatch {
		var ws []Write
		for j := i; j < min(n, i+MaxBatch); j++ {
			ws = append(ws, node(fmt.Sprintf("3kbullet%07d", j), fmt.Sprintf("bullet %d", j), ""))
		}
		if _, err := l.Apply(ctx, "", ws); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	raw, err := os.ReadFile(filepath.Join(dir, "HEAD"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, string(raw), logSize(dir)
}

func logSize(dir string) int64 {
	info, err := os.Stat(filepath.Join(dir, "blocks.log"))
	if err != nil {
		return -1
	}
	return info.Size()
}

func records(t *testing.T, l *Local) int {
	t.Helper()
	s, err := l.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(s.Records)
}

func hasNotice(notes []string, parts ...string) bool {
	for _, n := range notes {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(n, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// A missing HEAD is recovered from the log, said once, and HEAD rewritten;
// the log is not touched by that open nor by the next one (before: the
// store opened as an empty outline and the next open compacted the log
// away, 3,000 bullets and 656,656 B -> 295 B).
func TestRecoverMissingHead(t *testing.T) {
	t.Parallel()
	n := 3000
	if testing.Short() {
		n = 1000
	}
	dir, head, size := bulleted(t, n)
	if err := os.Remove(filepath.Join(dir, "HEAD")); err != nil {
		t.Fatal(err)
	}
	before := dirFiles(t, dir)
	l, err := OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := records(t, l)
	notes := l.Notices()
	taken := l.TakeNotices()
	again := l.TakeNotices()
	l.Close()
	if got != n {
		t.Fatalf("opened with %d bullets, want %d", got, n)
	}
	if !hasNotice(notes, "HEAD file was missing", "recovered it from the block log", strings.TrimSpace(head), fmt.Sprintf("%d records", n)) {
		t.Fatalf("no recovery notice: %q", notes)
	}
	if len(taken) != len(notes) || len(again) != 0 {
		t.Fatalf("notices are taken once: %d then %d", len(taken), len(again))
	}
	after := dirFiles(t, dir)
	if string(after["HEAD"]) != head {
		t.Fatalf("HEAD rewritten as %q, want %q", after["HEAD"], head)
	}
	delete(after, "HEAD")
	sameFiles(t, before, after)
	// the next open: a HEAD that verifies, nothing said, nothing lost
	l, err = OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	got2 := records(t, l)
	notes2 := l.Notices()
	l.Close()
	if got2 != n || len(notes2) != 0 {
		t.Fatalf("next open: %d bullets (want %d), notices %q", got2, n, notes2)
	}
	if s := logSize(dir); s != size {
		t.Fatalf("the log is %d bytes after the next open, was %d", s, size)
	}
	t.Logf("%d bullets, log %d B: HEAD removed -> reopened with %d bullets, log %d B; next open %d bullets, log %d B", n, size, got, size, got2, logSize(dir))
}

// A HEAD that is not a CID is recovered the same way.
func TestRecoverGarbageHead(t *testing.T) {
	t.Parallel()
	dir, l := seeded(t)
	want := texts(t, l)
	head, _ := os.ReadFile(filepath.Join(dir, "HEAD"))
	l.Close()
	if err := os.WriteFile(filepath.Join(dir, "HEAD"), []byte("\x00\xffnot a commit\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := texts(t, l); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("records %v, want %v", got, want)
	}
	if !hasNotice(l.Notices(), "HEAD file was unreadable", "recovered") {
		t.Fatalf("no recovery notice: %q", l.Notices())
	}
	if now, _ := os.ReadFile(filepath.Join(dir, "HEAD")); !bytes.Equal(now, head) {
		t.Fatalf("HEAD is %q, want %q", now, head)
	}
}

// HEAD removed and the newest commit torn: the newest commit that loads
// completely is recovered, and the torn bytes are said (and left for the
// next open from a verified HEAD to cut).
func TestRecoverTornNewestCommit(t *testing.T) {
	t.Parallel()
	for _, cut := range []string{"last bytes", "middle of the commit"} {
		t.Run(cut, func(t *testing.T) {
			dir, l := seeded(t)
			ctx := context.Background()
			want := texts(t, l)
			prevHead, _ := os.ReadFile(filepath.Join(dir, "HEAD"))
			size0 := logSize(dir)
			var ws []Write
			for i := range 20 {
				ws = append(ws, node(fmt.Sprintf("3knewest%04d", i), "lost", ""))
			}
			res, err := l.Apply(ctx, "", ws)
			if err != nil {
				t.Fatal(err)
			}
			did := l.DID().String()
			l.Close()
			size1 := logSize(dir)
			// the engine's journal recorded the torn commit as landed
			os.MkdirAll(filepath.Join(dir, "ops"), 0o700)
			op := fmt.Sprintf(`{"id":"3kopaaaaaaa22","did":%q,"summary":"insert 20","started":%q,"state":"done","writes":[],"batches":[20],"landed":1,"commits":[%q]}`+"\n",
				did, time.Now().UTC().Add(time.Second).Format(time.RFC3339Nano), res.Commit)
			os.WriteFile(filepath.Join(dir, "ops", "3kopaaaaaaa22.json"), []byte(op), 0o600)
			at := size1 - 3
			if cut != "last bytes" {
				at = size0 + (size1-size0)/2
			}
			if err := os.Truncate(filepath.Join(dir, "blocks.log"), at); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(dir, "HEAD"))
			l, err = OpenLocal(dir)
			if err != nil {
				t.Fatal(err)
			}
			got := texts(t, l)
			notes := l.Notices()
			l.Close()
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("records %v, want %v", got, want)
			}
			if now, _ := os.ReadFile(filepath.Join(dir, "HEAD")); !bytes.Equal(now, prevHead) {
				t.Fatalf("HEAD is %q, want the commit before the torn one %q", now, prevHead)
			}
			if !hasNotice(notes, "recovered", strings.TrimSpace(string(prevHead))) {
				t.Fatalf("no recovery notice: %q", notes)
			}
			if !hasNotice(notes, "records 1 landed commit(s) that are not in the log", "operation 3kopaaaaaaa22 commit "+res.Commit, "those writes are lost") {
				t.Fatalf("the lost commit the journal records is not said: %q", notes)
			}
			if cut == "last bytes" && !hasNotice(notes, "torn write") {
				t.Fatalf("the torn tail is not said: %q", notes)
			}
			if s := logSize(dir); s != at {
				t.Fatalf("the recovering open changed the log: %d bytes, was %d", s, at)
			}
			// the next open starts from the recovered HEAD and can write
			l, err = OpenLocal(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if _, err := l.Apply(ctx, "", []Write{node("3kafterwards1", "after", "")}); err != nil {
				t.Fatal(err)
			}
			if got := texts(t, l); len(got) != len(want)+1 {
				t.Fatalf("after a write: %v", got)
			}
		})
	}
}

// A recovering open never compacts, even a log that is mostly garbage; the
// next open (HEAD verified) may.
func TestRecoverDoesNotCompact(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ws []Write
	for i := range 100 {
		ws = append(ws, node(fmt.Sprintf("3kchurn%05d", i), "v0", ""))
	}
	if _, err := l.Apply(ctx, "", ws); err != nil {
		t.Fatal(err)
	}
	for r := range 30 {
		for i := range ws {
			ws[i].Op = Update
			ws[i].Value = node(ws[i].RKey, fmt.Sprintf("v%d %d", r+1, i), "").Value
		}
		if _, err := l.Apply(ctx, "", ws); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	size := logSize(dir)
	os.Remove(filepath.Join(dir, "HEAD"))
	l, err = OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := texts(t, l)
	notes := l.Notices()
	l.Close()
	if len(got) != 100 || got[0] != "v30 0" {
		t.Fatalf("recovered %d records (%v…)", len(got), got[:min(1, len(got))])
	}
	if !hasNotice(notes, "nothing was compacted") {
		t.Fatalf("notice: %q", notes)
	}
	if s := logSize(dir); s != size {
		t.Fatalf("the recovering open compacted the log: %d -> %d bytes", size, s)
	}
	l, err = OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if s := logSize(dir); s >= size/2 {
		t.Fatalf("the next open did not compact: %d -> %d", size, s)
	}
	if got := texts(t, l); len(got) != 100 || got[0] != "v30 0" {
		t.Fatalf("after compaction: %d records", len(got))
	}
}

// refuses opens dir, wants ErrCorrupt with every part in its message, and
// the directory unchanged byte for byte.
func refuses(t *testing.T, dir string, parts ...string) {
	t.Helper()
	before := dirFiles(t, dir)
	l, err := OpenLocal(dir)
	if err == nil {
		n := records(t, l)
		l.Close()
		t.Fatalf("opened (%d records), want a refusal", n)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("error %v is not ErrCorrupt", err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q lacks %q", err, p)
		}
	}
	sameFiles(t, before, dirFiles(t, dir))
}

// A store without its signing.key refuses to open and changes nothing
// (before: a new key was made, under whose DID the old commits no longer
// verify).
func TestMissingKeyRefuses(t *testing.T) {
	t.Parallel()
	for _, alsoHead := range []bool{false, true} {
		t.Run(fmt.Sprintf("HEAD removed too %v", alsoHead), func(t *testing.T) {
			dir, l := seeded(t)
			l.Close()
			os.Remove(filepath.Join(dir, "signing.key"))
			if alsoHead {
				os.Remove(filepath.Join(dir, "HEAD"))
			}
			refuses(t, dir, "signing.key is missing", "nothing was changed", "Restore signing.key")
		})
	}
}

// A store whose signing.key was replaced by another key refuses to open
// and changes nothing, with or without HEAD.
func TestForeignKeyRefuses(t *testing.T) {
	t.Parallel()
	for _, alsoHead := range []bool{false, true} {
		t.Run(fmt.Sprintf("HEAD removed too %v", alsoHead), func(t *testing.T) {
			dir, l := seeded(t)
			l.Close()
			k, err := atcrypto.GeneratePrivateKeyK256()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "signing.key"), k.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			if alsoHead {
				os.Remove(filepath.Join(dir, "HEAD"))
			}
			refuses(t, dir, "signing.key", "not", "nothing was changed")
		})
	}
}

// A missing block log is not a new store while HEAD, or the operations
// journal, says there was one.
func TestMissingLogRefuses(t *testing.T) {
	t.Parallel()
	t.Run("HEAD there", func(t *testing.T) {
		dir, l := seeded(t)
		l.Close()
		os.Remove(filepath.Join(dir, "blocks.log"))
		refuses(t, dir, "blocks.log is missing", "nothing was changed")
	})
	t.Run("only a compaction's copy", func(t *testing.T) {
		dir, l := seeded(t)
		l.Close()
		os.Rename(filepath.Join(dir, "blocks.log"), filepath.Join(dir, "blocks.log.compact"))
		os.Remove(filepath.Join(dir, "HEAD"))
		refuses(t, dir, "blocks.log.compact", "rename it to blocks.log", "nothing was changed")
	})
	t.Run("ops journal with landed commits", func(t *testing.T) {
		dir, l := seeded(t)
		did, head := l.DID().String(), l.root.String()
		l.Close()
		os.MkdirAll(filepath.Join(dir, "ops"), 0o700)
		op := fmt.Sprintf(`{"id":"3kopaaaaaaa22","did":%q,"summary":"insert 3","started":"2026-07-30T09:30:00Z","state":"running","writes":[],"batches":[1],"landed":0}`+"\n"+`{"state":"done","landed":1,"commits":[%q]}`+"\n", did, head)
		os.WriteFile(filepath.Join(dir, "ops", "3kopaaaaaaa22.json"), []byte(op), 0o600)
		os.Remove(filepath.Join(dir, "blocks.log"))
		os.Remove(filepath.Join(dir, "HEAD"))
		refuses(t, dir, "ops/ records 1 operation", "3kopaaaaaaa22", "nothing was changed")
		// and without the key as well
		os.Remove(filepath.Join(dir, "signing.key"))
		refuses(t, dir, "signing.key is missing", "operations journal")
	})
}

// A directory that holds the PDS backend's state and no embedded store
// (the OAuth session deleted or revoked, --pds forgotten) is not opened as
// a new, empty embedded outline.
func TestPDSStateIsNotANewStore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, file, body string }{
		{"budget ledger", "budget-did_plc_abc.json", `{"spent":[]}`},
		{"repository cache", "repo-did_plc_abc.car", "car"},
		{"app password session", "session.json", "{}"},
		{"operations of a PDS identity", "ops/3kopaaaaaaa22.json", `{"id":"3kopaaaaaaa22","did":"did:plc:abc","started":"2026-07-30T09:30:00Z","commits":["bafyreib3ezxdyuv67wcu4wi2tbgkm4lm6bm7n7675sudac5sdlet5khbvm"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.MkdirAll(filepath.Join(dir, "ops"), 0o700)
			if err := os.WriteFile(filepath.Join(dir, tc.file), []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			refuses(t, dir, "holds the PDS backend's state", "nothing was changed", "--store")
		})
	}
	// operations of another embedded store that landed nothing do not count
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "ops"), 0o700)
	os.WriteFile(filepath.Join(dir, "ops", "3kopaaaaaaa22.json"), []byte(`{"id":"3kopaaaaaaa22","did":"did:plc:abc"}`), 0o600)
	l, err := OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}

// HEAD removed while a process has the store open: its next access
// recovers it from the log (the commit it had), says so once, and goes on
// writing (before: every read and write failed until a restart, which then
// opened an empty outline).
func TestRecoverWhileOpen(t *testing.T) {
	t.Parallel()
	dir, l := seeded(t)
	defer l.Close()
	ctx := context.Background()
	want := texts(t, l)
	head, _ := os.ReadFile(filepath.Join(dir, "HEAD"))
	os.Remove(filepath.Join(dir, "HEAD"))
	if got := texts(t, l); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("records %v, want %v", got, want)
	}
	if notes := l.TakeNotices(); len(notes) != 1 || !hasNotice(notes, "HEAD file was missing", "recovered", strings.TrimSpace(string(head))) {
		t.Fatalf("notices %q", notes)
	}
	if now, _ := os.ReadFile(filepath.Join(dir, "HEAD")); !bytes.Equal(now, head) {
		t.Fatalf("HEAD is %q, want %q", now, head)
	}
	if _, err := l.Apply(ctx, "", []Write{node("3kafterwards1", "after", "")}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "HEAD"), []byte("garbage"), 0o600)
	if _, err := l.Apply(ctx, "", []Write{node("3kafterwards2", "after 2", "")}); err != nil {
		t.Fatal(err)
	}
	if notes := l.TakeNotices(); len(notes) != 1 || !hasNotice(notes, "HEAD file was unreadable", "recovered", "4 records") {
		t.Fatalf("notices %q", notes)
	}
	l2, err := OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if got := texts(t, l2); len(got) != len(want)+2 || len(l2.Notices()) != 0 {
		t.Fatalf("reopened: %v, notices %q", got, l2.Notices())
	}
}

// HEAD put back from an older copy while the operations journal records
// later commits as landed: said at open, and the log (which holds those
// commits) is not compacted away.
func TestHeadBehindJournal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ws []Write
	for i := range 100 {
		ws = append(ws, node(fmt.Sprintf("3kchurn%05d", i), "v0", ""))
	}
	if _, err := l.Apply(ctx, "", ws); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(filepath.Join(dir, "HEAD"))
	var last *Result
	for r := range 30 {
		for i := range ws {
			ws[i].Op = Update
			ws[i].Value = node(ws[i].RKey, fmt.Sprintf("v%d %d", r+1, i), "").Value
		}
		if last, err = l.Apply(ctx, "", ws); err != nil {
			t.Fatal(err)
		}
	}
	did := l.DID().String()
	l.Close()
	os.MkdirAll(filepath.Join(dir, "ops"), 0o700)
	op := fmt.Sprintf(`{"id":"3kopaaaaaaa22","did":%q,"summary":"edit 100","started":%q,"state":"done","writes":[],"batches":[100],"landed":1,"commits":[%q]}`+"\n",
		did, time.Now().UTC().Format(time.RFC3339Nano), last.Commit)
	os.WriteFile(filepath.Join(dir, "ops", "3kopaaaaaaa22.json"), []byte(op), 0o600)
	os.WriteFile(filepath.Join(dir, "HEAD"), old, 0o600)
	size := logSize(dir)
	l, err = OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	notes := l.Notices()
	got := texts(t, l)
	l.Close()
	if !hasNotice(notes, "records 1 commit(s) landed after it", "operation 3kopaaaaaaa22 commit "+last.Commit, "1 of those commits are in the log") {
		t.Fatalf("notices %q", notes)
	}
	if got[0] != "v0" {
		t.Fatalf("HEAD's records: %v", got[:1])
	}
	if s := logSize(dir); s != size {
		t.Fatalf("the log was compacted from the old HEAD: %d -> %d bytes", size, s)
	}
	// removing HEAD recovers the newest commit, as the notice says
	os.Remove(filepath.Join(dir, "HEAD"))
	l, err = OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := texts(t, l); got[0] != "v30 0" {
		t.Fatalf("recovered %v", got[:1])
	}
}
