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

	"github.com/bulleted-mcp/bulleted-mcp/internal/hosted/pgtest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
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
	pdstest.RoomOnBusyMachine()
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
	caDir, err := os.MkdirTemp("", "bulleted-hosted-ca-")
	if err == nil {
		testCA, err = pdstest.NewTestCA(caDir, testHost)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the test CA: %v\n", err)
		pg.Stop()
		os.Exit(1)
	}
	noRedirect.Transport = testCA.Transport()
	code := m.Run()
	if pdsSrv != nil {
		pdsSrv.Stop()
	}
	pg.Stop()
	os.RemoveAll(caDir)
	os.Exit(code)
}

// testHost is the name an instance served over https (env.tls) has: the
// reference PDS accepts no IP literal, loopback name or reserved test TLD
// (.test, .example, .local, .localhost, .invalid) in an https client ID;
// .internal is reserved for private use, never delegated. It resolves to 127.0.0.1 in the PDS's process and in testCA's
// Transport, whose CA (testCA) both trust.
const testHost = "bulleted.internal"

var testCA *pdstest.TestCA

// testClient is an HTTP client of the test instances (https ones included).
func testClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: testCA.Transport()}
}

func testPDS(t testing.TB) *pdstest.Server {
	t.Helper()
	pdsOnce.Do(func() {
		pdsSrv, pdsErr = pdstest.StartServer(pdstest.Options{LoopbackHosts: testCA.Names, ExtraCACerts: testCA.CertFile})
	})
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

	mu   sync.Mutex
	hits map[string]int // requests by path
	// override answers the requests for a path instead of the server
	override map[string]http.Handler
}

// Override answers the requests for path with h instead of the server (nil:
// the server again).
func (in *instance) Override(path string, h http.Handler) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if h == nil {
		delete(in.override, path)
	} else {
		in.override[path] = h
	}
}

// Hits is how many requests for path the instance received.
func (in *instance) Hits(path string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.hits[path]
}

type env struct {
	dbURL  string
	sealer *Sealer
	plc    string
	// tls serves the instances over https as testHost (with testCA's
	// certificate): their upstream client is then confidential.
	tls bool
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
	if e.tls {
		public = fmt.Sprintf("https://%s:%d", testHost, ln.Addr().(*net.TCPAddr).Port)
	}
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
	in := &instance{Server: s, URL: public, hits: map[string]int{}, override: map[string]http.Handler{}}
	h := s.Handler()
	hs := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in.mu.Lock()
		in.hits[r.URL.Path]++
		o := in.override[r.URL.Path]
		in.mu.Unlock()
		if o != nil {
			o.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})}
	if e.tls {
		hs.TLSConfig = testCA.ServerTLS
		go hs.ServeTLS(ln, "", "")
	} else {
		go hs.Serve(ln)
	}
	t.Cleanup(func() { hs.Close() })
	return in
}
