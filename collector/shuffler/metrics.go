package shuffler

// Prometheus metrics of the shuffler, exported through Options.Registerer
// (blanket serve and blanket shuffler serve them at GET /metrics on the
// operator's listener). They count uploads, envelopes and batches by
// outcome, and time uploads. Nothing in them is about a sender: no
// address, no report id, no time of one report; every label takes its
// values from a fixed set (results, reasons) or from the plans' pool
// names.
//
// The counters are the shuffler's atomics, read at scrape time: the JSON
// API's Stats sums the same ones (one count, two views), this process's
// since it started. The gauges pool_reports, period_reports,
// outgoing_batches and oldest_outgoing_batch_age_seconds read the store
// every replica shares: the same on every replica, the cluster's
// figures. Only the upload latency is kept in
// client_golang's own type.

import (
	"context"
	"errors"
	"time"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/sdk/report"
	"github.com/prometheus/client_golang/prometheus"
)

// rejectReason is why the shuffler refused an envelope.
type rejectReason int

const (
	rejectUnknownPool   rejectReason = iota // not a pool of a known plan, or a malformed key
	rejectNoPeriod                          // no reporting period in the pool key
	rejectPeriodLength                      // a period length no known plan has
	rejectLate                              // its period's grace has passed
	rejectEarly                             // its period starts more than a period ahead
	rejectTooManyEpochs                     // the pool holds MaxEpochsPerPool epochs already
	rejectSuite                             // an unsupported HPKE suite
	rejectShort                             // sealed bytes shorter than MinSealedLen
	rejectTokenMissing                      // no admission token (Options.Admission set)
	rejectTokenInvalid                      // a token that does not decode or verify for the pool key
	rejectTokenSpent                        // a token another envelope spent
	numRejectReasons
)

// rejectReasonNames are, by rejectReason, the codes of refused envelopes
// (EnvelopeError.Code) and the reason label values of
// blanket_shuffler_envelopes_rejected_total. The token codes are package
// admission's (admission.UploadTokenMissing, ...), which apps link.
var rejectReasonNames = [numRejectReasons]string{
	"unknown_pool", "no_period", "unknown_period_length", "late", "early",
	"too_many_epochs", "unsupported_suite", "too_short",
	admission.UploadTokenMissing, admission.UploadTokenInvalid, admission.UploadTokenSpent,
}

// reasonOf classifies an error of Shuffler.accepts.
func reasonOf(err error) rejectReason {
	switch {
	case errors.Is(err, errLate), errors.Is(err, errClosed):
		return rejectLate
	case errors.Is(err, report.ErrNoPeriod):
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
	draws, floorFailures                               *prometheus.Desc
	periodReports, oldestOutgoing                      *prometheus.Desc
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
		expired:         d("reports_expired_total", "Reports deleted unreleased: their pool received fewer than n_min reports in all by its period's deadline (a pool that reached n_min is always released whole)."),
		poolReports:     d("pool_reports", "Reports waiting in each pool (summed over epochs and periods).", "pool"),
		poolMin:         d("pool_min_reports", "n_min: the smallest batch the shuffler releases."),
		periodReports:   d("period_reports", "Reports waiting in the pools, by reporting period (its start, RFC 3339; only periods still open to reports have pools), summed over pools and epochs; read from the store every replica shares, like pool_reports and outgoing_batches.", "period"),
		outgoing:        d("outgoing_batches", "Released batches not yet acknowledged by the collector."),
		oldestOutgoing:  d("oldest_outgoing_batch_age_seconds", "How long ago the oldest batch not yet acknowledged by the collector was released (0: none); by the store's clock, the same on every replica. A batch is normally acknowledged within seconds: a growing age means the collectors refuse or cannot be reached."),
		draws:           d("blanket_draws_total", "Blanket draws added to released batches (the plan's floor), on top of their reports."),
		floorFailures:   d("floor_failures_total", "Batches of a pool with a floor released without draws, because drawing failed (the randomizer or the period's report key unavailable); the batch says it has none."),
	}
}

// Describe implements prometheus.Collector.
func (m *shufflerMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.uploads, m.envelopes, m.rejected, m.released, m.reportsReleased, m.sends, m.acked, m.sendFails, m.expired, m.poolReports, m.poolMin, m.outgoing, m.draws, m.floorFailures, m.periodReports, m.oldestOutgoing} {
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
	counter(m.draws, c.draws.Load())
	counter(m.floorFailures, c.floorFailures.Load())
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
		byPeriod := map[string]int64{}
		for _, f := range fills {
			if f.Period != nil {
				byPeriod[f.Period.Start.UTC().Format(time.RFC3339)] += f.Reports
			}
		}
		for at, n := range byPeriod {
			ch <- prometheus.MustNewConstMetric(m.periodReports, prometheus.GaugeValue, float64(n), at)
		}
	}
	if out, err := m.s.st.outgoingCount(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(m.outgoing, err)
	} else {
		ch <- prometheus.MustNewConstMetric(m.outgoing, prometheus.GaugeValue, float64(out))
	}
	if age, _, err := m.s.st.oldestOutgoing(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(m.oldestOutgoing, err)
	} else {
		ch <- prometheus.MustNewConstMetric(m.oldestOutgoing, prometheus.GaugeValue, age.Seconds())
	}
}
