package pds

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// BenchmarkReadCARMemory is what a cold read of a whole repository (the
// generated outline of about n records, as getRepo sends it) costs in
// memory, decoded as snapshotCAR decodes it: bytes allocated, the heap's
// peak above where it started (sampled every millisecond), and what the
// kept repository and its snapshot hold once the rest is collected. About
// 10,000 records; 100,000 with BULLETED_SCALE=1; 249,000 too with
// BULLETED_SCALE=2.
//
//	BULLETED_SCALE=1 go test ./internal/pds -run '^$' -bench ReadCARMemory -benchtime 3x
func BenchmarkReadCARMemory(b *testing.B) {
	sizes := []int{10_000}
	switch os.Getenv("BULLETED_SCALE") {
	case "1":
		sizes = append(sizes, 100_000)
	case "2":
		sizes = append(sizes, 100_000, 249_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			car, m := outlineCAR(b, n)
			b.ReportMetric(float64(len(car))/(1<<20), "CAR-MB")
			var alloc, peak, kept uint64
			for b.Loop() {
				alloc, peak, kept = coldReadMemory(b, car, m)
			}
			b.ReportMetric(float64(alloc)/(1<<20), "alloc-MB")
			b.ReportMetric(float64(peak)/(1<<20), "peak-MB")
			b.ReportMetric(float64(kept)/(1<<20), "kept-MB")
		})
	}
}

// outlineCAR is a CAR of a repository holding the generated outline of
// about n records (outlinegen, as the scale benchmarks seed), with the
// model it was made by.
func outlineCAR(b *testing.B, n int) ([]byte, *model) {
	b.Helper()
	m := newModel(b, 1)
	for _, r := range outlinegen.Generate(n*10/11, 1) {
		c, err := cid.Decode(r.Value.CID())
		if err != nil {
			b.Fatal(err)
		}
		blk, _ := blocks.NewBlockWithCid(r.Value.CBOR(), c)
		m.values[c.KeyString()] = blk
		m.state[r.Collection+"/"+r.RKey] = c
	}
	m.commitState()
	bs := m.sent("")
	var buf bytes.Buffer
	list := make([]blocks.Block, 0, len(bs))
	for _, blk := range bs {
		list = append(list, blk)
	}
	if err := store.WriteCAR(&buf, m.commit, list); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes(), m
}

// coldReadMemory reads car as snapshotCAR does (readBlocks from the
// network's worker count, buildCAR, the snapshot handed out) and measures
// it.
func coldReadMemory(b *testing.B, car []byte, m *model) (alloc, peak, kept uint64) {
	b.StopTimer()
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(sample)
	base, allocs := sample[0].Value.Uint64(), sample[1].Value.Uint64()
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		var top uint64
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			top = max(top, s[0].Value.Uint64())
			select {
			case <-stop:
				done <- top
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	b.StartTimer()
	f, err := readBlocks(context.Background(), bytes.NewReader(car), runtime.GOMAXPROCS(0)-1, false)
	if err != nil {
		b.Fatal(err)
	}
	c, err := buildCAR(f, m.did)
	if err != nil {
		b.Fatal(err)
	}
	s, _, _ := c.snapshot(m.did)
	b.StopTimer()
	close(stop)
	top := <-done
	metrics.Read(sample)
	alloc = sample[1].Value.Uint64() - allocs
	runtime.GC()
	metrics.Read(sample)
	kept = sample[0].Value.Uint64() - base
	if len(s.Records) != len(m.state) {
		b.Fatalf("%d records read, %d in the repository", len(s.Records), len(m.state))
	}
	runtime.KeepAlive(c)
	runtime.KeepAlive(s)
	b.StartTimer()
	return alloc, top - base, kept
}
