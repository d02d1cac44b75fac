package hosted

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// opsMetrics are an instance's figures in the Prometheus text format, served
// on /metrics behind Config.MetricsToken: what the operator's log says
// (users dropped and reopened, writes without their turn, database
// outages) as counters, and each tool call's time by tool and kind.
type opsMetrics struct {
	reg *prometheus.Registry

	unavailable   prometheus.Counter // 503s: the database did not answer
	budgetRefused prometheus.Counter
	adopted       prometheus.Counter // MCP sessions served here that another instance started
	plansApplied  prometheus.Counter // plans (dry runs, confirmations) taken to be applied
	addrRefused   prometheus.Counter // requests refused past the per-address cap

	calls *prometheus.HistogramVec
}

func newMetrics(s *Server) *opsMetrics {
	m := &opsMetrics{reg: prometheus.NewRegistry()}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "bulleted", Subsystem: "hosted", Name: name, Help: help})
		m.reg.MustRegister(c)
		return c
	}
	m.unavailable = counter("unavailable_total", "Requests answered 503 because the database did not answer.")
	m.budgetRefused = counter("budget_refused_total", "Writes refused because they did not fit in the user's write budget.")
	m.adopted = counter("sessions_adopted_total", "MCP sessions served on this instance from the initialize request another instance (or an earlier process) kept in the database.")
	m.plansApplied = counter("plans_applied_total", "Plans (a dry run's plan=ID, a confirmation's) taken from the database to be applied.")
	m.addrRefused = counter("address_cap_refused_total", "Requests refused 429 because their client address had too many under way (Config.PerAddress).")
	m.calls = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "bulleted", Subsystem: "hosted", Name: "call_seconds",
		Help:    "Tool calls' time from their user's engine acquired to the call's end, by tool and kind (read or write).",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"tool", "kind"})
	m.reg.MustRegister(m.calls, &stateCollector{s: s}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observeCall records one tool call's time.
func (m *opsMetrics) observeCall(tool string, readOnly bool, d time.Duration) {
	kind := "write"
	if readOnly {
		kind = "read"
	}
	m.calls.WithLabelValues(tool, kind).Observe(d.Seconds())
}

// stateCollector reads the instance's own counters at each scrape (the
// memory figures under one lock).
type stateCollector struct{ s *Server }

func desc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("bulleted_hosted_"+name, help, nil, nil)
}

var (
	dOpens       = desc("user_opens_total", "Users' engines opened on this instance (a first call, or after one was dropped).")
	dReopens     = desc("user_reopens_total", "Of the opens, those from an existing read cache: a user dropped and needed again (thrashing when it grows with the calls).")
	dEvictSize   = desc("user_evictions_size_total", "Users' engines dropped to fit the memory budget.")
	dEvictIdle   = desc("user_evictions_idle_total", "Users' engines dropped after the idle time.")
	dOversize    = desc("user_oversize_total", "Users found bigger than the whole users' budget.")
	dLoadsBeside = desc("user_loads_beside_total", "Users read beside another after waiting for it.")
	dUsers       = desc("users", "Users' engines open on this instance.")
	dInFlight    = desc("users_in_flight", "Users with a call under way.")
	dBytes       = desc("user_bytes", "The open users' measured bytes.")
	dBudget      = desc("user_budget_bytes", "The users' share of the memory budget (0: none).")
	dStale       = desc("stale_batches_total", "Batches the PDS refused for their swapCommit (another writer got there first).")
	dBeside      = desc("writes_without_turn_total", "Writes that went ahead without their user's turn across instances (the lock was not had, or every lock slot was taken).")
	dRefreshes   = desc("upstream_refreshes_total", "Upstream (PDS) OAuth sessions refreshed by this process.")
	dForgotten   = desc("sessions_forgotten_total", "MCP sessions this instance forgot, unused the longest, to keep at most server.MaxSessions known here (each adopted again at its next request).")
	dFollowed    = desc("followed_users", "Users whose PDS commit stream this instance follows (RunFollowing).")
	dStreamsUp   = desc("streams_up", "PDS hosts whose commit stream connection is up.")
	dStreams     = desc("streams", "PDS hosts whose commit stream this instance follows (up or reconnecting).")
	dNotices     = desc("commit_notices_total", "Other instances' commit notices of users held here (NOTIFY).")
	dSyncMissed  = desc("sync_missed_total", "Calls that could not make sure, within 250 ms, that this instance had heard the other instances' commit notices sent before them.")
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dOpens, dReopens, dEvictSize, dEvictIdle, dOversize, dLoadsBeside, dUsers, dInFlight, dBytes, dBudget, dStale, dBeside, dRefreshes, dForgotten, dFollowed, dStreamsUp, dStreams, dNotices, dSyncMissed} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Memory()
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	counter(dOpens, st.Opens)
	counter(dReopens, st.Reopens)
	counter(dEvictSize, st.EvictedSize)
	counter(dEvictIdle, st.EvictedIdle)
	counter(dOversize, st.Oversize)
	counter(dLoadsBeside, st.LoadsBeside)
	gauge(dUsers, int64(st.Users))
	gauge(dInFlight, int64(st.InFlight))
	gauge(dBytes, st.Bytes)
	gauge(dBudget, st.Budget)
	counter(dStale, c.s.refused.Load())
	counter(dBeside, c.s.writeQueue.beside.Load())
	counter(dRefreshes, Refreshes.Load())
	counter(dForgotten, c.s.sessions.forgotten.Load())
	followed, up, streams := c.s.followState()
	gauge(dFollowed, int64(followed))
	gauge(dStreamsUp, int64(up))
	gauge(dStreams, int64(streams))
	counter(dNotices, c.s.notices.Load())
	counter(dSyncMissed, c.s.syncMissed.Load())
}

// serveMetrics answers /metrics: the Prometheus text format to a request
// bearing Config.MetricsToken; without a token configured, 404.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	tok := s.cfg.MetricsToken
	if tok == "" {
		http.NotFound(w, r)
		return
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(tok)) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
		http.Error(w, "the metrics need the operator's bearer token (--metrics-token)", http.StatusUnauthorized)
		return
	}
	promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

// thrashMark is what the last thrash check saw.
type thrashMark struct{ calls, reopens, evicted int64 }

// thrashCheck says when, since the last check, users were dropped for the
// budget and reopened from their read cache for more than a fifth of the
// calls (at least 10): the budget is below the working set, and calls pay
// a reopen ("" otherwise).
func (s *Server) thrashCheck(last *thrashMark, since time.Duration) string {
	st := s.Memory()
	now := thrashMark{calls: s.calls.Load(), reopens: st.Reopens, evicted: st.EvictedSize}
	d := thrashMark{calls: now.calls - last.calls, reopens: now.reopens - last.reopens, evicted: now.evicted - last.evicted}
	*last = now
	if d.reopens < 10 || d.evicted == 0 || d.reopens*5 < d.calls {
		return ""
	}
	return fmt.Sprintf("thrashing: in the last %s, %d users reopened from their read cache and %d dropped for the memory budget in %d calls (%s for %d open users); each reopen costs its call a read: raise --memory or add instances",
		since.Round(time.Second), d.reopens, d.evicted, d.calls, FormatBytes(st.Budget), st.Users)
}

// RunThrashWatch checks for thrashing every so often (every: one minute
// when zero) until ctx ends, and says it with logf (also in /metrics:
// bulleted_hosted_user_reopens_total against the call counts).
func (s *Server) RunThrashWatch(ctx context.Context, every time.Duration, logf func(format string, args ...any)) {
	if every <= 0 {
		every = time.Minute
	}
	var last thrashMark
	s.thrashCheck(&last, every)
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			if msg := s.thrashCheck(&last, every); msg != "" {
				logf("%s", msg)
			}
		}
	}
}
