package client

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/blanket-dp/blanket/sdk/report"
)

// Records in memory. A Record does no disk I/O and takes no lock that
// disk I/O holds: it checks its value against the plan, merges it into
// the Provider's recordBuffer (a map in memory, keyed by plan, metric and
// period, holding the period's last category, running sum and count of
// values, as the outbox stages them) and returns. The stager moves the
// buffer into the outbox, one Outbox.Stage per key with the count of
// values it merged:
//
//   - Config.StageInterval (1 s by default) after a Record into an empty
//     buffer (runStager: an app that does not record wakes nothing);
//   - before every closing of periods (closeEnded: upload ticks, Flush,
//     plan changes), so that a period never closes without the values
//     recorded in it before;
//   - at Shutdown, after the last Record it lets in.
//
// Staging a merged value is staging each of its Records in order (Stage
// keeps the last category and adds sums and counts: Value.merge), so the
// outbox holds what it held when every Record staged itself, and every
// guarantee of what the outbox holds stands unchanged: one report per
// metric (or pool) and period, sealed once, a state metric stepped once
// per period. What a crash (kill -9, a power cut) loses is the buffer:
// the Records of the last StageInterval, or longer while staging fails
// (a full disk; logged, and retried at the next pass). A Record that
// finds its period closed when it is staged is late (Stats.Late), as it
// was when Record staged it; Stats.Recorded, Skipped and Late count
// Records when they are staged.
//
// A pass stages values in the order of their last Records (a sequence
// number), as each Record would have staged itself: one period's Records
// may sit under two keys (a plan rotated in the period), and a Record
// whose clock went back may be filed into a later period. A state
// metric's value that fails to stage holds its later values back with it
// until the next pass: staged late into a closed period, it is filed into
// the next open one (stageStateLater), and the later Records must land
// after it. At Shutdown such a value is dropped (late) instead, so that
// it holds nothing back. A custom Outbox that fails one value every time
// holds its metric's later values in memory until Shutdown.
//
// Config.StageInterval < 0 keeps the former path: every Record stages
// its value before it returns (recordNow), an fsync per Record.

// bufKey is what one buffered value is recorded under.
type bufKey struct {
	v      *verifiedPlan
	ms     *metricState
	period report.Period
}

// bufVal is the Records merged under one bufKey: the last category, the
// sum and the number of values.
type bufVal struct {
	category string
	sum      float64
	count    int64
	// last is the sequence number of the last Record merged in: a pass
	// stages values in the order of their last Records.
	last uint64
}

// after returns the merge of b followed by later Records c.
func (b bufVal) after(c bufVal) bufVal {
	if c.count > 0 {
		b.category = c.category
		b.last = c.last
	}
	b.sum = saturatingAdd(b.sum, c.sum)
	b.count += c.count
	return b
}

// recordBuffer is the Records not yet staged.
type recordBuffer struct {
	mu     sync.Mutex
	closed bool   // Shutdown began staging the last Records
	seq    uint64 // Records added so far
	vals   map[bufKey]bufVal
	spare  map[bufKey]bufVal // an emptied map for the next take
	// wake has room for one signal: a Record into an empty buffer.
	wake chan struct{}
	// stageMu serializes the passes that stage the buffer, so that an
	// earlier Record's value reaches the outbox before a later one's.
	stageMu sync.Mutex
}

func newRecordBuffer() *recordBuffer {
	return &recordBuffer{vals: make(map[bufKey]bufVal), wake: make(chan struct{}, 1)}
}

// add merges a Record into the buffer, or fails with ErrShutdown once
// the buffer is closed.
func (b *recordBuffer) add(k bufKey, category string, x float64) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrShutdown
	}
	empty := len(b.vals) == 0
	cur := b.vals[k]
	b.seq++
	cur.category = category
	cur.sum = saturatingAdd(cur.sum, x)
	cur.count++
	cur.last = b.seq
	b.vals[k] = cur
	b.mu.Unlock()
	if empty {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// take returns the buffered Records and empties the buffer.
func (b *recordBuffer) take() map[bufKey]bufVal {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.vals) == 0 {
		return nil
	}
	out := b.vals
	b.vals = b.spare
	if b.vals == nil {
		b.vals = make(map[bufKey]bufVal, len(out))
	}
	b.spare = nil
	return out
}

// settle puts back the values of taken that could not be staged, before
// the Records buffered since, wakes the stager to try them again, and
// keeps taken's map for the next take.
func (b *recordBuffer) settle(taken map[bufKey]bufVal, failed map[bufKey]bufVal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, old := range failed {
		b.vals[k] = old.after(b.vals[k])
	}
	if b.spare == nil {
		clear(taken)
		b.spare = taken
	}
	if len(failed) > 0 {
		// The next pass retries them a StageInterval later: no Record
		// into an empty buffer will wake it.
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
}

// close lets no Record in from now on; Records then fail with
// ErrShutdown.
func (b *recordBuffer) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
}

// stageBuffered stages every buffered Record in the outbox. A value that
// fails to stage (other than into a closed period, which is late) stays
// buffered for the next pass; the first such error is returned.
func (p *Provider) stageBuffered(ctx context.Context) error {
	b := p.buf
	if b == nil {
		return nil
	}
	b.stageMu.Lock()
	defer b.stageMu.Unlock()
	taken := b.take()
	if taken == nil {
		return nil
	}
	var failed map[bufKey]bufVal
	var first error
	// Values stage in the order of their last Records, and once a state
	// metric's value fails, its later values wait with it: a value that
	// finds its period closed is filed into the next open one
	// (stageStateLater), where a later Record must still replace it. Once
	// Shutdown closed the buffer, a state metric's failed value is dropped
	// instead (late) and holds nothing back: staged at a later try, it
	// could only land over a later Record.
	closed := b.isClosed()
	var held map[string]bool
	for _, k := range recordOrder(taken) {
		bv := taken[k]
		if !held[k.ms.name] {
			err := p.stageValue(ctx, k.v, k.ms, k.period, bv)
			if err == nil {
				continue
			}
			first = cmp.Or(first, err)
			if k.ms.state != nil && closed {
				p.late(k.ms.name, k.period, bv.count, "staging failed at Shutdown: "+err.Error())
				continue
			}
		}
		if failed == nil {
			failed = make(map[bufKey]bufVal)
		}
		failed[k] = bv
		if k.ms.state != nil {
			if held == nil {
				held = make(map[string]bool)
			}
			held[k.ms.name] = true
		}
	}
	b.settle(taken, failed)
	return first
}

// recordOrder returns taken's keys in the order of their last Records.
func recordOrder(taken map[bufKey]bufVal) []bufKey {
	keys := make([]bufKey, 0, len(taken))
	for k := range taken {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b bufKey) int { return cmp.Compare(taken[a].last, taken[b].last) })
	return keys
}

// isClosed reports whether Shutdown closed the buffer.
func (b *recordBuffer) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// runStager stages the buffer Config.StageInterval after a Record into
// an empty buffer, and closes the periods that may have ended (as a
// Record did when it staged its value itself), until ctx is done.
func (p *Provider) runStager(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.buf.wake:
		}
		if !sleep(ctx, p.cfg.StageInterval) {
			return
		}
		p.stagePass(ctx)
	}
}

// stagePass stages the buffer, and closes the ended periods when one may
// have ended (closing stages the buffer first).
func (p *Provider) stagePass(ctx context.Context) {
	var err error
	if p.now().Unix() >= p.nextClose.Load() {
		err = p.closePeriods(ctx)
	} else {
		err = p.stageBuffered(ctx)
	}
	if err != nil && ctx.Err() == nil {
		p.log.Warn("blanket staging Records", "error", err)
	}
}

// startStager starts runStager on p.buf, which NewProvider made unless
// every Record stages itself (Config.StageInterval < 0). It makes the
// buffer before it starts the uploader, which stages it at every closing,
// and starts the stager last.
func (p *Provider) startStager() {
	if p.buf == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.stagerCancel, p.stagerDone = cancel, make(chan struct{})
	go func() {
		defer close(p.stagerDone)
		p.runStager(ctx)
	}()
}

// stopStager lets no Record in, stops runStager and stages what it left,
// with ctx (Shutdown's): the last Records reach the outbox before it
// closes.
func (p *Provider) stopStager(ctx context.Context) error {
	if p.buf == nil {
		return nil
	}
	p.buf.close()
	p.stagerCancel()
	<-p.stagerDone
	err := p.stageBuffered(ctx)
	if err != nil {
		p.log.Warn("blanket staging the last Records", "error", err)
	}
	return err
}
