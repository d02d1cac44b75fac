package pdstest

import (
	"net"
	"sync"
	"testing"
)

// HalfOpen is a TCP proxy to a target that can go half-open: Stall makes
// it forward nothing more in either direction while every connection stays
// open (no FIN, no RST), as a peer or a middlebox that vanished would;
// connections made meanwhile are accepted and get nothing either. Resume
// forwards again (what was held back is dropped).
type HalfOpen struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	stalled chan struct{} // closed by Resume; nil while forwarding
	conns   []net.Conn
}

// NewHalfOpen listens on loopback and forwards to target (host:port)
// until the test ends.
func NewHalfOpen(t testing.TB, target string) *HalfOpen {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &HalfOpen{ln: ln, target: target}
	t.Cleanup(p.close)
	go p.accept()
	return p
}

// Addr is the proxy's host:port.
func (p *HalfOpen) Addr() string { return p.ln.Addr().String() }

// Stall stops forwarding (half-open).
func (p *HalfOpen) Stall() {
	p.mu.Lock()
	if p.stalled == nil {
		p.stalled = make(chan struct{})
	}
	p.mu.Unlock()
}

// Resume forwards again: the connections that stalled are closed (their
// streams lost bytes), new ones are forwarded.
func (p *HalfOpen) Resume() {
	p.mu.Lock()
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (p *HalfOpen) close() {
	p.ln.Close()
	p.Resume()
}

func (p *HalfOpen) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go p.pipe(out, in)
		go p.pipe(in, out)
	}
}

// pipe copies src to dst while not stalled; stalled, what arrives is
// read and held back (dropped), and nothing is written.
func (p *HalfOpen) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			stalled := p.stalled
			p.mu.Unlock()
			if stalled == nil {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			// stalled, the end is not passed on either (no FIN) until
			// Resume or the end of the test
			p.mu.Lock()
			stalled := p.stalled
			p.mu.Unlock()
			if stalled != nil {
				<-stalled
			}
			return
		}
	}
}
