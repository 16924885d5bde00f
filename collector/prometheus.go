package collector

// Prometheus metrics of the two roles, exported through
// ShufflerOptions.Registerer and CollectorOptions.Registerer (blanket
// serve, shuffler and collector serve them at GET /metrics). They count
// uploads, envelopes, batches and reports by outcome, and time uploads,
// ingests and estimates. Nothing in them is about a sender: no address, no
// report id, no time of one report; every label takes its values from a
// fixed set (results, reasons) or from the plans' pool names.
//
// The counters are the roles' atomics, read at scrape time: the JSON API's
// ShufflerStats and IngestStats sum the same ones (one count, two views).
// Only the latency histograms and the calibration time are kept in
// client_golang's own types.

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// rejectReason is why the shuffler refused an envelope.
type rejectReason int

const (
	rejectUnknownPool   rejectReason = iota // not a pool of a known plan, or a malformed key
	rejectNoPeriod                          // no reporting period (an SDK from before periods)
	rejectPeriodLength                      // a period length no known plan has
	rejectLate                              // its period's grace has passed
	rejectEarly                             // its period starts more than a period ahead
	rejectTooManyEpochs                     // the pool holds MaxEpochsPerPool epochs already
	rejectSuite                             // an unsupported HPKE suite
	rejectShort                             // sealed bytes shorter than MinSealedLen
	numRejectReasons
)

// rejectReasonNames are the reason label values, by rejectReason.
var rejectReasonNames = [numRejectReasons]string{
	"unknown_pool", "no_period", "unknown_period_length", "late", "early",
	"too_many_epochs", "unsupported_suite", "too_short",
}

// reasonOf classifies an error of Shuffler.accepts.
func reasonOf(err error) rejectReason {
	switch {
	case errors.Is(err, errLate):
		return rejectLate
	case errors.Is(err, errNoPeriod):
		return rejectNoPeriod
	case errors.Is(err, errEarly):
		return rejectEarly
	case errors.Is(err, errPeriodLength):
		return rejectPeriodLength
	}
	return rejectUnknownPool
}

// scrapeTimeout bounds the database queries of one scrape.
const scrapeTimeout = 5 * time.Second

// latencyBuckets are the buckets of the latency histograms: 1 ms to about
// 6 minutes, by factors of 2.5 (opening a batch of a million reports takes
// minutes).
var latencyBuckets = prometheus.ExponentialBuckets(0.001, 2.5, 15)

// shufflerMetrics are a shuffler's Prometheus metrics: a collector reading
// its counters and pools at scrape time, and the upload latency.
type shufflerMetrics struct {
	s             *Shuffler
	uploadSeconds prometheus.Histogram

	uploads, envelopes, rejected                       *prometheus.Desc
	released, reportsReleased, sends, acked, sendFails *prometheus.Desc
	expired, poolReports, poolMin, outgoing            *prometheus.Desc
}

func newShufflerMetrics(s *Shuffler) *shufflerMetrics {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("blanket_shuffler_"+name, help, labels, nil)
	}
	return &shufflerMetrics{
		s: s,
		uploadSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "blanket", Subsystem: "shuffler", Name: "upload_duration_seconds",
			Help:    "Time to answer an upload (POST /v1/reports), its durable commit included.",
			Buckets: latencyBuckets,
		}),
		uploads:         d("uploads_total", "Uploads (POST /v1/reports) by result: accepted (202), bad_request, too_large, rate_limited, unavailable (503), canceled (the sender left before the answer).", "result"),
		envelopes:       d("envelopes_total", "Envelopes committed to a pool (accepted) or found there already (duplicate), counted at the commit.", "result"),
		rejected:        d("envelopes_rejected_total", "Envelopes refused for good, by reason (counted when their upload is answered 202; late also at the commit).", "reason"),
		released:        d("batches_released_total", "Batches released from the pools (each of at least n_min reports, shuffled)."),
		reportsReleased: d("reports_released_total", "Reports released in batches."),
		sends:           d("batch_sends_total", "Requests forwarding a released batch to the collector."),
		acked:           d("batches_acknowledged_total", "Released batches the collector acknowledged and the shuffler deleted."),
		sendFails:       d("batch_send_failures_total", "Forwarding attempts that failed (the batch unreadable, the request failed or was refused, or the acknowledged batch not deleted); the batch is retried with backoff."),
		expired:         d("reports_expired_total", "Reports deleted unreleased: their period's pool stayed below n_min past the grace."),
		poolReports:     d("pool_reports", "Reports waiting in each pool (summed over epochs and periods).", "pool"),
		poolMin:         d("pool_min_reports", "n_min: the smallest batch the shuffler releases."),
		outgoing:        d("outgoing_batches", "Released batches not yet acknowledged by the collector."),
	}
}

// Describe implements prometheus.Collector.
func (m *shufflerMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.uploads, m.envelopes, m.rejected, m.released, m.reportsReleased, m.sends, m.acked, m.sendFails, m.expired, m.poolReports, m.poolMin, m.outgoing} {
		ch <- d
	}
	m.uploadSeconds.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *shufflerMetrics) Collect(ch chan<- prometheus.Metric) {
	c := &m.s.c
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(m.uploads, c.requests.Load(), "accepted")
	counter(m.uploads, c.badRequests.Load(), "bad_request")
	counter(m.uploads, c.tooLarge.Load(), "too_large")
	counter(m.uploads, c.rateLimited.Load(), "rate_limited")
	counter(m.uploads, c.unavailable.Load(), "unavailable")
	counter(m.uploads, c.canceled.Load(), "canceled")
	counter(m.envelopes, c.accepted.Load(), "accepted")
	counter(m.envelopes, c.duplicates.Load(), "duplicate")
	for i, name := range rejectReasonNames {
		counter(m.rejected, c.rejectedBy[i].Load(), name)
	}
	counter(m.released, c.batchesReleased.Load())
	counter(m.reportsReleased, c.reportsReleased.Load())
	counter(m.sends, c.sends.Load())
	counter(m.acked, c.batchesForwarded.Load())
	counter(m.sendFails, c.forwardFailures.Load())
	counter(m.expired, c.expired.Load())
	ch <- prometheus.MustNewConstMetric(m.poolMin, prometheus.GaugeValue, float64(m.s.o.Plan.NMin))
	m.uploadSeconds.Collect(ch)

	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	fills, err := m.s.poolFills(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(m.poolReports, err)
	} else {
		byPool := map[string]int64{}
		for p := range *m.s.pools.Load() {
			byPool[p] = 0 // a plan's empty pools show as 0
		}
		for _, f := range fills {
			byPool[f.Pool] += f.Reports
		}
		for pool, n := range byPool {
			ch <- prometheus.MustNewConstMetric(m.poolReports, prometheus.GaugeValue, float64(n), pool)
		}
	}
	if out, err := m.s.outgoingCount(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(m.outgoing, err)
	} else {
		ch <- prometheus.MustNewConstMetric(m.outgoing, prometheus.GaugeValue, float64(out))
	}
}

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
		reports:  prometheus.NewDesc("blanket_collector_reports_total", "Reports of ingested batches by pool (a metric with separate travel, the plan's pool with joint or parallel; other: a pool of no current plan) and result: valid (counted) or malformed (dropped).", []string{"pool", "result"}, nil),
		planInfo: prometheus.NewDesc("blanket_collector_plan_info", "The plan epoch the collector publishes (value 1).", []string{"epoch"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *collectorMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.batches
	ch <- m.reports
	ch <- m.planInfo
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
	c.eachPool(func(pool string, rc *reportCounts) {
		ch <- prometheus.MustNewConstMetric(m.reports, prometheus.CounterValue, float64(rc.valid.Load()), pool, "valid")
		ch <- prometheus.MustNewConstMetric(m.reports, prometheus.CounterValue, float64(rc.malformed.Load()), pool, "malformed")
	})
	ch <- prometheus.MustNewConstMetric(m.planInfo, prometheus.GaugeValue, 1, m.c.epoch)
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
