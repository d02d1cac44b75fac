package budget

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/atomicfile"
)

// The ledger file is append-only: its first line is a snapshot (file, the
// whole ledger as an earlier version kept it, which is how such a file is
// read: one JSON object without a newline), each further line one record
// (rec) of a change: a reservation, a charge, a refund, a release, a
// pause. A process keeps the ledger in memory (state) and, under the lock,
// reads only what others appended since it last looked (the file's size
// past its offset); a change is one appended line, fsynced when it spends
// points (a charge: before its batch is sent). So a write costs the same
// whatever the ledger holds. When the records outnumber what they describe
// (compactAfter, and twice the entries kept), the file is rewritten as one
// snapshot (atomically, by rename): the other processes see a new file and
// read it whole, once. A line cut short (a crash mid-append; a kill cannot
// cut a write(2)) is ended by the next append and skipped.

// file is the snapshot.
type file struct {
	Spent       []entry   `json:"spent"`
	Reserved    []held    `json:"reserved,omitempty"`
	PausedUntil time.Time `json:"pausedUntil,omitzero"`
	PauseNote   string    `json:"pauseNote,omitempty"`
	// PauseLong marks a pause longer than an hour that a server's named
	// limit allowed (Pause); any other is capped at an hour from when the
	// file was written (ledgers of earlier versions kept a day).
	PauseLong bool `json:"pauseLong,omitempty"`
}

// Kinds of record.
const (
	recReserve = "r" // ID holds P points until Exp (PID, Host)
	recCharge  = "c" // P points spent at At under key K, Cov of them out of reservation ID
	recRefund  = "f" // the charge under K out of ID given back, Cov points of it to ID
	recRelease = "x" // reservation ID given up
	recPause   = "p" // writes paused until At (Note, Long)
	recAdopt   = "a" // the open charge under K used by a later reservation ID (a resume): no longer open
	recGive    = "g" // the open charge under K given back (its batch known not to have landed)
)

// rec is one change, as appended. What it does to a reservation was
// decided by the process that wrote it (Cov), so that its effect depends
// only on the records before it, not on what the reading process has
// pruned: every process replays it alike.
type rec struct {
	T    string `json:"t"`
	At   int64  `json:"at,omitempty"` // unix ns
	ID   string `json:"id,omitempty"`
	P    int    `json:"p,omitempty"`
	Cov  int    `json:"cov,omitempty"`
	K    string `json:"k,omitempty"`
	Exp  int64  `json:"exp,omitempty"`
	PID  int    `json:"pid,omitempty"`
	Host string `json:"host,omitempty"`
	Note string `json:"note,omitempty"`
	Long bool   `json:"long,omitempty"`
}

// compactAfter is how many records past the snapshot the file holds
// before it is rewritten (tests lower it).
var compactAfter = 4096

// window keeps the sum of the spent points inside a rolling window,
// moved forward as time passes: O(1) per write, amortized.
type window struct {
	d   time.Duration
	idx int64 // absolute index of the first entry inside the window
	sum int   // points of the entries from idx on
	at  time.Time
}

// state is the ledger in memory.
type state struct {
	spent []entry          // oldest first, within the day
	base  int64            // absolute index of spent[0]
	keys  map[string]int64 // a charge's key → its absolute index
	// open is, per reservation, the absolute indexes of its charges while
	// it is neither released nor adopted (entry.Open): the charges of a
	// process killed before it knew whether they landed
	open      map[string][]int64
	res       map[string]*held
	hour, day window
	paused    time.Time
	pauseNote string
	pauseLong bool
}

func (s *state) reset() {
	*s = state{keys: map[string]int64{}, open: map[string][]int64{}, res: map[string]*held{}, hour: window{d: Window}, day: window{d: Day}}
}

func (s *state) load(f file) {
	s.reset()
	for _, e := range f.Spent {
		s.add(e)
	}
	for _, h := range f.Reserved {
		s.res[h.ID] = &h
	}
	s.paused, s.pauseNote, s.pauseLong = f.PausedUntil, f.PauseNote, f.PauseLong
}

func (s *state) add(e entry) {
	if e.Key != "" {
		s.keys[e.Key] = s.base + int64(len(s.spent))
	}
	if e.Open && e.Res != "" {
		s.open[e.Res] = append(s.open[e.Res], s.base+int64(len(s.spent)))
	}
	s.spent = append(s.spent, e)
	s.hour.sum += e.Points
	s.day.sum += e.Points
}

// charged is the entry charged under key, or nil.
func (s *state) charged(key string) *entry {
	i, ok := s.keys[key]
	if key == "" || !ok || i < s.base {
		return nil
	}
	return &s.spent[i-s.base]
}

// advance moves the windows to now and drops what is older than a day.
func (s *state) advance(now time.Time) {
	end := s.base + int64(len(s.spent))
	for _, w := range []*window{&s.hour, &s.day} {
		if now.Before(w.at) { // the clock went back: count again
			w.idx, w.sum = s.base, 0
			for _, e := range s.spent {
				w.sum += e.Points
			}
		}
		w.at = now
		cut := now.Add(-w.d)
		for w.idx < end && !s.spent[w.idx-s.base].At.After(cut) {
			w.sum -= s.spent[w.idx-s.base].Points
			w.idx++
		}
	}
	if n := s.day.idx - s.base; n > 0 {
		for _, e := range s.spent[:n] {
			if e.Key != "" && s.keys[e.Key] < s.day.idx {
				delete(s.keys, e.Key)
			}
			if ix := s.open[e.Res]; e.Open && len(ix) > 0 && ix[len(ix)-1] < s.day.idx {
				delete(s.open, e.Res)
			}
		}
		s.spent = s.spent[n:]
		s.base = s.day.idx
		s.hour.idx = max(s.hour.idx, s.base)
	}
}

// spentSince is the points spent within d before now (after advance(now)).
func (s *state) spentSince(now time.Time, d time.Duration) int {
	switch d {
	case Window:
		return s.hour.sum
	case Day:
		return s.day.sum
	}
	n := 0
	for i := len(s.spent) - 1; i >= 0 && s.spent[i].At.After(now.Add(-d)); i-- {
		n += s.spent[i].Points
	}
	return n
}

// apply replays one record.
func (s *state) apply(r rec) {
	switch r.T {
	case recReserve:
		s.res[r.ID] = &held{ID: r.ID, Points: r.P, Expires: time.Unix(0, r.Exp), PID: r.PID, Host: r.Host}
	case recCharge:
		if s.charged(r.K) != nil {
			return
		}
		at := time.Unix(0, r.At)
		s.add(entry{At: at, Points: r.P, Key: r.K, Res: r.ID, Open: r.K != ""})
		if h := s.res[r.ID]; h != nil && r.Cov > 0 {
			h.Points -= r.Cov
			h.Expires = at.Add(ReservationTTL)
		}
	case recRefund:
		e := s.charged(r.K)
		if e == nil || e.Res != r.ID {
			return
		}
		s.unspend(r.K)
		if h := s.res[r.ID]; h != nil {
			h.Points += r.Cov // what the refunding process gave back
		}
	case recGive:
		if e := s.charged(r.K); e != nil && e.Open {
			s.unspend(r.K)
		}
	case recAdopt:
		if e := s.charged(r.K); e != nil {
			e.Open = false
		}
	case recRelease:
		delete(s.res, r.ID)
		for _, i := range s.open[r.ID] {
			if i >= s.base {
				s.spent[i-s.base].Open = false
			}
		}
		delete(s.open, r.ID)
	case recPause:
		s.paused, s.pauseNote, s.pauseLong = time.Unix(0, r.At), r.Note, r.Long
	}
}

// unspend takes the charge under key out of the windows (a refund or a
// give-back).
func (s *state) unspend(key string) {
	e := s.charged(key)
	i := s.keys[key]
	p := e.Points
	e.Points, e.Key, e.Open = 0, "", false
	delete(s.keys, key)
	for _, w := range []*window{&s.hour, &s.day} {
		if i >= w.idx {
			w.sum -= p
		}
	}
}

// snapshot is what the file is compacted to.
func (s *state) snapshot() file {
	f := file{Spent: make([]entry, 0, len(s.spent))}
	for _, e := range s.spent {
		if e.Points != 0 || e.Key != "" {
			f.Spent = append(f.Spent, e)
		}
	}
	for _, h := range s.res {
		f.Reserved = append(f.Reserved, *h)
	}
	if !s.paused.IsZero() {
		f.PausedUntil, f.PauseNote, f.PauseLong = s.paused, s.pauseNote, s.pauseLong
	}
	return f
}

// ledgerFile is a ledger's hold on its file.
type ledgerFile struct {
	lock  *os.File // path+".lock", flocked around every call
	data  *os.File // the file as last opened (O_APPEND)
	info  os.FileInfo
	off   int64 // bytes applied to the state
	size  int64 // the file's size when last read
	old   bool  // a snapshot of an earlier version, without a newline: rewritten before the first append
	lines int   // records past the snapshot
}

func (l *Ledger) openLock() error {
	if l.lf.lock != nil {
		return nil
	}
	lock, err := os.OpenFile(l.path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	l.lf.lock = lock
	return nil
}

// catchUp applies what was appended since the last look; a file replaced
// (compacted) is read whole.
func (l *Ledger) catchUp() error {
	fi, err := os.Stat(l.path)
	if errors.Is(err, os.ErrNotExist) {
		if l.lf.data != nil { // removed: what this process knows stays
			l.lf.data.Close()
			l.lf = ledgerFile{lock: l.lf.lock}
		}
		return nil
	}
	if err != nil {
		return err
	}
	if l.lf.data == nil || !os.SameFile(fi, l.lf.info) || fi.Size() < l.lf.off {
		info, err := l.reopen()
		if err != nil {
			return err
		}
		l.s.reset()
		fi = info
	}
	l.lf.size = fi.Size()
	if l.lf.size == l.lf.off {
		return nil
	}
	buf := make([]byte, l.lf.size-l.lf.off)
	n, err := l.lf.data.ReadAt(buf, l.lf.off)
	if err != nil && !(errors.Is(err, io.EOF) && n > 0) {
		return err
	}
	return l.parse(buf[:n], fi.ModTime())
}

// parse applies whole lines of buf, read at the offset.
func (l *Ledger) parse(buf []byte, mod time.Time) error {
	for len(buf) > 0 {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			if l.lf.off == 0 { // a ledger of an earlier version
				if err := l.loadSnapshot(buf, mod, true); err != nil {
					return err
				}
				l.lf.off += int64(len(buf))
				l.lf.old = true
			}
			return nil // else a line cut short: skipped when the next one is appended
		}
		if l.lf.off == 0 {
			if err := l.loadSnapshot(buf[:i], mod, false); err != nil {
				return err
			}
		} else {
			var r rec
			if json.Unmarshal(buf[:i], &r) == nil {
				l.s.apply(r)
			}
			l.lf.lines++
		}
		l.lf.off += int64(i + 1)
		buf = buf[i+1:]
	}
	return nil
}

func (l *Ledger) loadSnapshot(raw []byte, mod time.Time, old bool) error {
	var f file
	if err := json.Unmarshal(raw, &f); err != nil {
		return fmt.Errorf("budget ledger %s: %w", l.path, err)
	}
	l.s.load(f)
	l.s.paused = capPause(l.Now(), f.PausedUntil)
	if old && !f.PauseLong && l.s.paused.After(mod.Add(Window)) {
		// a pause past an hour that no named limit allowed (an earlier
		// version kept a server's word up to a day): an hour from when
		// it was recorded, then the next write probes
		asked := l.s.paused
		l.s.paused = mod.Add(Window)
		l.s.pauseNote = fmt.Sprintf("a pause until %s without a named limit was capped at 1 h, the write budget's window", asked.UTC().Format(time.RFC3339))
	}
	return nil
}

// append writes recs after what the file holds (caller holds the
// exclusive lock, caught up), fsynced if any spends points, then applies
// them; the file is compacted when its records outnumber what they
// describe.
func (l *Ledger) append(recs []rec, now time.Time) error {
	if l.lf.old {
		if err := l.compact(); err != nil {
			return err
		}
	}
	var b []byte
	if l.lf.data == nil {
		f, err := os.OpenFile(l.path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		info, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		l.lf = ledgerFile{lock: l.lf.lock, data: f, info: info, size: info.Size()}
		if info.Size() == 0 {
			b = append(b, "{\"spent\":[]}\n"...)
		} else if err := l.catchUp(); err != nil { // written meanwhile without the lock: read it
			return err
		}
	}
	if l.lf.off < l.lf.size {
		b = append(b, '\n') // ends a line cut short
	}
	sync := false
	for _, r := range recs {
		raw, err := json.Marshal(r)
		if err != nil {
			return err
		}
		b = append(append(b, raw...), '\n')
		sync = sync || r.T == recCharge || r.T == recPause
	}
	if _, err := l.lf.data.Write(b); err != nil {
		return err
	}
	if sync {
		if err := l.lf.data.Sync(); err != nil {
			return err
		}
	}
	l.lf.size += int64(len(b))
	l.lf.off = l.lf.size
	l.lf.lines += len(recs)
	for _, r := range recs {
		l.s.apply(r)
	}
	if l.lf.lines >= compactAfter && l.lf.lines > 2*(len(l.s.spent)+len(l.s.res)) {
		l.prune(now)
		return l.compact()
	}
	return nil
}

// compact rewrites the file as one snapshot of the state (caller holds the
// exclusive lock, caught up).
func (l *Ledger) compact() error {
	raw, err := json.Marshal(l.s.snapshot())
	if err != nil {
		return err
	}
	raw = append(raw, '\n')
	if err := atomicfile.Write(l.path, raw, 0o600); err != nil {
		return err
	}
	if _, err := l.reopen(); err != nil {
		return err
	}
	l.lf.off, l.lf.size = int64(len(raw)), int64(len(raw))
	return nil
}

// reopen opens the ledger file anew for appending (it was replaced, or is
// new to this process), in place of the one held, and says what it is;
// what was read of the old one is the caller's to drop or keep.
func (l *Ledger) reopen() (os.FileInfo, error) {
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if l.lf.data != nil {
		l.lf.data.Close()
	}
	l.lf = ledgerFile{lock: l.lf.lock, data: f, info: info}
	return info, nil
}
