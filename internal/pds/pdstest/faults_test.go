package pdstest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"
	car "github.com/ipld/go-car"

	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// backend is a trivial XRPC server: every method answers {"ok":N} (N the
// request's number), getRepo a fixed 20 KiB body; it records what it got.
type backend struct {
	*httptest.Server
	mu   sync.Mutex
	got  []string // method names, in order
	repo []byte
}

func newBackend(t *testing.T) *backend {
	b := &backend{repo: make([]byte, 20<<10)}
	for i := range b.repo {
		b.repo[i] = byte(i * 7)
	}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		m := strings.TrimPrefix(r.URL.Path, "/xrpc/")
		b.mu.Lock()
		b.got = append(b.got, m)
		n := len(b.got)
		b.mu.Unlock()
		if m == GetRepo {
			w.Header().Set("Content-Type", "application/vnd.ipld.car")
			w.Write(b.repo)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Backend", "yes")
		fmt.Fprintf(w, `{"ok":%d}`, n)
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *backend) received(method string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, m := range b.got {
		if m == method {
			n++
		}
	}
	return n
}

type answer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

// do sends one request of method through the proxy with a client that
// gives up after timeout.
func do(p *FaultProxy, method string, timeout time.Duration) answer {
	hc := &http.Client{Timeout: timeout}
	verb, body := http.MethodGet, io.Reader(nil)
	if method == ApplyWrites {
		verb, body = http.MethodPost, strings.NewReader(`{"repo":"did:plc:x","writes":[]}`)
	}
	req, err := http.NewRequest(verb, p.URL+"/xrpc/"+method+"?x=1", body)
	if err != nil {
		return answer{err: err}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return answer{status: resp.StatusCode, header: resp.Header, body: raw, err: err}
}

// within fails the test if f does not return within a minute: a guard
// against a hanging test, not a timing assertion.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s hung", what)
	}
}

func xrpcError(t *testing.T, body []byte) string {
	t.Helper()
	var eb struct{ Error, Message string }
	if err := json.Unmarshal(body, &eb); err != nil {
		t.Fatalf("error body %q is not XRPC JSON: %v", body, err)
	}
	if eb.Message == "" {
		t.Fatalf("error body %q has no message", body)
	}
	return eb.Error
}

func TestFaultKinds(t *testing.T) {
	cases := []struct {
		name      string
		fault     Fault
		method    string
		forwarded int // requests the backend must have got
		check     func(t *testing.T, a answer)
	}{
		{"pass through", Fault{Method: "other.method", Kind: TooLarge}, ApplyWrites, 1, func(t *testing.T, a answer) {
			if a.err != nil || a.status != 200 || string(a.body) != `{"ok":1}` || a.header.Get("X-Backend") != "yes" {
				t.Fatalf("relayed %+v", a)
			}
		}},
		{"drop after forward", Fault{Method: ApplyWrites, Kind: DropAfterForward}, ApplyWrites, 1, func(t *testing.T, a answer) {
			if a.err == nil {
				t.Fatalf("the client got an answer: %d %s", a.status, a.body)
			}
		}},
		{"500 after commit", Fault{Method: ApplyWrites, Kind: Status5xxAfterCommit}, ApplyWrites, 1, func(t *testing.T, a answer) {
			if a.err != nil || a.status != 500 || xrpcError(t, a.body) != "InternalServerError" {
				t.Fatalf("got %+v", a)
			}
		}},
		{"502 after commit", Fault{Method: ApplyWrites, Kind: Status5xxAfterCommit, Status: 502}, ApplyWrites, 1, func(t *testing.T, a answer) {
			if a.err != nil || a.status != 502 || !strings.Contains(string(a.body), "Bad Gateway") {
				t.Fatalf("got %+v", a)
			}
		}},
		{"429 one second", Fault{Method: ApplyWrites, Kind: RateLimit, RetryAfter: "1"}, ApplyWrites, 0, func(t *testing.T, a answer) {
			if a.err != nil || a.status != 429 || a.header.Get("Retry-After") != "1" || xrpcError(t, a.body) != "RateLimitExceeded" {
				t.Fatalf("got %+v", a)
			}
		}},
		{"429 ten years", Fault{Method: ApplyWrites, Kind: RateLimit, RetryAfter: "315360000"}, ApplyWrites, 0, func(t *testing.T, a answer) {
			if a.status != 429 || a.header.Get("Retry-After") != "315360000" {
				t.Fatalf("got %+v", a)
			}
		}},
		{"413", Fault{Method: ApplyWrites, Kind: TooLarge}, ApplyWrites, 0, func(t *testing.T, a answer) {
			if a.err != nil || a.status != 413 || xrpcError(t, a.body) != "PayloadTooLarge" {
				t.Fatalf("got %+v", a)
			}
		}},
		{"hang", Fault{Method: ApplyWrites, Kind: Hang}, ApplyWrites, 0, func(t *testing.T, a answer) {
			var ne interface{ Timeout() bool }
			if !errors.As(a.err, &ne) || !ne.Timeout() {
				t.Fatalf("want a client timeout, got %+v", a)
			}
		}},
		{"hang after forward", Fault{Method: ApplyWrites, Kind: HangAfterForward}, ApplyWrites, 1, func(t *testing.T, a answer) {
			var ne interface{ Timeout() bool }
			if !errors.As(a.err, &ne) || !ne.Timeout() {
				t.Fatalf("want a client timeout, got %+v", a)
			}
		}},
		{"corrupt CAR", Fault{Method: GetRepo, Kind: CorruptCAR}, GetRepo, 1, nil}, // checked below
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newBackend(t)
			p := NewFaultProxy(t, b.URL)
			armed := p.Arm(c.fault)
			var a answer
			within(t, "the request", func() { a = do(p, c.method, 300*time.Millisecond) })
			if c.check != nil {
				c.check(t, a)
			}
			if got := b.received(c.method); got != c.forwarded {
				t.Fatalf("the backend got %d %s, want %d", got, c.method, c.forwarded)
			}
			if got := p.Forwarded(c.method); got != c.forwarded {
				t.Fatalf("Forwarded %d, want %d", got, c.forwarded)
			}
			wantFired := 1
			if c.fault.Method != c.method {
				wantFired = 0
			}
			if armed.Fired() != wantFired || len(p.Events()) != wantFired {
				t.Fatalf("fired %d, events %v", armed.Fired(), p.Events())
			}
			if c.forwarded == 1 && wantFired == 1 && c.fault.Kind != CorruptCAR && p.Events()[0].PDSStatus != 200 {
				t.Fatalf("event %v: the backend's answer not recorded", p.Events()[0])
			}
			if c.fault.Kind == CorruptCAR {
				if a.status != 200 || len(a.body) != len(b.repo) {
					t.Fatalf("got %d, %d bytes", a.status, len(a.body))
				}
				for i := range a.body {
					flipped := i >= flipFrom && (i-flipFrom)%4096 == 0
					if (a.body[i] != b.repo[i]) != flipped {
						t.Fatalf("byte %d: got %#x, backend sent %#x", i, a.body[i], b.repo[i])
					}
				}
			}
			within(t, "Close", p.Close)
		})
	}
}

// A late request reaches the backend only after the client got its 504;
// WaitLate returns once the backend answered it.
func TestLate(t *testing.T) {
	b := newBackend(t)
	p := NewFaultProxy(t, b.URL)
	p.Arm(Fault{Method: ApplyWrites, Kind: Late, Delay: time.Hour})
	a := do(p, ApplyWrites, 10*time.Second)
	if a.err != nil || a.status != 504 {
		t.Fatalf("got %+v", a)
	}
	if n := b.received(ApplyWrites); n != 0 {
		t.Fatalf("forwarded before the delay: %d", n)
	}
	if done, _ := p.LateDone(); done != 0 {
		t.Fatalf("LateDone %d", done)
	}
	// Close forwards what is still waiting, and waits for it
	within(t, "Close", p.Close)
	if n := b.received(ApplyWrites); n != 1 {
		t.Fatalf("the late request was not forwarded at Close: %d", n)
	}

	b2 := newBackend(t)
	p2 := NewFaultProxy(t, b2.URL)
	p2.Arm(Fault{Method: ApplyWrites, Kind: Late, Delay: 20 * time.Millisecond})
	if a := do(p2, ApplyWrites, 10*time.Second); a.status != 504 {
		t.Fatalf("got %+v", a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p2.WaitLate(ctx); err != nil {
		t.Fatal(err)
	}
	if done, landed := p2.LateDone(); done != 1 || landed != 1 || b2.received(ApplyWrites) != 1 || p2.Forwarded(ApplyWrites) != 1 {
		t.Fatalf("after WaitLate: done %d landed %d received %d", done, landed, b2.received(ApplyWrites))
	}
	if ev := p2.Events(); len(ev) != 1 || ev[0].Kind != Late || ev[0].PDSStatus != 200 {
		t.Fatalf("events %v", ev)
	}
}

// Occurrences count matching requests from arming; Every keeps firing;
// Disarm stops every fault.
func TestOccurrences(t *testing.T) {
	cases := []struct {
		name  string
		fault Fault
		want  string // per request of ApplyWrites: + answered, x spoiled
	}{
		{"next", Fault{Method: ApplyWrites, Kind: TooLarge}, "x+++"},
		{"second", Fault{Method: ApplyWrites, Kind: TooLarge, Nth: 2}, "+x++"},
		{"every from the second", Fault{Method: ApplyWrites, Kind: TooLarge, Nth: 2, Every: true}, "+xxx"},
		{"every", Fault{Method: ApplyWrites, Kind: TooLarge, Every: true}, "xxxx"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newBackend(t)
			p := NewFaultProxy(t, b.URL)
			do(p, ApplyWrites, 10*time.Second) // before arming: not counted
			p.Arm(c.fault)
			var got strings.Builder
			for range 4 {
				do(p, GetLatestCommit, 10*time.Second) // another method: not counted
				a := do(p, ApplyWrites, 10*time.Second)
				switch a.status {
				case 200:
					got.WriteByte('+')
				case 413:
					got.WriteByte('x')
				default:
					t.Fatalf("got %+v", a)
				}
			}
			if got.String() != c.want {
				t.Fatalf("got %s, want %s", got.String(), c.want)
			}
			if p.Requests(ApplyWrites) != 5 || p.Requests(GetLatestCommit) != 4 || p.Forwarded(GetLatestCommit) != 4 {
				t.Fatalf("requests %d/%d", p.Requests(ApplyWrites), p.Requests(GetLatestCommit))
			}
			p.Disarm()
			if a := do(p, ApplyWrites, 10*time.Second); a.status != 200 {
				t.Fatalf("after Disarm: %+v", a)
			}
		})
	}
}

// An endless body is a valid CAR stream that does not end; Close stops it.
func TestEndlessBody(t *testing.T) {
	b := newBackend(t)
	p := NewFaultProxy(t, b.URL)
	p.Arm(Fault{Method: GetRepo, Kind: EndlessBody, Every: true})
	resp, err := http.Get(p.URL + "/xrpc/" + GetRepo + "?did=did:plc:x")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/vnd.ipld.car" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	const want = 8 << 20
	cr, err := car.NewCarReader(bufio.NewReader(io.LimitReader(resp.Body, want)))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		blk, err := cr.Next()
		if err != nil { // the limit cut the stream, mid-block
			break
		}
		if len(blk.RawData()) != 16<<10 {
			t.Fatalf("block of %d bytes", len(blk.RawData()))
		}
		n++
	}
	if n < want/(16<<10)-2 {
		t.Fatalf("only %d valid blocks in the first %d bytes", n, want)
	}
	if b.received(GetRepo) != 0 {
		t.Fatal("forwarded")
	}
	within(t, "Close during an endless body", p.Close)
	// the stream ended: reading on finishes
	within(t, "reading after Close", func() { io.Copy(io.Discard, resp.Body) })
}

// ---- the oracle's checks, on records made up here ----

const oracleDID = syntax.DID("did:plc:oracleoracleoracleoracle")

func node(rkey, text, sortKey, parent string) Record {
	v := map[string]any{"$type": lexicon.Node, "text": text, "sortKey": sortKey}
	if parent != "" {
		v["parent"] = "at://" + oracleDID.String() + "/" + lexicon.Node + "/" + parent
	}
	return Record{Collection: lexicon.Node, RKey: rkey, Value: v}
}

func note(rkey, text, subjectKey string) Record {
	return Record{Collection: lexicon.Note, RKey: rkey, Value: map[string]any{"$type": lexicon.Note, "text": text,
		"subject": "at://" + oracleDID.String() + "/" + lexicon.Node + "/" + subjectKey}}
}

func TestOracle(t *testing.T) {
	base := []Record{
		node("k1", "A", "a", ""), node("k2", "B", "b", ""), node("k3", "b1", "m", "k2"),
		node("k0", "b0", "m", "k2"), // same sortKey as b1: record key decides
		note("k1", "note A", "k1"),
	}
	want := []Shape{{Text: "A", Note: "note A"}, {Text: "B", Children: []Shape{{Text: "b0"}, {Text: "b1"}}}}
	cases := []struct {
		name     string
		recs     []Record
		problems []string // substrings, one per problem, in order
		diff     string   // substring of DiffShapes(got, want)
	}{
		{"consistent", base, nil, ""},
		{"missing parent", append(slices.Clone(base), node("k9", "lost", "z", "kX")), []string{`detached app.bulleted.node k9 "lost": parent`}, ""},
		{"parent in another repository", append(slices.Clone(base), Record{Collection: lexicon.Node, RKey: "k9",
			Value: map[string]any{"text": "far", "sortKey": "z", "parent": "at://did:plc:other/app.bulleted.node/k1"}}), []string{"not a node of this repository"}, ""},
		{"cycle", append(slices.Clone(base), node("c1", "x", "a", "c2"), node("c2", "y", "a", "c1")), []string{"in a cycle", "in a cycle"}, ""},
		{"note without its node", append(slices.Clone(base), note("k8", "orphan", "k8")), []string{"note k8 apart from its node"}, ""},
		{"note about another node", append(slices.Clone(base), note("k2", "wrong", "k1")), []string{"note k2 apart from its node"}, ""},
		{"duplicate text", append(slices.Clone(base), node("k7", "b1", "n", "k2")), []string{`duplicate "b1" ×2`}, `[2]: unexpected "b1"`},
		{"lost child", append(slices.Clone(base[:3]), base[4]), nil, `/"B"[0]: got "b1", want "b0"`},
		{"lost note", base[:4], nil, `[0] "A": note "", want "note A"`},
		{"order by sortKey", append(slices.Clone(base[1:]), node("k1", "A", "c", ""), note("k1", "note A", "k1")), nil, `[0]: got "B", want "A"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := Outline(oracleDID, c.recs)
			got := tr.CheckConsistent(true)
			if len(got) != len(c.problems) {
				t.Fatalf("problems %q, want %d", got, len(c.problems))
			}
			for i, p := range c.problems {
				if !strings.Contains(got[i], p) {
					t.Fatalf("problem %d: %q, want it to say %q", i, got[i], p)
				}
			}
			d := DiffShapes(tr.Shape(), want)
			if (c.diff == "") != (d == "") || !strings.Contains(d, c.diff) {
				t.Fatalf("diff %q, want %q", d, c.diff)
			}
		})
	}
	if b, n := Size(want); b != 4 || n != 1 {
		t.Fatalf("Size: %d bullets, %d notes", b, n)
	}
}
