package outline

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/bluesky-social/indigo/atproto/atdata"

	"github.com/bulleted-mcp/bulleted-mcp/atomicfile"
	"github.com/bulleted-mcp/bulleted-mcp/store"
)

// JournalSize is how many applied operations the undo journal keeps.
const JournalSize = 100

// journal file format: one JSON document, replaced atomically after each
// applied plan or undo. Values are written as AT Protocol JSON so that
// integers, bytes and links survive the round trip.
type journalFile struct {
	DID     string             `json:"did"`
	Entries []journalEntryJSON `json:"entries"`
}

type journalEntryJSON struct {
	Summary string             `json:"summary"`
	Inverse []journalWriteJSON `json:"inverse"`
	After   map[string]string  `json:"after"`
}

type journalWriteJSON struct {
	Op         store.Op        `json:"op"`
	Collection string          `json:"collection"`
	RKey       string          `json:"rkey"`
	Value      json.RawMessage `json:"value,omitempty"`
}

// KeepJournal makes the undo journal survive restarts: it is loaded from
// path now (if the file exists and belongs to this repository) and written
// back after every applied plan and undo.
func (e *Engine) KeepJournal(path string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.journalPath = path
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var f journalFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return fmt.Errorf("undo journal %s: %w", path, err)
	}
	if f.DID != e.Repo.DID().String() {
		return nil // another repository's journal: start empty, overwrite on the next write
	}
	e.journal = e.journal[:0]
	for _, ent := range f.Entries {
		je := journalEntry{summary: ent.Summary, after: ent.After}
		for _, w := range ent.Inverse {
			sw := store.Write{Op: w.Op, Collection: w.Collection, RKey: w.RKey}
			if len(w.Value) > 0 {
				v, err := atdata.UnmarshalJSON(w.Value)
				if err != nil {
					return fmt.Errorf("undo journal %s: %w", path, err)
				}
				sw.Value = v
			}
			je.inverse = append(je.inverse, sw)
		}
		e.journal = append(e.journal, je)
	}
	return nil
}

// saveJournal writes the journal if KeepJournal was called. Failing to save
// loses only the ability to undo after a restart, so it is reported, not
// fatal to the commit that already happened.
func (e *Engine) saveJournal() error {
	if e.journalPath == "" {
		return nil
	}
	f := journalFile{DID: e.Repo.DID().String(), Entries: []journalEntryJSON{}}
	for _, ent := range e.journal {
		je := journalEntryJSON{Summary: ent.summary, After: ent.after, Inverse: []journalWriteJSON{}}
		for _, w := range ent.inverse {
			jw := journalWriteJSON{Op: w.Op, Collection: w.Collection, RKey: w.RKey}
			if w.Value != nil {
				raw, err := json.Marshal(w.Value) // atdata values marshal to AT Protocol JSON
				if err != nil {
					return err
				}
				jw.Value = raw
			}
			je.Inverse = append(je.Inverse, jw)
		}
		f.Entries = append(f.Entries, je)
	}
	raw, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return atomicfile.Write(e.journalPath, raw, 0o600)
}
