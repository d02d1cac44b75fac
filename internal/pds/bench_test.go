package pds_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atclient"
	"golang.org/x/time/rate"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// delayProxy is a reverse proxy to target that adds rtt to every request,
// as a PDS that is not on loopback would, and, if bps > 0, sends responses
// at no more than bps bytes a second.
func delayProxy(b *testing.B, target string, rtt time.Duration, bps int) string {
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	var lim *rate.Limiter
	if bps > 0 {
		lim = rate.NewLimiter(rate.Limit(bps), 32<<10)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(rtt)
		if lim != nil {
			w = &throttled{ResponseWriter: w, lim: lim}
		}
		rp.ServeHTTP(w, r)
	}))
	b.Cleanup(ts.Close)
	return ts.URL
}

type throttled struct {
	http.ResponseWriter
	lim *rate.Limiter
}

func (t *throttled) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), t.lim.Burst())]
		if err := t.lim.WaitN(context.Background(), len(chunk)); err != nil {
			return n, err
		}
		m, err := t.ResponseWriter.Write(chunk)
		n += m
		if err != nil {
			return n, err
		}
		p = p[len(chunk):]
	}
	return n, nil
}

func (t *throttled) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// seeded is an account with a 10,000-bullet outline (100 top-level bullets
// with 99 children each), made once per benchmark run.
var seeded struct {
	a    *pdstest.Account
	repo *pds.Repo
}

func seed(b *testing.B) (*pdstest.Account, *pds.Repo) {
	if seeded.a != nil {
		return seeded.a, seeded.repo
	}
	ctx := context.Background()
	a := pdstest.NewAccount(b, srv)
	r := pdstest.Login(b, srv, a, b.TempDir(), nil)
	e := outline.New(r)
	var top []intent.NewNode
	for i := 0; i < 100; i++ {
		n := intent.NewNode{Text: fmt.Sprintf("Section %d", i)}
		for j := 0; j < 99; j++ {
			n.Children = append(n.Children, intent.NewNode{Text: fmt.Sprintf("Item %d.%d with some words #tag", i, j), Layout: "todo"})
		}
		top = append(top, n)
	}
	start := time.Now()
	out, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return intent.Insert{Pos: outline.Position{}, Nodes: top}.Plan(p) })
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded 10,000 bullets in %d commits, %v", len(out.Commits), time.Since(start))
	// let the PDS settle after 50 commits, so that the first sub-benchmark
	// is not measured against its background work
	if _, err := pds.New(atclient.NewAPIClient(srv.URL), a.DID).SnapshotCAR(ctx); err != nil {
		b.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	seeded.a, seeded.repo = a, r
	return a, r
}

// coldRead reads the seeded outline's tree with a new client of host (public
// reads: no session needed), set up by opt.
func coldRead(b *testing.B, host string, a *pdstest.Account, opt func(*pds.Repo)) *pds.Repo {
	r := pds.New(atclient.NewAPIClient(host), a.DID)
	opt(r)
	t, err := outline.New(r).Tree(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if t.Nodes.Len() != 10000 {
		b.Fatalf("%d nodes", t.Nodes.Len())
	}
	return r
}

// BenchmarkReadOutline10k: a cold read (download + parse + tree) by CAR and
// by listRecords paging, on loopback and through a 20 ms round-trip proxy; a
// warm read (head unchanged); and a read after another client changed one
// bullet (getRepo?since=rev). The proxy is on loopback too, so its CAR rows
// are given both ways: gzip, as from a remote PDS, and uncompressed.
func BenchmarkReadOutline10k(b *testing.B) {
	ctx := context.Background()
	a, writer := seed(b)
	for _, rtt := range []time.Duration{0, 20 * time.Millisecond} {
		host := srv.URL
		if rtt > 0 {
			host = delayProxy(b, srv.URL, rtt, 0)
		}
		modes := []string{"car", "listRecords"}
		if rtt > 0 {
			modes = []string{"car-gzip", "car-identity", "listRecords"}
		}
		for _, mode := range modes {
			b.Run(fmt.Sprintf("cold-%s-rtt%dms", mode, rtt.Milliseconds()), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					r := coldRead(b, host, a, func(r *pds.Repo) {
						r.ListOnly = mode == "listRecords"
						switch mode {
						case "car-gzip":
							r.Compression = pds.CompressGzip
						case "car-identity":
							r.Compression = pds.CompressNone
						}
					})
					b.ReportMetric(float64(r.Stats.CARs.Load()+r.Stats.ListPages.Load()+r.Stats.Heads.Load()), "requests")
				}
			})
		}
		b.Run(fmt.Sprintf("warm-rtt%dms", rtt.Milliseconds()), func(b *testing.B) {
			r := pds.New(atclient.NewAPIClient(host), a.DID)
			e := outline.New(r)
			if _, err := e.Tree(ctx); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := e.Tree(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("changed-rtt%dms", rtt.Milliseconds()), func(b *testing.B) {
			r := pds.New(atclient.NewAPIClient(host), a.DID)
			if rtt > 0 {
				r.Compression = pds.CompressGzip
			}
			e, w := outline.New(r), outline.New(writer)
			t, err := e.Tree(ctx)
			if err != nil {
				b.Fatal(err)
			}
			key := t.Roots.At(0).Children.At(0).Key()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if _, err := w.DoFunc(ctx, false, func(p *outline.Planner) error {
					return intent.Edit{Node: key, Text: ptr(fmt.Sprint("edited ", i))}.Plan(p)
				}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				t, err := e.Tree(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if t.Nodes.Get(key).Str("text") != fmt.Sprint("edited ", i) {
					b.Fatal("the edit is not there")
				}
			}
			b.ReportMetric(float64(r.Stats.CARs.Load()), "full-CARs")
			b.ReportMetric(float64(r.Stats.Diffs.Load())/float64(b.N), "diffs/op")
		})
		// a new process with the cache file of an earlier one, after another
		// client changed one bullet
		b.Run(fmt.Sprintf("restart-rtt%dms", rtt.Milliseconds()), func(b *testing.B) {
			cache := filepath.Join(b.TempDir(), "repo.car")
			open := func() *pds.Repo {
				r := pds.New(atclient.NewAPIClient(host), a.DID)
				r.Cache = cache
				if rtt > 0 {
					r.Compression = pds.CompressGzip
				}
				return r
			}
			t, err := outline.New(open()).Tree(ctx)
			if err != nil {
				b.Fatal(err)
			}
			key := t.Roots.At(1).Children.At(0).Key()
			w := outline.New(writer)
			var cars int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if _, err := w.DoFunc(ctx, false, func(p *outline.Planner) error {
					return intent.Edit{Node: key, Text: ptr(fmt.Sprint("edited ", i))}.Plan(p)
				}); err != nil {
					b.Fatal(err)
				}
				r := open()
				b.StartTimer()
				t, err := outline.New(r).Tree(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if t.Nodes.Len() != 10000 || r.Stats.CacheLoads.Load() != 1 {
					b.Fatalf("%d nodes, %d cache loads", t.Nodes.Len(), r.Stats.CacheLoads.Load())
				}
				cars += r.Stats.CARs.Load()
			}
			b.ReportMetric(float64(cars), "full-CARs")
		})
	}
}

// BenchmarkReadOutline10kBandwidth: the cold CAR read through a 20 ms
// round trip on links of 50 and 200 Mbit/s, gzip against uncompressed (the
// reason a remote PDS is asked for gzip).
func BenchmarkReadOutline10kBandwidth(b *testing.B) {
	a, _ := seed(b)
	for _, mbit := range []int{50, 200} {
		host := delayProxy(b, srv.URL, 20*time.Millisecond, mbit*1_000_000/8)
		for _, c := range []struct {
			name string
			comp pds.Compression
		}{{"gzip", pds.CompressGzip}, {"identity", pds.CompressNone}} {
			b.Run(fmt.Sprintf("cold-car-%s-rtt20ms-%dmbit", c.name, mbit), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					coldRead(b, host, a, func(r *pds.Repo) { r.Compression = c.comp })
				}
			})
		}
	}
}

// BenchmarkMove1000: moving 1,000 bullets to another parent as one plan (5
// commits of 200 updates) against 1,000 single-record commits.
func BenchmarkMove1000(b *testing.B) {
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		r := newRepo(b)
		e := outline.New(r)
		var kids []intent.NewNode
		for j := 0; j < 1000; j++ {
			kids = append(kids, intent.NewNode{Text: fmt.Sprint("item ", j)})
		}
		if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
			return intent.Insert{Pos: outline.Position{}, Nodes: []intent.NewNode{{Text: "from", Children: kids}, {Text: "to"}, {Text: "back"}}}.Plan(p)
		}); err != nil {
			b.Fatal(err)
		}
		t, _ := e.Tree(ctx)
		from, to, back := t.Roots.At(0), t.Roots.At(1).Key(), t.Roots.At(2).Key()
		var refs []string
		for c := range from.Children.Items() {
			refs = append(refs, c.Key())
		}
		start := time.Now()
		out, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
			return intent.Move{Nodes: refs, Pos: outline.Position{Parent: to}}.Plan(p)
		})
		if err != nil {
			b.Fatal(err)
		}
		batched := time.Since(start)
		start = time.Now()
		for _, ref := range refs {
			if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
				return (intent.Move{Nodes: []string{ref}, Pos: outline.Position{Parent: back}}).Plan(p)
			}); err != nil {
				b.Fatal(err)
			}
		}
		single := time.Since(start)
		b.ReportMetric(float64(len(out.Commits)), "batched-commits")
		b.ReportMetric(batched.Seconds(), "batched-s")
		b.ReportMetric(single.Seconds(), "single-s")
	}
}
