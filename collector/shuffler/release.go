package shuffler

// Release: when pooled reports leave for the collector, and why no report
// the shuffler acknowledged is left behind in a pool that can no longer
// reach n_min.
//
// A pool P is the reports of one key (pool, epoch, period) and suite.
// Reports join P only when an accept commits (the app then gets its 202),
// and leave it only by a release (moved into an outgoing batch by the
// transaction that deletes them) or an expiry (deleted and counted in
// Stats.Expired). P's period q is closed once the shuffler has recorded q
// in the table forgotten through store.closePeriod; P is final when no
// report can join it any more: q is closed.
//
// Invariant: if P receives at least n_min reports in total, every report P
// acknowledged is released in a batch of at least n_min reports. The only
// reports deleted unreleased are those of a pool whose total stayed below
// n_min.
//
// The rules, with c the reports P holds, counted under P's lock (the one
// writer transaction on SQLite; P's advisory lock on PostgreSQL, taken
// before the count):
//
//	(R1) While P is not final, a release takes batchSize(c, n_min,
//	     n_min, MaxBatch) reports: at least n_min, and it leaves n_min.
//	(R2) Once P is final, releases take it whole, in batches of n_min to
//	     MaxBatch (batchSize(c, n_min, 0, MaxBatch); MaxBatch >= 2·n_min−1
//	     makes such a split exist for every c >= n_min), and an expiry
//	     deletes P only if c < n_min.
//	(C)  Release makes the final release or expiry of P only after
//	     store.closePeriod(q) returned; once it has, no accept of a
//	     report of q commits, and every accept that did commit is
//	     visible to every later statement.
//
// Proof. (1) Only releases and expiries remove reports, each under P's
// lock, so c counted under the lock is a lower bound of P's size until the
// commit: (R1) leaves at least n_min whatever accepts commit meanwhile, and
// once P has released anything it never holds fewer than n_min until it
// is final. (2) When Release makes P's final release or expiry, (C) has
// fixed everything P will ever acknowledge, and the count sees all of it:
// c is what P acknowledged less what it released. If P released
// anything, c >= n_min by (1), and (R2) releases it all in batches of at
// least n_min. If it released nothing, c is P's total: at least n_min, it
// goes out whole; below, it is deleted and counted, the one loss the
// invariant allows. (3) Every batch holds at least n_min: batchSize never
// returns fewer. (4) A crash at any point leaves the state of the last
// commit: a release moves its reports into outgoing in its own
// transaction, and outgoing batches are sent, after any restart, until
// the collector acknowledges them (forward.go); a closing is recorded
// before it is relied on and taken again by a restarted Release.
//
// (C) on SQLite: one process writes the file through one connection, so
// closePeriod's transaction and every accept's are serialized; an accept
// reads the closed periods inside its transaction and refuses their
// envelopes (acceptRes.late, answered as late: not acknowledged).
//
// (C) on PostgreSQL, with any number of replicas on any clocks: an accept
// first takes, in its transaction, the advisory lock of every period it
// pools into, shared (in one sorted order), then reads the closed periods
// in a later statement (READ COMMITTED: a snapshot taken after the locks
// are held) and refuses theirs. closePeriod takes q's lock exclusive
// once no accept holds it (it tries for about a second, then gives up,
// errPeriodBusy, recording nothing: the pool waits for the next look;
// a waiting exclusive request would queue every later accept of q behind
// it), records q and commits;
// PostgreSQL releases a transaction's advisory locks after its commit is
// visible. An accept granted q's lock after that reads q as closed; one
// granted it before has committed or rolled back before closePeriod
// returns. Replicas release P one at a time (P's advisory lock, tried: a
// replica that does not get it skips P this round), and a replica whose
// clock says P's period is still open only makes releases by (R1), which
// are safe at any time; the replica whose clock passed the deadline, or
// that read q as closed, makes the final one. Locks never wait in a
// cycle: accepts take shared period locks in one order and nothing else
// advisory; closePeriod one period lock; releases and expiries try P's
// lock without waiting.
//
// The cost: while P's period is open its last n_min reports wait, until
// the deadline (the period's end and its grace: PeriodGrace) or an
// operator's ClosePeriods. Settle makes the releases before that larger.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/report"
)

// batchSize returns how many of c pooled reports one release takes when
// at least keep must stay pooled: 0 when fewer than nMin are free,
// otherwise the first of the equal batches of at most maxBatch that the
// free ones split into. A split of any number f >= nMin of free reports
// into ceil(f/maxBatch) equal batches has every batch in [nMin, maxBatch]
// when maxBatch >= 2·nMin−1 (Options.MaxBatch): with p batches,
// (p−1)·maxBatch < f, so f/p >= ((p−1)(2·nMin−1)+1)/p >= nMin, which
// reduces to (p−2)(nMin−1) >= 0. Releasing maxBatch first could leave a
// remainder below nMin that the split keeps.
func batchSize(c int64, nMin, keep, maxBatch int) int {
	free := c - int64(keep)
	if free < int64(nMin) || free <= 0 {
		return 0
	}
	parts := (free + int64(maxBatch) - 1) / int64(maxBatch)
	return int((free + parts - 1) / parts)
}

// Release releases the pools of the plan's metrics: a pool of a period
// still open only down to n_min left in it, once it holds at least
// 2·n_min and has settled (Settle; at once when the free reports fill
// MaxBatch); a final pool (its period closed: past its deadline by the
// shuffler's clock, or closed by another replica or ClosePeriods) whole,
// or deleted and counted when it holds fewer than n_min. Batches hold
// n_min to MaxBatch reports (the invariant and its proof are at the top
// of release.go). It returns the number of batches released. Run calls it
// every ReleaseInterval; it must not run concurrently with itself.
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
		if _, err := s.st.forget(ctx, now.Unix(), s.grace.Load()); err != nil {
			s.log.Warn("forgetting the ids of closed periods", "error", err)
		}
		// The periods other replicas (or ClosePeriods) closed.
		if err := s.loadForgotten(ctx); err != nil {
			s.log.Warn("reading the closed periods", "error", err)
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
	s.pruneClosed(pools)
	// An epoch stops counting toward MaxEpochsPerPool once every period
	// (and suite) of it pooled here is emptied.
	type poolEpoch struct{ pool, epoch string }
	pending := map[poolEpoch]int{}
	for _, p := range pools {
		pool, epoch, _, _ := report.ParsePoolKey(p.metric)
		pending[poolEpoch{pool, epoch}]++
	}
	emptied := func(key string) {
		s.dropDraws(key)
		pool, epoch, _, _ := report.ParsePoolKey(key)
		if pending[poolEpoch{pool, epoch}]--; pending[poolEpoch{pool, epoch}] > 0 {
			return
		}
		s.epochsMu.Lock()
		delete(s.epochs[pool], epoch)
		s.epochsMu.Unlock()
	}
	nMin := int64(s.o.Plan.NMin)
	released := 0
	s.pruneGrowth(pools)
	defer func() {
		s.grownMu.Lock()
		s.looked = true
		s.grownMu.Unlock()
	}()
	busy := map[report.Period]bool{} // periods whose closing gave up this look
	for _, p := range pools {
		if _, _, period, err := report.ParsePoolKey(p.metric); err == nil && busy[period] {
			continue
		}
		final, err := s.final(ctx, p.metric)
		if errors.Is(err, errPeriodBusy) {
			// Another replica's accept of the period held on: its
			// pools wait for the next look, the others go on.
			_, _, period, _ := report.ParsePoolKey(p.metric)
			busy[period] = true
			s.log.Info("closing a period: accepts of it held on, trying again at the next look", "pool", p.metric)
			s.poolDirty.Store(true)
			continue
		}
		if err != nil {
			s.poolDirty.Store(true)
			return released, err
		}
		if p.n < nMin && final {
			gone, err := s.expire(ctx, p.metric, p.suite)
			if err != nil {
				s.poolDirty.Store(true)
				return released, err
			}
			if gone {
				emptied(p.metric)
			} else {
				// It reached n_min since the sizes were read (on a
				// replica whose clock says the period is open): released
				// at the next look.
				s.poolDirty.Store(true)
			}
			continue
		}
		if s.known(p.metric) != nil {
			continue
		}
		s.observe(growthKey(p), p.n, now)
		keep := nMin
		if final {
			keep = 0
		}
		switch free := p.n - keep; {
		case free < nMin:
			continue
		case !final && free < int64(s.o.MaxBatch) && !s.settled(p.metric, growthKey(p), now):
			s.poolDirty.Store(true) // look again at the next tick
			continue
		}
		taken := int64(0)
		for {
			n, err := s.releaseOne(ctx, p.metric, p.suite, int(keep))
			if err != nil {
				s.poolDirty.Store(true)
				return released, err
			}
			if n == 0 {
				break
			}
			released++
			taken += int64(n)
		}
		switch {
		case final && taken >= p.n:
			emptied(p.metric)
		case final:
			// Another replica holds the pool's lock (it releases it), or
			// reports remain: look again at the next tick, not only at
			// the next sweep.
			s.poolDirty.Store(true)
		}
		if taken > 0 {
			s.released(growthKey(p), p.n-taken)
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

// final reports whether no report can join pool key any more: its
// period is closed (table forgotten) or past its deadline by the
// shuffler's clock. It returns true only once store.closePeriod of the
// period has returned, in this process (rule C of release.go). A key that
// does not parse, which accepts never pools, is never final.
func (s *Shuffler) final(ctx context.Context, key string) (bool, error) {
	_, _, period, err := report.ParsePoolKey(key)
	switch {
	case err != nil:
		return false, nil
	case period.End() > (*s.forgotten.Load())[period.Length] && s.o.Now().Unix() < s.periodDeadline(period):
		return false, nil
	}
	return true, s.closePeriod(ctx, period)
}

// closePeriod closes period p (store.closePeriod) unless this process
// has, and makes the shuffler refuse its envelopes.
func (s *Shuffler) closePeriod(ctx context.Context, p report.Period) error {
	s.closedMu.Lock()
	done := s.closedPeriods[p]
	s.closedMu.Unlock()
	if done {
		return nil
	}
	if err := s.st.closePeriod(ctx, p); err != nil {
		return err
	}
	s.closedMu.Lock()
	s.closedPeriods[p] = true
	s.closedMu.Unlock()
	if p.End() > (*s.forgotten.Load())[p.Length] {
		return s.loadForgotten(ctx)
	}
	return nil
}

// pruneClosed forgets, from the periods this process closed, those no
// pool holds reports of any more (none can join them).
func (s *Shuffler) pruneClosed(pools []poolSize) {
	held := map[report.Period]bool{}
	for _, p := range pools {
		if _, _, period, err := report.ParsePoolKey(p.metric); err == nil {
			held[period] = true
		}
	}
	s.closedMu.Lock()
	maps.DeleteFunc(s.closedPeriods, func(p report.Period, _ bool) bool { return !held[p] })
	s.closedMu.Unlock()
}

// ClosePeriods closes every period of pooled reports that ends at or
// before through: from now on every replica refuses its envelopes as late,
// and the next Release releases its pools whole (or deletes and counts one
// below n_min), without waiting for its deadline. It returns the periods
// it closed. It is for an operator who wants a period's last reports
// before its grace ends (a demonstration, a test, a plan retired), at the
// cost of refusing those of its reports that would still have come.
func (s *Shuffler) ClosePeriods(ctx context.Context, through time.Time) ([]report.Period, error) {
	pools, err := s.st.poolSizes(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[report.Period]bool{}
	var closed []report.Period
	for _, p := range pools {
		_, _, period, err := report.ParsePoolKey(p.metric)
		if err != nil || seen[period] || period.End() > through.Unix() {
			continue
		}
		seen[period] = true
		if err := s.closePeriod(ctx, period); err != nil {
			s.poolDirty.Store(true) // those closed so far go at the next look
			return closed, err
		}
		closed = append(closed, period)
		s.log.Info("period closed before its deadline", "period", period.String())
	}
	s.poolDirty.Store(true)
	return closed, nil
}

// poolGrowth is what Release saw of a pool, for Settle: its size at the
// last look, when a look last found it larger (grew), and since when it
// could go (ready: the first look since its last release that found
// n_min free reports; zero until then).
type poolGrowth struct {
	size        int64
	grew, ready time.Time
}

// settleCap bounds a settle: a pool that could go is released at the
// latest settleCap settle times after it first could, even while reports
// keep joining it (a steady stream of straggling reports, a sender
// retrying), so that it goes out before its deadline.
const settleCap = 3

// settled reports whether pool key, with at least n_min free reports
// (observe saw it at this look as gk), may be released before its deadline: no look found it
// larger for its settle time (settleOf; always when that is 0), or it
// could go for settleCap settle times. Growth is what the looks find in
// the store (reports pooled here or by another replica), so a duplicate
// or a refused envelope does not postpone a release. A pool found at the
// first look since open counts as grown at open; one that appeared later,
// at the look that found it.
func (s *Shuffler) settled(key, gk string, now time.Time) bool {
	d := s.settleOf(key)
	if d <= 0 {
		return true
	}
	s.grownMu.Lock()
	defer s.grownMu.Unlock()
	g := s.growth[gk] // observe made it
	if g.ready.IsZero() {
		g.ready = now
	}
	return now.Sub(g.grew) >= d || now.Sub(g.ready) >= settleCap*d
}

// observe notes that a look at now found n reports in pool key.
func (s *Shuffler) observe(key string, n int64, now time.Time) {
	s.grownMu.Lock()
	defer s.grownMu.Unlock()
	g, ok := s.growth[key]
	switch {
	case !ok:
		g = &poolGrowth{grew: now}
		if !s.looked {
			g.grew = s.opened
		}
		s.growth[key] = g
	case n > g.size:
		g.grew = now
	case n < g.size:
		// Released by another replica (or expired): it waits a settle
		// again once it can go.
		g.ready = time.Time{}
	}
	g.size = n
}

// growthKey is the key of pool p in Shuffler.growth: its metric and
// suite (a pool per suite).
func growthKey(p poolSize) string { return p.metric + "|" + strconv.Itoa(int(p.suite)) }

// pruneGrowth forgets what it saw of the pools no longer pooled (released
// or expired here or by another replica).
func (s *Shuffler) pruneGrowth(pools []poolSize) {
	live := make(map[string]bool, len(pools))
	for _, p := range pools {
		live[growthKey(p)] = true
	}
	s.grownMu.Lock()
	maps.DeleteFunc(s.growth, func(k string, _ *poolGrowth) bool { return !live[k] })
	s.grownMu.Unlock()
}

// released notes that a release left left reports in pool key: it grew
// from there on, and waits a settle again before the next release.
func (s *Shuffler) released(key string, left int64) {
	s.grownMu.Lock()
	defer s.grownMu.Unlock()
	if g, ok := s.growth[key]; ok {
		g.size, g.ready = left, time.Time{}
	}
}

// settleOf returns how long pool key (a known one) must not grow before
// a release before its deadline: settleFor its period.
func (s *Shuffler) settleOf(key string) time.Duration {
	_, _, period, _ := report.ParsePoolKey(key)
	return s.settleFor(time.Duration(period.Length) * time.Second)
}

// settleFor returns the settle time of a pool of periods of length
// period: Options.Settle, or by default DefaultSettle(period).
func (s *Shuffler) settleFor(period time.Duration) time.Duration {
	switch {
	case s.o.Settle < 0:
		return 0
	case s.o.Settle > 0:
		return s.o.Settle
	}
	return DefaultSettle(period)
}

// DefaultSettle is the default of Options.Settle for a pool of periods of
// length period: a tenth of it, between 1 second and 1 hour (3 s for
// 30-second periods, an hour for days). Reports of a period arrive in a
// burst after it ends (apps seal it at their next start, Record or
// upload): a release waits for the burst to pass, so that it goes out in
// a few large batches rather than many of about n_min.
func DefaultSettle(period time.Duration) time.Duration {
	return min(max(period/10, time.Second), time.Hour)
}

// expirySweep is how often Release looks at the pools even when nothing
// was pooled, to close the periods whose grace ends and to see those
// other replicas closed.
const expirySweep = time.Minute

// expire deletes the pooled reports of key (a final pool) if it is still
// below n_min, counts them, and reports whether it did.
func (s *Shuffler) expire(ctx context.Context, key string, suite uint16) (bool, error) {
	n, err := s.st.expire(ctx, key, suite, s.o.Plan.NMin)
	if err != nil || n == 0 {
		return false, err
	}
	s.c.expired.Add(n)
	s.log.Warn("a pool received fewer than n_min reports by its deadline: its reports are deleted, never released", "pool", key, "reports", n, "n_min", s.o.Plan.NMin)
	return true, nil
}

// releaseOne moves pooled reports of one metric and suite, shuffled, into
// one outgoing batch, in one transaction, leaving at least keep pooled
// (store.release, batchSize). It releases nothing (and returns 0) when
// fewer than NMin are free.
func (s *Shuffler) releaseOne(ctx context.Context, metric string, suite uint16, keep int) (int, error) {
	var id report.ID
	// The floor's draws, made before the transaction (floor.go); they
	// never count toward n_min, and the batch's reports and draws fit in
	// one batch.
	draws, drawErr := s.drawsFor(ctx, metric)
	maxBatch := min(s.o.MaxBatch, report.MaxBatchReports-len(draws))
	n, err := s.st.release(ctx, metric, suite, s.o.Plan.NMin, keep, maxBatch, func(sealed [][]byte) (report.ID, []byte) {
		sealed = append(sealed, draws...)
		src := ldp.DefaultSource(s.o.Rand)
		Shuffle(src, sealed)
		for i := 0; i < len(id); i += 8 {
			v := src.Uint64()
			for j := range 8 {
				id[i+j] = byte(v >> (8 * j))
			}
		}
		return id, report.EncodeBatch(report.Batch{ID: id, Metric: metric, Suite: suite, Sealed: sealed, Draws: len(draws)})
	})
	if err != nil || n == 0 {
		if err == nil {
			s.keepDraws(metric, draws)
		}
		return 0, err
	}
	if drawErr != nil {
		s.c.floorFailures.Add(1)
		s.log.Error("blanket draws for a batch failed: it was released without them, and says so", "metric", metric, "batch", id.String(), "error", drawErr)
	}
	s.c.batchesReleased.Add(1)
	s.c.reportsReleased.Add(int64(n))
	s.c.draws.Add(int64(len(draws)))
	s.log.Info("batch released", "metric", metric, "batch", id.String(), "reports", n, "draws", len(draws))
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
	wg.Go(func() { s.col.probeLoop(ctx, s.o.ProbeInterval) })
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
