package shuffler

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/report"
)

// Release releases every pool of a metric in the plan that holds at least
// NMin reports, as batches of at most MaxBatch (each at least NMin), and
// returns the number of batches released. Run calls it every
// ReleaseInterval; it must not run concurrently with itself.
func (s *Shuffler) Release(ctx context.Context) (int, error) {
	// Pools are looked at when reports were pooled since the last look,
	// and at least every expirySweep for the periods whose grace ends.
	now := s.o.Now()
	sweep := now.Sub(time.Unix(0, s.lastSweep.Load())) >= expirySweep
	if !s.poolDirty.Swap(false) && !sweep {
		return 0, nil
	}
	s.lastSweep.Store(now.UnixNano())
	if sweep {
		// Replicas on PostgreSQL forget the ids of closed periods here
		// (the SQLite store forgets by generation as it accepts).
		grace := int64(s.o.PeriodGrace / time.Second)
		if changed, err := s.st.forget(ctx, now.Unix(), grace); err != nil {
			s.log.Warn("forgetting the ids of closed periods", "error", err)
		} else if changed {
			if err := s.loadForgotten(ctx); err != nil {
				s.log.Warn("forgetting the ids of closed periods", "error", err)
			}
		}
	}
	pools, err := s.st.poolSizes(ctx)
	if err != nil {
		s.poolDirty.Store(true)
		return 0, err
	}
	// Epochs admitted after this query are lost from the count until the
	// next Release: the bound may be overshot briefly, never by much.
	s.trackEpochs(pools)
	// An epoch stops counting toward MaxEpochsPerPool once every period
	// (and suite) of it pooled here is emptied.
	type poolEpoch struct{ pool, epoch string }
	pending := map[poolEpoch]int{}
	for _, p := range pools {
		pool, epoch, _, _ := report.ParsePoolKey(p.metric)
		pending[poolEpoch{pool, epoch}]++
	}
	emptied := func(key string) {
		s.grownMu.Lock()
		delete(s.grown, key)
		s.grownMu.Unlock()
		pool, epoch, _, _ := report.ParsePoolKey(key)
		if pending[poolEpoch{pool, epoch}]--; pending[poolEpoch{pool, epoch}] > 0 {
			return
		}
		s.epochsMu.Lock()
		delete(s.epochs[pool], epoch)
		s.epochsMu.Unlock()
	}
	released := 0
	for _, p := range pools {
		if s.expired(p.metric) && p.n < int64(s.o.Plan.NMin) {
			gone, err := s.expire(ctx, p.metric, p.suite)
			if err != nil {
				s.poolDirty.Store(true)
				return released, err
			}
			if gone {
				emptied(p.metric)
			} else {
				// It reached n_min since the sizes were read: released
				// at the next look.
				s.poolDirty.Store(true)
			}
			continue
		}
		if s.known(p.metric) != nil {
			continue
		}
		if p.n >= int64(s.o.Plan.NMin) && p.n < int64(s.o.MaxBatch) && !s.settled(p.metric, now) {
			s.poolDirty.Store(true) // look again at the next tick
			continue
		}
		left := p.n
		for left >= int64(s.o.Plan.NMin) {
			// Equal batches of at most MaxBatch: releasing MaxBatch first
			// could leave a remainder below n_min that a split keeps.
			parts := (left + int64(s.o.MaxBatch) - 1) / int64(s.o.MaxBatch)
			n, err := s.releaseOne(ctx, p.metric, p.suite, max(int((left+parts-1)/parts), s.o.Plan.NMin))
			if err != nil {
				s.poolDirty.Store(true)
				return released, err
			}
			if n == 0 {
				break
			}
			released++
			left -= int64(n)
		}
		if left == 0 {
			emptied(p.metric)
		}
	}
	if released > 0 {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return released, nil
}

// settled reports whether no report joined pool key for Settle (always,
// with Settle 0). A pool not seen growing since the start counts from the
// start.
func (s *Shuffler) settled(key string, now time.Time) bool {
	if s.o.Settle <= 0 {
		return true
	}
	s.grownMu.Lock()
	defer s.grownMu.Unlock()
	t, ok := s.grown[key]
	if !ok {
		t = s.opened
		s.grown[key] = t
	}
	return now.Sub(t) >= s.o.Settle
}

// expirySweep is how often Release looks at the pools even when nothing
// was pooled, to expire the pools of periods past their grace.
const expirySweep = time.Minute

// expire deletes the pooled reports of key (a period past its deadline)
// if it is still below n_min, counts them, and reports whether it did.
func (s *Shuffler) expire(ctx context.Context, key string, suite uint16) (bool, error) {
	n, err := s.st.expire(ctx, key, suite, s.o.Plan.NMin)
	if err != nil || n == 0 {
		return false, err
	}
	s.c.expired.Add(n)
	s.log.Warn("a pool did not reach n_min by its deadline: its reports are deleted, never released", "pool", key, "reports", n, "n_min", s.o.Plan.NMin)
	return true, nil
}

// releaseOne moves up to limit (at most MaxBatch) pooled reports of one metric and suite,
// shuffled, into one outgoing batch, in one transaction. It releases
// nothing (and returns 0) when fewer than NMin are pooled.
func (s *Shuffler) releaseOne(ctx context.Context, metric string, suite uint16, limit int) (int, error) {
	var id report.ID
	n, err := s.st.release(ctx, metric, suite, s.o.Plan.NMin, min(limit, s.o.MaxBatch), func(sealed [][]byte) (report.ID, []byte) {
		src := ldp.DefaultSource(s.o.Rand)
		Shuffle(src, sealed)
		for i := 0; i < len(id); i += 8 {
			v := src.Uint64()
			for j := range 8 {
				id[i+j] = byte(v >> (8 * j))
			}
		}
		return id, report.EncodeBatch(report.Batch{ID: id, Metric: metric, Suite: suite, Sealed: sealed})
	})
	if err != nil || n == 0 {
		return 0, err
	}
	s.c.batchesReleased.Add(1)
	s.c.reportsReleased.Add(int64(n))
	s.log.Info("batch released", "metric", metric, "batch", id.String(), "reports", n)
	return n, nil
}

// Run releases pools every ReleaseInterval and forwards released batches
// (those left from a previous run first) until ctx is done. It returns
// ctx's error, or ErrClosed after Close.
func (s *Shuffler) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: Run called twice", ErrOptions)
	}
	defer s.running.Store(false)
	s.runMu.Lock()
	if s.isClosed {
		s.runMu.Unlock()
		return ErrClosed
	}
	s.runs.Add(1)
	s.runMu.Unlock()
	defer s.runs.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	var wg sync.WaitGroup
	wg.Go(func() { s.forwardLoop(ctx) })
	t := time.NewTicker(s.o.ReleaseInterval)
	defer t.Stop()
	for {
		if _, err := s.Release(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("releasing batches", "error", err)
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			select {
			case <-s.closed:
				return ErrClosed
			default:
			}
			return ctx.Err()
		case <-t.C:
		}
	}
}
