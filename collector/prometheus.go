package collector

// Prometheus metrics of the collector, exported through
// CollectorOptions.Registerer (blanket serve and blanket collector serve
// them at GET /metrics on the operator's listener). They count batches and
// reports by outcome, and time ingests and estimates. Nothing in them is
// about a sender; every label takes its values from a fixed set or from
// the plans' pool names.
//
// The counters are the collector's atomics, read at scrape time: the JSON
// API's IngestStats sums the same ones (one count, two views), this
// process's since it started. The stored gauges read the store every
// replica shares (stored.go), the same on every replica: the cluster's
// figures. Only the latency histograms and the calibration time are kept
// in client_golang's own types.

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// scrapeTimeout bounds the store queries of one scrape.
const scrapeTimeout = 5 * time.Second

// latencyBuckets are the buckets of the latency histograms: 1 ms to about
// 6 minutes, by factors of 2.5 (opening a batch of a million reports takes
// minutes).
var latencyBuckets = prometheus.ExponentialBuckets(0.001, 2.5, 15)

// collectorMetrics are a collector's Prometheus metrics: a collector
// reading its batch and report counters at scrape time, the ingest and
// estimate latencies, and the plan's calibration.
type collectorMetrics struct {
	c *Collector

	ingestSeconds   prometheus.Histogram
	estimateSeconds prometheus.Histogram
	// calibration is how long OpenCollector calibrated the plan (0 when
	// it came calibrated or a stored calibration was reused).
	calibration prometheus.Gauge

	batches, reports, planInfo *prometheus.Desc
	heldBatches, heldReports   *prometheus.Desc
	keyDeleted, reportKeys     *prometheus.Desc
	// storedBatches and storedReports are the shared store's (stored.go):
	// the same on every replica.
	storedBatches, storedReports *prometheus.Desc
}

func newCollectorMetrics(c *Collector) *collectorMetrics {
	return &collectorMetrics{
		c: c,
		ingestSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "blanket", Subsystem: "collector", Name: "ingest_duration_seconds",
			Help:    "Time to ingest one batch: open its reports, accumulate, compute its guarantee and store.",
			Buckets: latencyBuckets,
		}),
		estimateSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "blanket", Subsystem: "collector", Name: "estimate_duration_seconds",
			Help:    "Time to answer GET /v1/metrics/{name}: estimates of every period and, unless ?horizon=0, the horizon's composition.",
			Buckets: latencyBuckets,
		}),
		calibration: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "blanket", Subsystem: "collector", Name: "calibration_duration_seconds",
			Help: "Time the collector took to calibrate its plan at start (0 when the plan came calibrated or a stored calibration was reused).",
		}),
		batches:  prometheus.NewDesc("blanket_collector_batches_total", "Batches posted (POST /v1/batches) by result: ingested, duplicate (acknowledged, not counted again), bad (unreadable, too large or undecodable), refused (422), unauthorized (401), failed (500, retried by the shuffler).", []string{"result"}, nil),
		reports:  prometheus.NewDesc("blanket_collector_reports_total", "Reports of ingested batches by pool (a metric with separate travel, the plan's pool with joint or parallel; other: a pool of no current plan) and result: valid (counted), malformed (dropped) or draw (the shuffler's blanket draws of a plan's floor, taken out of the estimates).", []string{"pool", "result"}, nil),
		planInfo: prometheus.NewDesc("blanket_collector_plan_info", "The plan epoch the collector publishes (value 1).", []string{"epoch"}, nil),
		heldBatches: prometheus.NewDesc("blanket_collector_batches_held_total",
			"Ingested batches with fewer than n_min valid reports of an epoch: stored and counted, their reports held out of every estimate until later batches of the same pool, epoch and period bring them to n_min.", nil, nil),
		heldReports: prometheus.NewDesc("blanket_collector_reports_held_total",
			"Valid reports of ingested batches held out of every estimate at ingest (part of result=\"valid\" of blanket_collector_reports_total), by pool.", []string{"pool"}, nil),
		keyDeleted: prometheus.NewDesc("blanket_collector_reports_key_deleted_total",
			"Reports of batches of a period whose report key was deleted: they came later than the plans' grace and the key slack allow, cannot be opened and are counted malformed.", nil, nil),
		storedBatches: prometheus.NewDesc("blanket_collector_stored_batches",
			"Batches the store every replica shares holds, by reporting period (its start, RFC 3339), for the periods of the plan's horizon ending now: the same on every replica, where blanket_collector_batches_total counts this process's since it started.", []string{"period"}, nil),
		storedReports: prometheus.NewDesc("blanket_collector_stored_reports",
			"Reports of those batches, by reporting period and result: valid or malformed (summed over metrics: a message of joint or parallel travel counts once per metric it carries).", []string{"period", "result"}, nil),
		reportKeys: prometheus.NewDesc("blanket_collector_report_keys",
			"The collector's report keys by state: pending (published, not used yet), active, retired (still opening the reports of their periods), deleted (private half erased).", []string{"state"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *collectorMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.batches
	ch <- m.reports
	ch <- m.planInfo
	ch <- m.heldBatches
	ch <- m.heldReports
	ch <- m.keyDeleted
	ch <- m.reportKeys
	ch <- m.storedBatches
	ch <- m.storedReports
	m.ingestSeconds.Describe(ch)
	m.estimateSeconds.Describe(ch)
	m.calibration.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *collectorMetrics) Collect(ch chan<- prometheus.Metric) {
	c := &m.c.c
	for _, b := range []struct {
		v      int64
		result string
	}{
		{c.batches.Load(), "ingested"}, {c.duplicates.Load(), "duplicate"}, {c.bad.Load(), "bad"},
		{c.refused.Load(), "refused"}, {c.unauthorized.Load(), "unauthorized"}, {c.failed.Load(), "failed"},
	} {
		ch <- prometheus.MustNewConstMetric(m.batches, prometheus.CounterValue, float64(b.v), b.result)
	}
	ch <- prometheus.MustNewConstMetric(m.heldBatches, prometheus.CounterValue, float64(c.held.Load()))
	c.eachPool(func(pool string, rc *reportCounts) {
		ch <- prometheus.MustNewConstMetric(m.reports, prometheus.CounterValue, float64(rc.valid.Load()), pool, "valid")
		ch <- prometheus.MustNewConstMetric(m.reports, prometheus.CounterValue, float64(rc.malformed.Load()), pool, "malformed")
		if d := rc.draws.Load(); d > 0 {
			ch <- prometheus.MustNewConstMetric(m.reports, prometheus.CounterValue, float64(d), pool, "draw")
		}
		ch <- prometheus.MustNewConstMetric(m.heldReports, prometheus.CounterValue, float64(rc.held.Load()), pool)
	})
	ch <- prometheus.MustNewConstMetric(m.planInfo, prometheus.GaugeValue, 1, m.c.epoch)
	ch <- prometheus.MustNewConstMetric(m.keyDeleted, prometheus.CounterValue, float64(c.keyDeleted.Load()))
	states := map[string]int{KeyPending: 0, KeyActive: 0, KeyRetired: 0, KeyDeleted: 0}
	if ring := m.c.keys.held(); ring != nil {
		now := m.c.o.Now().Unix()
		for i := range ring.keys {
			states[ring.state(i, now, m.c.retention)]++
		}
	}
	for state, n := range states {
		ch <- prometheus.MustNewConstMetric(m.reportKeys, prometheus.GaugeValue, float64(n), state)
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	if s, err := m.c.Stored(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(m.storedBatches, err)
	} else {
		for _, p := range m.c.recentStored(s) {
			at := p.Start.Format(time.RFC3339)
			ch <- prometheus.MustNewConstMetric(m.storedBatches, prometheus.GaugeValue, float64(p.Batches), at)
			ch <- prometheus.MustNewConstMetric(m.storedReports, prometheus.GaugeValue, float64(p.Reports), at, "valid")
			ch <- prometheus.MustNewConstMetric(m.storedReports, prometheus.GaugeValue, float64(p.Malformed), at, "malformed")
		}
	}
	m.ingestSeconds.Collect(ch)
	m.estimateSeconds.Collect(ch)
	m.calibration.Collect(ch)
}

// pluginMetrics exports the restarts of the plugin processes a Plugins
// opened.
type pluginMetrics struct {
	p        *Plugins
	restarts *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (m pluginMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.restarts }

// Collect implements prometheus.Collector.
func (m pluginMetrics) Collect(ch chan<- prometheus.Metric) {
	for name, n := range m.p.restarts() {
		ch <- prometheus.MustNewConstMetric(m.restarts, prometheus.CounterValue, float64(n), name)
	}
}

// Collector returns a prometheus.Collector of blanket_plugin_restarts_total
// {plugin}: the plugin processes started to replace one that exited, hung
// or failed, per plugin name (built-ins run in process and never restart).
// Register it with the registry that serves GET /metrics.
func (p *Plugins) Collector() prometheus.Collector {
	return pluginMetrics{p: p, restarts: prometheus.NewDesc("blanket_plugin_restarts_total",
		"Plugin processes started to replace one that exited, hung past the call timeout or failed, per plugin.", []string{"plugin"}, nil)}
}
