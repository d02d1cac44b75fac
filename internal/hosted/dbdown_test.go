package hosted

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestDatabaseDownSaysOnlyWhatAClientMayKnow: with the database not
// answering, a request with any bearer token and a token request get 503
// with Retry-After and a generic reason; the database's user, name, host
// and port are in neither (they go to the operator's log).
func TestDatabaseDownSaysOnlyWhatAClientMayKnow(t *testing.T) {
	var mu sync.Mutex
	var logged []string
	in := newEnv(t).start(t, func(c *Config) {
		c.Logf = func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			logged = append(logged, format)
		}
	})
	dead, err := pgxpool.New(context.Background(), "postgres://leakyuser:pw@127.0.0.1:1/leakydb?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dead.Close)
	in.Server.db = dead
	for _, req := range []func() (*http.Request, error){
		func() (*http.Request, error) {
			r, err := http.NewRequest("POST", in.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			if err == nil {
				r.Header.Set("Authorization", "Bearer anything")
				r.Header.Set("Content-Type", "application/json")
			}
			return r, err
		},
		func() (*http.Request, error) {
			r, err := http.NewRequest("POST", in.URL+"/token", strings.NewReader("grant_type=refresh_token&refresh_token=x&client_id=http://localhost"))
			if err == nil {
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			return r, err
		},
	} {
		r, err := req()
		if err != nil {
			t.Fatal(err)
		}
		res, err := testClient().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: %d, Retry-After %q: %s", r.URL.Path, res.StatusCode, res.Header.Get("Retry-After"), body)
		}
		for _, secret := range []string{"leakyuser", "leakydb", "127.0.0.1:1", "dial"} {
			if strings.Contains(string(body), secret) {
				t.Fatalf("%s: the answer names %q: %s", r.URL.Path, secret, body)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logged) == 0 {
		t.Fatal("the operator's log got nothing")
	}
}
