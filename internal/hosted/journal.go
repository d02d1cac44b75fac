package hosted

import (
	"context"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bulleted-mcp/bulleted-mcp/internal/atomicfile"
)

// journal keeps one identity's operations journal in Postgres (table
// operations) and mirrors it into the directory where the engine keeps its
// operation files (outline.Engine.KeepOperations): before a call the rows
// come down (pull), and every operation file this instance wrote goes up
// (push) before each batch is sent and after the call. So an operation is
// in Postgres before its first batch is committed, and any instance can
// list, resume and undo it.
//
// Limit: an operation that another instance is committing at this moment
// is listed here as incomplete until that instance pushes its end (the
// engine's liveness check is a file lock, local to one machine).
type journal struct {
	db  *pgxpool.Pool
	did string
	dir string // DATA/ops of the identity

	mu    sync.Mutex
	known map[string][32]byte // operation file name → content hash as last synced
}

func newJournal(db *pgxpool.Pool, did, dir string) *journal {
	return &journal{db: db, did: did, dir: dir, known: map[string][32]byte{}}
}

func (j *journal) local() (map[string][]byte, error) {
	out := map[string][]byte{}
	ents, err := os.ReadDir(j.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(j.dir, e.Name()))
		if err != nil {
			continue // removed meanwhile
		}
		out[strings.TrimSuffix(e.Name(), ".json")] = b
	}
	return out, nil
}

// pull brings the database's operations into the directory: rows changed
// elsewhere replace files unchanged here; rows deleted elsewhere remove
// files unchanged here.
func (j *journal) pull(ctx context.Context) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	rows, err := j.db.Query(ctx, "SELECT id, body FROM operations WHERE did = $1", j.did)
	if err != nil {
		return err
	}
	remote := map[string][]byte{}
	for rows.Next() {
		var id string
		var body []byte
		if err := rows.Scan(&id, &body); err != nil {
			rows.Close()
			return err
		}
		remote[id] = body
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	local, err := j.local()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return err
	}
	for id, body := range remote {
		rh := sha256.Sum256(body)
		lb, have := local[id]
		known, synced := j.known[id]
		switch {
		case !have && synced:
			// removed here (pruned): push deletes the row
		case !have, sha256.Sum256(lb) == known && known != rh:
			if err := atomicfile.Write(filepath.Join(j.dir, id+".json"), body, 0o600); err != nil {
				return err
			}
			j.known[id] = rh
		case sha256.Sum256(lb) == rh:
			j.known[id] = rh
		}
	}
	for id, lb := range local {
		if _, ok := remote[id]; ok {
			continue
		}
		if known, synced := j.known[id]; synced && sha256.Sum256(lb) == known {
			os.Remove(filepath.Join(j.dir, id+".json"))
			delete(j.known, id)
		}
	}
	return nil
}

// push sends the operation files changed here, and deletes the rows of
// files removed here.
func (j *journal) push(ctx context.Context) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	local, err := j.local()
	if err != nil {
		return err
	}
	for id, lb := range local {
		h := sha256.Sum256(lb)
		if known, ok := j.known[id]; ok && known == h {
			continue
		}
		if _, err := j.db.Exec(ctx, `INSERT INTO operations (did, id, body) VALUES ($1, $2, $3)
			ON CONFLICT (did, id) DO UPDATE SET body = excluded.body, updated_at = now()`, j.did, id, lb); err != nil {
			return err
		}
		j.known[id] = h
	}
	for id := range j.known {
		if _, ok := local[id]; !ok {
			if _, err := j.db.Exec(ctx, "DELETE FROM operations WHERE did = $1 AND id = $2", j.did, id); err != nil {
				return err
			}
			delete(j.known, id)
		}
	}
	return nil
}
