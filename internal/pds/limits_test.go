package pds_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"
	car "github.com/ipld/go-car"
	carutil "github.com/ipld/go-car/util"
	"github.com/multiformats/go-multihash"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

const someDID = syntax.DID("did:plc:aaaaaaaaaaaaaaaaaaaaaaaa")

// neverAnswering accepts requests and answers none (until the client gives
// up); it counts them. first, if set, is written and flushed first.
func neverAnswering(t *testing.T, first []byte) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	stop := make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if first != nil {
			w.Write(first)
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() { close(stop); s.Close() })
	return s, &n
}

// returns fails the test if f does not return within a minute: a guard
// against the test hanging, not a timing assertion.
func returns[T any](t *testing.T, f func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() { v, err := f(); done <- result{v, err} }()
	select {
	case r := <-done:
		return r.v, r.err
	case <-time.After(time.Minute):
		t.Fatal("the read hung")
		panic("unreachable")
	}
}

func TestCARDeadlines(t *testing.T) {
	silent, _ := neverAnswering(t, nil)
	stalled, _ := neverAnswering(t, []byte{0x3a, 0xa2}) // the start of a CAR header
	cases := []struct {
		name   string
		host   string
		limits pds.Limits
		says   string
	}{
		{"no answer", silent.URL, pds.Limits{CARTimeout: 300 * time.Millisecond}, "not done within 300ms"},
		{"stalled body", stalled.URL, pds.Limits{CARTimeout: time.Hour, Stall: 300 * time.Millisecond}, "no data for 300ms"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := pds.New(pds.NewAPIClient(c.host, nil), someDID)
			r.Limits = c.limits
			_, err := returns(t, func() (*store.Snapshot, error) { return r.Snapshot(context.Background()) })
			if !errors.Is(err, pds.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("got %v, want ErrTimeout saying %q", err, c.says)
			}
		})
	}
}

// endlessCAR is a valid CAR that never ends (until give-up bytes were
// read: the old code's read then fails otherwise than with ErrTooLarge).
type endlessCAR struct {
	read   atomic.Int64
	giveUp int64
}

func (e *endlessCAR) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	go func() {
		data := make([]byte, 16<<10)
		block := func() (cid.Cid, []byte) {
			rand.Read(data)
			c, _ := cid.NewPrefixV1(cid.Raw, multihash.SHA2_256).Sum(data)
			return c, data
		}
		root, _ := block()
		if err := car.WriteHeader(&car.CarHeader{Roots: []cid.Cid{root}, Version: 1}, pw); err != nil {
			return
		}
		for {
			c, d := block()
			if err := carutil.LdWrite(pw, c.Bytes(), d); err != nil {
				return
			}
		}
	}()
	body := &countingBody{pr: pr, e: e}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/vnd.ipld.car"}}, Body: body, Request: req}, nil
}

type countingBody struct {
	pr *io.PipeReader
	e  *endlessCAR
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.e.read.Load() >= b.e.giveUp {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := b.pr.Read(p)
	b.e.read.Add(int64(n))
	return n, err
}

func (b *countingBody) Close() error { return b.pr.Close() }

func TestEndlessCAR(t *testing.T) {
	const max = 1 << 20
	e := &endlessCAR{giveUp: 64 << 20}
	r := pds.New(pds.NewAPIClient("http://pds.invalid", &http.Client{Transport: e}), someDID)
	r.Limits.MaxCAR = max
	r.Compression = pds.CompressNone
	_, err := returns(t, func() (*store.Snapshot, error) { return r.Snapshot(context.Background()) })
	if !errors.Is(err, pds.ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	if got := e.read.Load(); got > max+1 {
		t.Fatalf("%d bytes read from the body, the bound is %d", got, max)
	}
}

// pointing is an identity directory that puts every DID on pdsURL.
func pointing(pdsURL string, dids ...syntax.DID) identity.Directory {
	d := identity.NewMockDirectory()
	for i, did := range dids {
		d.Insert(identity.Identity{DID: did, Handle: syntax.Handle(fmt.Sprintf("h%d.test", i)),
			Services: map[string]identity.ServiceEndpoint{"atproto_pds": {Type: "AtprotoPersonalDataServer", URL: pdsURL}}})
	}
	return d
}

func TestOthersHangingPDS(t *testing.T) {
	hang, requests := neverAnswering(t, nil)
	o := &pds.Others{Resolver: &pds.Resolver{Directory: pointing(hang.URL, someDID)}, Timeout: 300 * time.Millisecond}
	_, err := returns(t, func() (*store.Snapshot, error) { return o.Snapshot(context.Background(), someDID.String()) })
	if !errors.Is(err, pds.ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
	// a second read (another mirror on the same page) does not wait again
	_, err2 := returns(t, func() (*store.Snapshot, error) { return o.Snapshot(context.Background(), someDID.String()) })
	if !errors.Is(err2, pds.ErrTimeout) || !strings.Contains(err2.Error(), "not tried again") {
		t.Fatalf("second read: got %v, want the remembered timeout", err2)
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("the hanging PDS got %d requests, want 1", n)
	}
}

// The repositories of other identities are kept within MaxBlocks: reading a
// second one drops the first when both do not fit; what is read is the
// repository's records either way.
func TestOthersBound(t *testing.T) {
	ctx := context.Background()
	var dids []syntax.DID
	want := map[syntax.DID][]string{}
	for i := range 2 {
		a := pdstest.NewAccount(t, srv)
		r := pdstest.Login(t, srv, a, t.TempDir(), nil)
		s, err := r.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ws []store.Write
		for j := range 20 + 10*i {
			rkey := fmt.Sprintf("3k%011d", j)
			ws = append(ws, store.Write{Op: store.Create, Collection: lexicon.Node, RKey: rkey,
				Value: map[string]any{"$type": lexicon.Node, "text": fmt.Sprintf("%d/%d", i, j), "sortKey": fmt.Sprintf("a%03d", j), "createdAt": "2026-07-30T09:30:00.000Z"}})
			want[a.DID] = append(want[a.DID], rkey)
		}
		if _, err := r.Apply(ctx, s.Commit, ws); err != nil {
			t.Fatal(err)
		}
		dids = append(dids, a.DID)
	}
	read := func(o *pds.Others, did syntax.DID) {
		t.Helper()
		s, err := o.Snapshot(ctx, did.String())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, rec := range s.Records {
			if rec.Collection == lexicon.Node {
				got = append(got, rec.RKey)
			}
		}
		if !slices.Equal(got, want[did]) || s.DID != did {
			t.Fatalf("read %s: %v, want %v", did, got, want[did])
		}
	}
	dir := pointing(srv.URL, dids...)

	// room for both
	o := &pds.Others{Resolver: &pds.Resolver{Directory: dir}}
	read(o, dids[0])
	_, first := o.Kept()
	read(o, dids[1])
	repos, both := o.Kept()
	if repos != 2 || both <= first {
		t.Fatalf("unbounded: %d repositories, %d blocks kept (first alone %d)", repos, both, first)
	}

	// room for one: the least recently read goes
	o = &pds.Others{Resolver: &pds.Resolver{Directory: dir}, MaxBlocks: both - 1}
	read(o, dids[0])
	read(o, dids[1])
	repos, blocks := o.Kept()
	if repos != 1 || blocks != both-first {
		t.Fatalf("bounded to %d blocks: %d repositories, %d blocks kept; want 1, %d", both-1, repos, blocks, both-first)
	}
	read(o, dids[0]) // read again after being dropped
	if repos, blocks := o.Kept(); repos != 1 || blocks != first {
		t.Fatalf("after reading the first again: %d repositories, %d blocks; want 1, %d", repos, blocks, first)
	}
}
