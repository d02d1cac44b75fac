package hosted

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the advisory lock key under which migrations run, so
// that instances starting together apply them once.
const migrationLock = 0x6275_6c6c_6574 // "bullet"

// OpenDB connects to databaseURL (bounded: each connection within 10 s,
// each statement within 30 s) and applies the embedded migrations.
func OpenDB(ctx context.Context, databaseURL string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("--database: %w", err)
	}
	cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = "30000"
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = "35000"
	if cfg.MaxConns < 16 {
		cfg.MaxConns = 16
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// Migrate applies the embedded migrations not yet applied, in order, each in
// its own transaction, under an advisory lock.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connecting to the database: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
		return err
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", migrationLock)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return err
	}
	list, err := migrationList(migrations)
	if err != nil {
		return err
	}
	for _, m := range list {
		v, base, name := m.version, m.base, m.name
		var done bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)", v).Scan(&done); err != nil {
			return err
		}
		if done {
			continue
		}
		sql, _ := migrations.ReadFile(name)
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, string(sql)); err != nil {
			tx.Rollback(ctx)
			return fmt.Errorf("migration %s: %w", base, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", v, base); err != nil {
			tx.Rollback(ctx)
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
	}
	return nil
}

type migrationFile struct {
	version    int
	base, name string
}

// migrationList is the migrations in fsys's migrations/*.sql, in order of
// their version numbers (each file's leading number, which must be unique:
// of two files with one number, one would be skipped as already applied).
func migrationList(fsys fs.FS) ([]migrationFile, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migrationFile
	seen := map[int]string{}
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: no version number", base)
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s have the same version number", prev, base)
		}
		seen[v] = base
		out = append(out, migrationFile{version: v, base: base, name: name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// lockKey is the advisory lock key of a name (an identity's budget).
func lockKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}

// SealKeyEnv names the environment variable holding the key that seals
// upstream sessions and server keys at rest: 32 bytes, base64.
const SealKeyEnv = "BULLETED_MCP_SEAL_KEY"

// ErrSealKey means the sealing key is missing or malformed.
var ErrSealKey = errors.New(SealKeyEnv + " must hold 32 random bytes in base64 (generate with: head -c32 /dev/urandom | base64)")

// Sealer encrypts secrets at rest with AES-256-GCM.
type Sealer struct{ aead cipher.AEAD }

// NewSealer returns a sealer with key (32 bytes).
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != 32 {
		return nil, ErrSealKey
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: g}, nil
}

// SealerFromEnv reads the key from SealKeyEnv.
func SealerFromEnv(getenv func(string) string) (*Sealer, error) {
	raw := strings.TrimSpace(getenv(SealKeyEnv))
	if raw == "" {
		return nil, ErrSealKey
	}
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		if key, err = base64.RawURLEncoding.DecodeString(raw); err != nil {
			return nil, ErrSealKey
		}
	}
	return NewSealer(key)
}

// Seal encrypts plain, bound to purpose (which Open must name again).
func (s *Sealer) Seal(purpose string, plain []byte) []byte {
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce)
	return s.aead.Seal(nonce, nonce, plain, []byte(purpose))
}

// Open decrypts what Seal sealed for purpose.
func (s *Sealer) Open(purpose string, sealed []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("sealed value too short")
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(purpose))
	if err != nil {
		return nil, fmt.Errorf("unsealing %s (wrong %s?): %w", purpose, SealKeyEnv, err)
	}
	return plain, nil
}

// hashToken is how tokens and codes are stored: SHA-256 (they are random,
// 256-bit, so no salt or stretching is needed).
func hashToken(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}

// newToken returns a random opaque token with a prefix naming its kind.
func newToken(prefix string) string {
	b := make([]byte, 32)
	rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}
