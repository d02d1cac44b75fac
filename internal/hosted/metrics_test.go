package hosted

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mark3labs/mcp-go/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads in's /metrics with token and parses the text format.
func scrape(t testing.TB, in *instance, token string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	req, _ := http.NewRequest("GET", in.URL+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := testClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return resp.StatusCode, nil
	}
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the metrics do not parse: %v", err)
	}
	return 200, fams
}

// value is the sum of family name's samples whose labels include want
// (counters, gauges; histograms: their sample count).
func value(fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
	var v float64
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(want); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == want[i] && l.GetValue() == want[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			v += m.Counter.GetValue()
		case m.Gauge != nil:
			v += m.Gauge.GetValue()
		case m.Histogram != nil:
			v += float64(m.Histogram.GetSampleCount())
		}
	}
	return v
}

// TestMetrics: /metrics serves the Prometheus text format to the
// operator's token only (401 without it, 404 when no token is set), and
// its counters move with the calls: a session adopted by the other
// instance behind a balancer, calls timed by tool and kind, a plan
// applied, a write refused for the budget, a database outage's 503.
func TestMetrics(t *testing.T) {
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	const token = "metrics-secret"
	limit := 9 // points: three single inserts
	a := e.start(t, func(c *Config) { c.MetricsToken = token; c.HourLimit = limit })
	b := e.start(t, func(c *Config) { c.MetricsToken = token; c.HourLimit = limit; c.PublicURL = a.public })
	none := e.start(t, nil)
	if st, _ := scrape(t, none, ""); st != http.StatusNotFound {
		t.Fatalf("/metrics without a configured token: %d, want 404", st)
	}
	if st, _ := scrape(t, a, ""); st != http.StatusUnauthorized {
		t.Fatalf("/metrics without the token: %d, want 401", st)
	}
	if st, _ := scrape(t, a, "wrong"); st != http.StatusUnauthorized {
		t.Fatalf("/metrics with a wrong token: %d, want 401", st)
	}
	_, before := scrape(t, a, token)
	for _, name := range []string{"bulleted_hosted_sessions_adopted_total", "bulleted_hosted_plans_applied_total", "bulleted_hosted_budget_refused_total",
		"bulleted_hosted_unavailable_total", "bulleted_hosted_user_reopens_total", "bulleted_hosted_writes_without_turn_total", "bulleted_hosted_stale_batches_total"} {
		if value(before, name) != 0 {
			t.Fatalf("%s is %v before any call, want 0", name, value(before, name))
		}
	}

	u := newAccount(t, p, fmt.Sprintf("met%d", time.Now().UnixNano()%1e6))
	tok, _ := signIn(t, a, registerClient(t, a), u, "")
	base, _ := roundRobin(t, a, b)
	c := legacyClient(t, base, tok, mcp.ProtocolVersion20251125, mcp.ClientCapabilities{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := call(ctx, c, "insert_after", map[string]any{"text": "planned", "dry_run": true})
	if err != nil || res.IsError {
		t.Fatalf("dry run: %v %s", err, resultText(res))
	}
	sc, _ := res.StructuredContent.(map[string]any)
	plan, _ := sc["plan"].(string)
	if plan == "" {
		t.Fatalf("no plan id: %.300s", resultText(res))
	}
	if res, err := call(ctx, c, "insert_after", map[string]any{"text": "planned", "plan": plan}); err != nil || res.IsError {
		t.Fatalf("plan applied: %v %s", err, resultText(res))
	}
	refused := false
	for i := range 6 {
		res, err := call(ctx, c, "insert_after", map[string]any{"text": fmt.Sprintf("m%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			if errorKind(res) != "budget" {
				t.Fatalf("insert %d: %s", i, resultText(res))
			}
			refused = true
			break
		}
	}
	if !refused {
		t.Fatalf("no insert refused for the budget of %d points", limit)
	}
	if res, err := call(ctx, c, "read_outline", nil); err != nil || res.IsError {
		t.Fatalf("read: %v %s", err, resultText(res))
	}

	sum := func(name string, labels ...string) float64 {
		_, fa := scrape(t, a, token)
		_, fb := scrape(t, b, token)
		return value(fa, name, labels...) + value(fb, name, labels...)
	}
	for _, c := range []struct {
		name   string
		labels []string
		least  float64
	}{
		{"bulleted_hosted_sessions_adopted_total", nil, 1},
		{"bulleted_hosted_plans_applied_total", nil, 1},
		{"bulleted_hosted_budget_refused_total", nil, 1},
		{"bulleted_hosted_call_seconds", []string{"tool", "insert_after", "kind", "write"}, 4},
		{"bulleted_hosted_call_seconds", []string{"tool", "read_outline", "kind", "read"}, 1},
		{"bulleted_hosted_user_opens_total", nil, 2},
	} {
		if got := sum(c.name, c.labels...); got < c.least {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, got, c.least)
		}
	}
	// a database outage: the bearer check cannot read the token
	dead, err := pgxpool.New(context.Background(), "postgres://u:pw@127.0.0.1:1/db?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dead.Close)
	a.Server.db = dead
	if st, _ := mcpStatus(t, a, tok, ""); st != http.StatusServiceUnavailable {
		t.Fatalf("with the database closed: %d, want 503", st)
	}
	_, fa := scrape(t, a, token)
	if got := value(fa, "bulleted_hosted_unavailable_total"); got < 1 {
		t.Errorf("bulleted_hosted_unavailable_total = %v after a 503", got)
	}
	if !strings.Contains(fmt.Sprint(fa["process_resident_memory_bytes"]), "gauge") {
		t.Errorf("no process_resident_memory_bytes")
	}
}

// TestThrashSaid: users dropped for the budget and reopened for more than
// a fifth of the calls since the last check is said; fewer is not.
func TestThrashSaid(t *testing.T) {
	s := &Server{users: map[string]*user{}}
	var last thrashMark
	if msg := s.thrashCheck(&last, time.Minute); msg != "" {
		t.Fatalf("said %q with nothing done", msg)
	}
	s.calls.Add(100)
	s.mem.stats.Reopens, s.mem.stats.EvictedSize = 10, 10 // a tenth: not yet
	if msg := s.thrashCheck(&last, time.Minute); msg != "" {
		t.Fatalf("said %q for 10 reopens in 100 calls", msg)
	}
	s.calls.Add(100)
	s.mem.stats.Reopens, s.mem.stats.EvictedSize = 60, 60
	msg := s.thrashCheck(&last, time.Minute)
	if !strings.Contains(msg, "thrashing") || !strings.Contains(msg, "50 users reopened") || !strings.Contains(msg, "in 100 calls") {
		t.Fatalf("said %q for 50 reopens in 100 calls", msg)
	}
}
