package hosted

import (
	"fmt"
	"net/http"
	"sync"
)

// DefaultPerAddress is the default cap of requests under way at once from
// one client address (Config.PerAddress): room for several MCP clients of
// one person or a small office behind one address (each holds a GET
// stream and a few calls), not for one address to take the instance.
const DefaultPerAddress = 64

// addrCap counts the requests under way per client address (an open GET
// /mcp stream is one for as long as it lasts).
type addrCap struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

func (c *addrCap) enter(addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[addr] >= c.max {
		return false
	}
	c.n[addr]++
	return true
}

func (c *addrCap) leave(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[addr]--; c.n[addr] <= 0 {
		delete(c.n, addr)
	}
}

// perAddress caps the requests under way from one client address (the
// address the rate limits count: clientAddr) at Config.PerAddress: beyond
// it a request is refused 429 with Retry-After before anything is read.
func (s *Server) perAddress(next http.Handler) http.Handler {
	max := s.cfg.PerAddress
	if max == 0 {
		max = DefaultPerAddress
	}
	if max < 0 {
		return next
	}
	c := &addrCap{max: max, n: map[string]int{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr := s.clientAddr(r)
		if !c.enter(addr) {
			s.metrics.addrRefused.Inc()
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Connection", "close")
			http.Error(w, fmt.Sprintf("too many requests under way from your address (%s): at most %d at once; retry when one has ended", addr, max), http.StatusTooManyRequests)
			return
		}
		defer c.leave(addr)
		next.ServeHTTP(w, r)
	})
}
