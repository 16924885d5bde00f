package client

import (
	"sync"
	"time"

	"github.com/blanket-dp/blanket/sdk/report"
)

// DropReason says why recorded values, or the report sealed from them,
// will not be counted by the collector.
type DropReason string

// The reasons of a Drop.
const (
	// DropLate is a Record into a reporting period already closed for its
	// metric or pool (Stats.Late): the clock went back into a closed
	// period, another process on the outbox closed it first, the upload
	// timer closed it between the Record's reading of the clock and its
	// staging (a Record in the period's last instant), or the clock reads
	// before 1970. The value is not staged; Record returns nil. (A state
	// metric's Record is filed under the next open period instead.)
	DropLate DropReason = "late"
	// DropExpired is a period whose staged values could not be sealed
	// within Config.PeriodGrace of its end (Stats.Expired): the app did not
	// run, or the device was off, until after the grace. Its values are
	// deleted unsent.
	DropExpired DropReason = "expired"
	// DropRefused is a sealed report the shuffler refused for good
	// (Stats.Rejected, named in its 202 answer with a reason, such as a
	// period past its grace or a metric it does not pool; or Stats.Dropped,
	// an upload of this report alone answered 400 or 413). It is deleted
	// from the outbox; retrying would not help. (When an earlier upload
	// of it went unanswered, the shuffler may hold that copy, which is
	// then counted: see UploadUnknown.)
	DropRefused DropReason = "refused"
	// DropNoToken is a sealed report that never had an admission token
	// (Config.Credential): none could be obtained for its pool key before
	// its period's deadline (the end plus the grace, when the shuffler
	// stops taking it), because the issuer refused it (Detail gives the
	// issuer's code and reason: the pool is not admitted, the period is
	// not granted, this instance was granted another token of it) or
	// could not be reached or authenticate the instance (Stats.NoToken;
	// the report was never uploaded, and is not charged: UploadNoToken);
	// or a report the shuffler refused because it carried none (code
	// token_missing: the Provider has no Credential, and the shuffler
	// requires tokens; Stats.Rejected).
	DropNoToken DropReason = "no_token"
	// DropTokenInvalid is a report the shuffler refused because its
	// admission token does not verify for its pool key (code
	// token_invalid: the issuer's key changed, or the token was damaged;
	// Stats.Rejected).
	DropTokenInvalid DropReason = "token_invalid"
	// DropTokenSpent is a report the shuffler refused because its
	// admission token was spent already with another envelope (code
	// token_spent; Stats.Rejected): another process on the outbox sent
	// one of the same pool key, or the shuffler's spent set is wrong.
	DropTokenSpent DropReason = "token_spent"
)

// Drop is telemetry the app recorded that will not reach the collector:
// a late Record, an expired period, a refused report, or one without an
// admission token. Every Drop is
// logged through Config.Logger (a warning with the metric, the period and
// the reason) and, when Config.OnDrop is set, passed to it.
type Drop struct {
	// Reason says what happened.
	Reason DropReason
	// Metric is the metric whose value or report is dropped; for an
	// expired period or a refused message of joint or parallel travel, the
	// plan's pool ("@joint", "@parallel"), whose message carried every
	// metric of the period; "" for a refusal the shuffler did not name
	// (it names only the first few of an upload).
	Metric string
	// Start and End are the reporting period, [Start, End) in UTC; both
	// zero for a Record whose clock reads before 1970 and a refusal the
	// shuffler did not name.
	Start, End time.Time
	// Detail says more, in words: the shuffler's reason for a refusal,
	// what closed the period for a late Record.
	Detail string
}

// maxPendingDrops bounds the drops waiting for Config.OnDrop (which
// blocks, or is slow); beyond it a drop is logged and counted in Stats but
// not passed to OnDrop.
const maxPendingDrops = 1024

// dropQueue hands drops to Config.OnDrop on a goroutine of its own, in the
// order they happened, so that OnDrop never runs with a lock held that
// Record takes (a callback calling Record, or blocking, must not deadlock
// or stall the Provider).
type dropQueue struct {
	fn func(Drop)

	mu     sync.Mutex
	q      []Drop
	closed bool

	wake chan struct{} // capacity 1
	done chan struct{} // closed when the goroutine returned
}

func newDropQueue(fn func(Drop)) *dropQueue {
	d := &dropQueue{fn: fn, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go d.run()
	return d
}

// push queues x for fn; it never blocks.
func (d *dropQueue) push(x Drop) {
	d.mu.Lock()
	switch {
	case d.closed, len(d.q) >= maxPendingDrops:
	default:
		d.q = append(d.q, x)
	}
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *dropQueue) run() {
	defer close(d.done)
	for {
		d.mu.Lock()
		q, closed := d.q, d.closed
		d.q = nil
		d.mu.Unlock()
		for _, x := range q {
			d.fn(x)
		}
		if closed && len(q) == 0 {
			return
		}
		if len(q) == 0 {
			<-d.wake
		}
	}
}

// close delivers the drops queued and stops the goroutine; later pushes
// are ignored.
func (d *dropQueue) close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
	<-d.done
}

// drop tells the app about x: a log line, and Config.OnDrop.
func (p *Provider) drop(x Drop) {
	args := []any{"reason", string(x.Reason), "metric", x.Metric}
	if !x.Start.IsZero() {
		args = append(args, "period_start", x.Start, "period_end", x.End)
	}
	if x.Detail != "" {
		args = append(args, "detail", x.Detail)
	}
	p.log.Warn("blanket telemetry dropped", args...)
	if p.drops != nil {
		p.drops.push(x)
	}
}

// dropPeriod returns a Drop of metric in period.
func dropPeriod(reason DropReason, metric string, period report.Period, detail string) Drop {
	x := Drop{Reason: reason, Metric: metric, Detail: detail}
	if period.Valid() == nil {
		x.Start, x.End = time.Unix(period.Start, 0).UTC(), time.Unix(period.End(), 0).UTC()
	}
	return x
}

// late counts records Records of metric into period dropped as late, as
// one Drop.
func (p *Provider) late(metric string, period report.Period, records int64, detail string) {
	p.stats.late.Add(records)
	p.drop(dropPeriod(DropLate, metric, period, detail))
}

// lateValues counts the values of a period closed without them, because
// it was closed for their metric already, as late.
func (p *Provider) lateValues(vals []Value, detail string) {
	for _, v := range vals {
		p.late(v.Metric, v.Period, 1, detail)
	}
}

// expired counts a period of pool dropped unsent past the grace.
func (p *Provider) expired(pool string, period report.Period) {
	p.stats.expired.Add(1)
	p.drop(dropPeriod(DropExpired, pool, period, "the period ended more than the grace before it could be sealed"))
}
