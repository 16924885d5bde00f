package shuffler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// Reasons accepts gives for envelopes it refuses, besides unknown pools.
var (
	// errLate rejects an envelope of a period whose grace has passed.
	errLate = errors.New("its period ended more than the grace ago")
	// errClosed rejects an envelope of a closed period (table forgotten):
	// its pools released whole, or its ids forgotten. Counted as late.
	errClosed = errors.New("its period is closed: its pools were released whole, or its grace ended")
	// errPeriodBusy: a period could not be closed now because accepts of
	// it held on (another replica mid-commit); closing is tried again at
	// the next look, and the period's pools wait until then.
	errPeriodBusy = errors.New("accepts of the period held its lock: try again")
	// errEarly rejects an envelope of a period starting more than one
	// period after the shuffler's clock.
	errEarly = errors.New("the period starts more than one period after the shuffler's clock")
	// errPeriodLength rejects an envelope of a period no known plan has.
	errPeriodLength = errors.New("not a period of any plan the shuffler knows")
)

// known returns nil when key names a pool the shuffler may hold and
// release: a pool of its plan (plan.Plan.Pools), tagged with a
// well-formed plan epoch and a reporting period (report.PeriodPoolKey).
// An unknown pool is named as such first, whatever else is wrong with
// the key; a key without a period tag is refused with an error wrapping
// report.ErrNoPeriod.
func (s *Shuffler) known(key string) error {
	if pool, _, _ := strings.Cut(key, report.PoolKeySep); !(*s.pools.Load())[pool] {
		return fmt.Errorf("unknown metric %q", key)
	}
	_, epoch, _, err := report.ParsePoolKey(key)
	switch {
	case err != nil:
		return err
	case epoch == "":
		return fmt.Errorf("%q: a period tag without an epoch tag", key)
	case !validEpoch(epoch):
		return fmt.Errorf("%q: malformed epoch %q", key, epoch)
	}
	return nil
}

// accepts returns nil when the shuffler pools envelopes of key, else why
// not: key must be known (tagged with a plan epoch and a reporting
// period: each epoch and each period pools apart, so that a released
// batch holds at least n_min reports of one epoch and one period), and
// the period must be open: not ended more than the grace ago (errLate),
// and not starting more than one period ahead of the shuffler's clock.
// Its length must be that of a known plan's periods (AddPlan): other
// lengths would only make pools that never fill, and batches the
// collector cannot place.
func (s *Shuffler) accepts(key string) error {
	if err := s.known(key); err != nil {
		return err
	}
	_, _, period, _ := report.ParsePoolKey(key)
	now := s.o.Now().Unix()
	switch {
	case !(*s.lengths.Load())[period.Length]:
		return fmt.Errorf("%q: a period of %v is %w (%v)", key, time.Duration(period.Length)*time.Second, errPeriodLength, s.knownLengths())
	case now >= s.periodDeadline(period):
		return fmt.Errorf("%q: %w", key, errLate)
	case period.End() <= (*s.forgotten.Load())[period.Length]:
		// Closed: its pools were released whole (another replica's
		// clock, or ClosePeriods), or some of its ids are forgotten (a
		// longer grace than when they went, or the clock went back: a
		// retry could pool twice).
		return fmt.Errorf("%q: %w", key, errClosed)
	case period.Start > now+period.Length:
		return fmt.Errorf("%q: %w", key, errEarly)
	}
	return nil
}

// knownLengths lists the period lengths taken, for errors.
func (s *Shuffler) knownLengths() []time.Duration {
	var out []time.Duration
	for l := range *s.lengths.Load() {
		out = append(out, time.Duration(l)*time.Second)
	}
	slices.Sort(out)
	return out
}

// periodDeadline returns the Unix second from which period's pools are
// closed: its end plus the grace.
func (s *Shuffler) periodDeadline(p report.Period) int64 {
	return p.End() + s.grace.Load()
}

// AddPlan makes the shuffler take envelopes of p's pools and period
// length too, for instance those of a new plan the collector published
// (PlanRelay.OnPlan), so that apps that fetched it are not refused. Pools
// and lengths are never removed: late reports of an earlier plan keep
// their pools.
func (s *Shuffler) AddPlan(p *plan.Plan) {
	s.takePlan(p)
	if err := s.addFloorPlan(context.Background(), p); err != nil {
		s.log.Error("a plan's floor: its batches get no blanket draws", "plan", p.Epoch(), "error", err)
	}
}

// takePlan is AddPlan but for the floor (floor.go): p's pools, period
// length and grace.
func (s *Shuffler) takePlan(p *plan.Plan) {
	s.addPools(p.Pools(), []int64{int64(p.PeriodLength() / time.Second)})
	if s.graceFixed {
		return
	}
	g := int64(p.GraceLength() / time.Second)
	for {
		cur := s.grace.Load()
		if g <= cur {
			return
		}
		if s.grace.CompareAndSwap(cur, g) {
			s.st.setGrace(g)
			s.log.Info("a plan with a longer grace: every period's pools now wait that long after it ends", "grace", time.Duration(g)*time.Second, "plan", p.Epoch())
			return
		}
	}
}

// addPools adds pools and period lengths (in seconds), storing those not
// known yet.
func (s *Shuffler) addPools(pools []string, lengths []int64) {
	s.poolsMu.Lock()
	defer s.poolsMu.Unlock()
	next := map[string]bool{}
	if cur := s.pools.Load(); cur != nil {
		maps.Copy(next, *cur)
	}
	nextL := map[int64]bool{}
	if cur := s.lengths.Load(); cur != nil {
		maps.Copy(nextL, *cur)
	}
	var added []string
	for _, p := range pools {
		if !next[p] {
			next[p] = true
			added = append(added, p)
		}
	}
	var addedL []int64
	for _, l := range lengths {
		if l > 0 && !nextL[l] {
			nextL[l] = true
			addedL = append(addedL, l)
		}
	}
	if len(added) > 0 || s.pools.Load() == nil {
		s.pools.Store(&next)
	}
	if len(addedL) > 0 || s.lengths.Load() == nil {
		s.lengths.Store(&nextL)
	}
	if s.st == nil || len(added)+len(addedL) == 0 {
		return
	}
	// Best effort: what is not stored is learned again at the next
	// relayed plan.
	if err := s.st.learn(context.Background(), added, addedL); err != nil {
		s.log.Warn("storing learned pools", "error", err)
	}
}

// trackEpochs resets the pooled epochs from the pool sizes.
func (s *Shuffler) trackEpochs(pools []poolSize) {
	m := map[string]map[string]bool{}
	for _, p := range pools {
		pool, epoch, _, err := report.ParsePoolKey(p.metric)
		if err != nil || p.n == 0 {
			continue
		}
		if m[pool] == nil {
			m[pool] = map[string]bool{}
		}
		m[pool][epoch] = true
	}
	s.epochsMu.Lock()
	s.epochs = m
	s.epochsMu.Unlock()
}

// admitEpoch reports whether an envelope of key (one accepts took) may
// be pooled under MaxEpochsPerPool, counting its epoch as pooled when it
// is.
func (s *Shuffler) admitEpoch(key string) bool {
	pool, epoch, _, _ := report.ParsePoolKey(key)
	s.epochsMu.Lock()
	defer s.epochsMu.Unlock()
	set := s.epochs[pool]
	if set[epoch] {
		return true
	}
	if len(set) >= s.o.MaxEpochsPerPool {
		return false
	}
	if set == nil {
		set = map[string]bool{}
		s.epochs[pool] = set
	}
	set[epoch] = true
	return true
}

// validEpoch reports whether epoch is plan.EpochLen lowercase hex digits.
func validEpoch(epoch string) bool {
	if len(epoch) != plan.EpochLen {
		return false
	}
	for _, c := range epoch {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

type poolSize struct {
	metric string
	suite  uint16
	n      int64
}
