package hosted

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/hosted/pgtest"
	"github.com/bulleted-mcp/bulleted-mcp/pds"
	"github.com/bulleted-mcp/bulleted-mcp/pds/pdstest"
)

// pg is the test binary's PostgreSQL; each test takes a fresh database.
var pg *pgtest.Server

// The PDS (started on first use) publishes the permission sets, so that
// include:app.bulleted.authFull resolves offline.
var (
	pdsOnce sync.Once
	pdsSrv  *pdstest.Server
	pdsErr  error
)

func TestMain(m *testing.M) {
	var err error
	pg, err = pgtest.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the hosted tests need PostgreSQL: %v\n", err)
		os.Exit(1)
	}
	dir, err := pdstest.PermissionSets()
	if err == nil {
		os.Setenv(pdstest.LexiconAuthorityEnv, dir)
	}
	code := m.Run()
	if pdsSrv != nil {
		pdsSrv.Stop()
	}
	pg.Stop()
	os.Exit(code)
}

func testPDS(t testing.TB) *pdstest.Server {
	t.Helper()
	pdsOnce.Do(func() { pdsSrv, pdsErr = pdstest.StartServer(pdstest.Options{}) })
	if pdsErr != nil {
		t.Fatal(pdsErr)
	}
	return pdsSrv
}

func testSealer(t testing.TB) *Sealer {
	key := make([]byte, 32)
	rand.Read(key)
	s, err := SealerFromEnv(func(string) string { return base64.StdEncoding.EncodeToString(key) })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// instance is one running server on a loopback port.
type instance struct {
	*Server
	URL string
}

type env struct {
	dbURL  string
	sealer *Sealer
	plc    string
}

func newEnv(t testing.TB) *env {
	return &env{dbURL: pg.NewDatabase(t), sealer: testSealer(t)}
}

// start runs one instance on the environment's database.
func (e *env) start(t testing.TB, mod func(*Config)) *instance {
	t.Helper()
	ctx := context.Background()
	db, err := OpenDB(ctx, e.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public := "http://" + ln.Addr().String()
	plc := e.plc
	if plc == "" {
		plc = "http://127.0.0.1:1" // no identity resolution needed
	}
	cfg := Config{PublicURL: public, DB: db, Sealer: e.sealer, DataDir: t.TempDir(), Directory: pds.Directory(plc), AllowLoopback: true}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return &instance{Server: s, URL: public}
}
