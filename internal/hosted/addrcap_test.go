package hosted

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPerAddressCap: with two requests under way from one address (their
// bodies still coming), a third from it is refused 429 with Retry-After
// and counted in /metrics; once they end, requests are served again.
func TestPerAddressCap(t *testing.T) {
	in := newEnv(t).start(t, func(c *Config) { c.PerAddress = 2; c.BodyTimeout = time.Minute; c.MetricsToken = "m" })
	host := strings.TrimPrefix(in.URL, "http://")
	var held []net.Conn
	for range 2 {
		conn, err := net.DialTimeout("tcp", host, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		// a registration whose body has not all come: under way
		fmt.Fprintf(conn, "POST /register HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"client_name\":", host)
		held = append(held, conn)
	}
	get := func() *http.Response {
		resp, err := testClient().Get(in.URL + "/.well-known/oauth-authorization-server")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	// the held requests are counted once the server has their headers:
	// wait for the refusal (each request that got through is the server
	// not having them yet)
	deadline := time.Now().Add(30 * time.Second)
	var resp *http.Response
	for resp = get(); resp.StatusCode == 200 && time.Now().Before(deadline); resp = get() {
		time.Sleep(10 * time.Millisecond)
	}
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a third request from the address: %d (Retry-After %q), want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for _, c := range held {
		c.Close()
	}
	for resp = get(); resp.StatusCode == 429 && time.Now().Before(deadline); resp = get() {
		time.Sleep(10 * time.Millisecond)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("after the held requests ended: %d, want 200", resp.StatusCode)
	}
	_, fams := scrape(t, in, "m")
	if got := value(fams, "bulleted_hosted_address_cap_refused_total"); got < 1 {
		t.Fatalf("bulleted_hosted_address_cap_refused_total = %v after a refusal", got)
	}
}
