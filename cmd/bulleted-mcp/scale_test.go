package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// seedStore makes (once per size, kept under the system temp directory) an
// embedded store holding a generated outline of about n records (bullets
// and their notes: the generator gives about 1.1 records per bullet).
func seedStore(b *testing.B, n int) string {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("bulleted-scale-records-v2-%d", n))
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil {
		return dir
	}
	// made beside it and renamed into place once whole: another test
	// process seeding or reading the same size at once never sees half of it
	final := dir
	dir = fmt.Sprintf("%s.tmp%d", final, os.Getpid())
	os.RemoveAll(dir)
	defer os.RemoveAll(dir)
	l, err := store.OpenLocal(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		l.Close()
		if !b.Failed() {
			if err := os.Rename(dir, final); err != nil {
				if _, serr := os.Stat(filepath.Join(final, "HEAD")); serr != nil {
					b.Fatal(err)
				}
			}
		}
	}()
	did := l.DID().String()
	recs := outlinegen.Generate(n*10/11, 1)
	ws := outlinegen.Writes(recs, did)
	for len(ws) > 0 {
		k := min(len(ws), store.MaxBatch)
		if _, err := l.Apply(context.Background(), "", ws[:k]); err != nil {
			b.Fatal(err)
		}
		ws = ws[k:]
	}
	return final
}

// BenchmarkServeStartFirstRead starts `bulleted-mcp serve` on an embedded
// store of n records, sends initialize and one read_outline, and reports
// the time to that answer and the process's resident memory after it.
// Seeding the large stores takes minutes the first time:
//
//	BULLETED_SCALE=1 go test ./cmd/bulleted-mcp -run '^$' -bench ServeStart -benchtime 3x
func BenchmarkServeStartFirstRead(b *testing.B) {
	if os.Getenv("BULLETED_SCALE") == "" {
		b.Skip("set BULLETED_SCALE=1 (seeds stores of up to 250,000 records)")
	}
	bin := filepath.Join(b.TempDir(), "bulleted-mcp")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	for _, n := range []int{10_000, 100_000, 249_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			dir := seedStore(b, n)
			var rss, settled, peak int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r, s, p := startAndRead(b, bin, dir)
				rss, settled, peak = max(rss, r), max(settled, s), max(peak, p)
			}
			b.ReportMetric(float64(rss)/(1<<20), "RSS-MB")
			b.ReportMetric(float64(settled)/(1<<20), "RSS-2s-MB")
			b.ReportMetric(float64(peak)/(1<<20), "peak-MB")
		})
	}
}

// startAndRead returns the server's resident memory right after its first
// answer, two seconds later (once it returned the memory of the load), and
// its peak.
func startAndRead(b *testing.B, bin, dir string) (int64, int64, int64) {
	cmd := exec.Command(bin, "serve", "--store", dir)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { in.Close(); cmd.Process.Kill(); cmd.Wait() }()
	fmt.Fprintln(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	fmt.Fprintln(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	fmt.Fprintln(in, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_outline","arguments":{}}}`)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	deadline := time.Now().Add(2 * time.Minute)
	for sc.Scan() && time.Now().Before(deadline) {
		var msg struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) == nil && msg.ID == 2 {
			if !strings.Contains(string(msg.Result), "·") {
				b.Fatalf("read_outline answered %.200s", msg.Result)
			}
			b.StopTimer()
			rss := rssOf(cmd.Process.Pid, "VmRSS:")
			time.Sleep(2 * time.Second)
			settled := rssOf(cmd.Process.Pid, "VmRSS:")
			peak := rssOf(cmd.Process.Pid, "VmHWM:")
			b.StartTimer()
			return rss, settled, peak
		}
	}
	b.Fatal("no answer to read_outline")
	return 0, 0, 0
}

// rssOf is a memory figure of pid in bytes (Linux): field "VmRSS:" (the
// resident set) or "VmHWM:" (its peak).
func rssOf(pid int, field string) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}

// scaleSizes are the repository sizes (records) of the write benchmarks: 1k
// and 10k always, 100k and 249k (the app bounds a repository at 250,000)
// with BULLETED_SCALE=1 (seeding takes a minute).
func scaleSizes() []int {
	if os.Getenv("BULLETED_SCALE") == "" {
		return []int{1_000, 10_000}
	}
	return []int{1_000, 10_000, 100_000, 249_000}
}

// scaleEnv is the tool environment of a copy of the seeded store of n
// records (the copy grows as the benchmark writes), warmed by one read.
func scaleEnv(b *testing.B, n int) *tools.Env {
	src := seedStore(b, n)
	dir := b.TempDir()
	if out, err := exec.Command("cp", "-a", src+"/.", dir).CombinedOutput(); err != nil {
		b.Fatalf("cp: %v %s", err, out)
	}
	l, err := store.OpenLocal(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	e, err := newEngine(l, dir)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.Tree(context.Background()); err != nil {
		b.Fatal(err)
	}
	return &tools.Env{Engine: e}
}

// firstSection is the record key of the outline's first top-level bullet.
func firstSection(b *testing.B, env *tools.Env) string {
	tr, err := env.Engine.Tree(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return tr.Roots.At(0).Key()
}

// BenchmarkInsertEmbedded is one insert_after tool call (planned, committed
// to the embedded store with its fsyncs, recorded as an operation, and the
// tree brought to the new commit) on outlines of 1k to 250k records.
func BenchmarkInsertEmbedded(b *testing.B) {
	for _, n := range scaleSizes() {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			env := scaleEnv(b, n)
			parent := firstSection(b, env)
			ctx := context.Background()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				i++
				res, err := callTool(ctx, env, "insert_after", fmt.Sprintf(`{"parent":%q,"position":"first","text":"bench %d"}`, parent, i))
				if err != nil || res.IsError {
					b.Fatalf("%v %v", err, res)
				}
			}
		})
	}
}

// BenchmarkApplyBatchEmbedded is an apply_batch of 50 ops (25 inserts and
// 25 edits of existing bullets, each op planned on the result of the ones
// before it), reported per op.
func BenchmarkApplyBatchEmbedded(b *testing.B) {
	for _, n := range scaleSizes() {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			env := scaleEnv(b, n)
			parent := firstSection(b, env)
			tr, _ := env.Engine.Tree(context.Background())
			var edit []string
			for _, r := range tr.Roots.From(1) {
				for _, it := range outline.Subtree(r) {
					if len(edit) < 25 {
						edit = append(edit, it.Key())
					}
				}
			}
			ctx := context.Background()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				var ops []string
				for j := range 25 {
					i++
					ops = append(ops, fmt.Sprintf(`{"tool":"insert_after","args":{"parent":%q,"position":"last","text":"batch %d"}}`, parent, i))
					ops = append(ops, fmt.Sprintf(`{"tool":"update_node","args":{"node":%q,"text":"edited %d"}}`, edit[j], i))
				}
				res, err := callTool(ctx, env, "apply_batch", `{"ops":[`+strings.Join(ops, ",")+`]}`)
				if err != nil || res.IsError {
					b.Fatalf("%v %+v", err, res.Content)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N*50), "ms/op-in-batch")
		})
	}
}

// BenchmarkOpenFirstRead is, in process, what `serve` does before its first
// answer: open the embedded store of n records, build the tree, read the
// first page (for profiles: -cpuprofile, -memprofile).
func BenchmarkOpenFirstRead(b *testing.B) {
	for _, n := range scaleSizes() {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			dir := seedStore(b, n)
			ctx := context.Background()
			for b.Loop() {
				l, err := store.OpenLocal(dir)
				if err != nil {
					b.Fatal(err)
				}
				e := outline.New(l)
				res, err := callTool(ctx, &tools.Env{Engine: e}, "read_outline", `{}`)
				if err != nil || res.IsError {
					b.Fatalf("%v %+v", err, res)
				}
				l.Close()
			}
		})
	}
}
