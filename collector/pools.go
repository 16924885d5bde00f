package collector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// errLate rejects an envelope of a period whose grace has passed.
var errLate = errors.New("its period ended more than the grace ago")

// known returns nil when key names a pool the shuffler may hold and
// release: a pool of its plan (plan.Plan.Pools), untagged or tagged with a
// well-formed plan epoch (report.PoolKey), and a period tag only after an
// epoch tag. Untagged and epoch-only keys are no longer accepted from apps
// (accepts) but may sit in a database written before reporting periods;
// they are released as before.
func (s *Shuffler) known(key string) error {
	pool, epoch, period, err := report.ParsePoolKey(key)
	switch {
	case err != nil:
		return err
	case !(*s.pools.Load())[pool]:
		return fmt.Errorf("unknown metric %q", key)
	case epoch != "" && !validEpoch(epoch):
		return fmt.Errorf("%q: malformed epoch %q", key, epoch)
	case !period.IsZero() && epoch == "":
		return fmt.Errorf("%q: a period tag without an epoch tag", key)
	}
	return nil
}

// errNoPeriod rejects an envelope without a reporting period.
var errNoPeriod = errors.New("no reporting period: sealed by an SDK older than reporting periods, whose reports no per-period guarantee covers; update the SDK")

// accepts returns nil when the shuffler pools envelopes of key, else why
// not: key must be known, tagged with a plan epoch and a reporting period
// (report.PeriodPoolKey: each epoch and each period pools apart, so that a
// released batch holds at least n_min reports of one epoch and one period;
// errNoPeriod otherwise), and the period must be open: not ended more than
// the grace ago (errLate), and not starting more than one period ahead of
// the shuffler's clock.
func (s *Shuffler) accepts(key string) error {
	if err := s.known(key); err != nil {
		return err
	}
	_, _, period, _ := report.ParsePoolKey(key)
	if period.IsZero() {
		return fmt.Errorf("%q: %w", key, errNoPeriod)
	}
	now := s.o.Now().Unix()
	switch {
	case now >= s.periodDeadline(period):
		return fmt.Errorf("%q: %w", key, errLate)
	case period.Start > now+period.Length:
		return fmt.Errorf("%q: the period starts more than one period after the shuffler's clock", key)
	}
	return nil
}

// periodDeadline returns the Unix second from which period's pools are
// closed: its end plus the grace.
func (s *Shuffler) periodDeadline(p report.Period) int64 {
	g := p.Length
	if s.o.PeriodGrace > 0 {
		g = int64(s.o.PeriodGrace / time.Second)
	}
	return p.End() + g
}

// expired reports whether key is a period's pool past its deadline.
func (s *Shuffler) expired(key string) bool {
	_, _, period, err := report.ParsePoolKey(key)
	return err == nil && !period.IsZero() && s.o.Now().Unix() >= s.periodDeadline(period)
}

// AddPools makes the shuffler take envelopes of pools too, for instance
// those of a new plan the collector published (PlanRelay.OnPlan), so that
// apps that fetched it are not refused. Pools are never removed: late
// reports of an earlier plan keep their pools.
func (s *Shuffler) AddPools(pools []string) {
	s.poolsMu.Lock()
	defer s.poolsMu.Unlock()
	next := map[string]bool{}
	if cur := s.pools.Load(); cur != nil {
		maps.Copy(next, *cur)
	}
	added := 0
	for _, p := range pools {
		if !next[p] {
			next[p] = true
			added++
		}
	}
	if added > 0 || s.pools.Load() == nil {
		s.pools.Store(&next)
	}
	if s.db == nil || added == 0 {
		return
	}
	for _, p := range pools {
		// Best effort: a pool not stored is learned again at the next
		// relayed plan.
		if _, err := s.db.w.Exec(`INSERT OR IGNORE INTO pools (name) VALUES (?)`, p); err != nil {
			s.log.Warn("storing a learned pool", "pool", p, "error", err)
		}
	}
}

// storedPools returns the pools learned by earlier runs.
func (s *Shuffler) storedPools(ctx context.Context) ([]string, error) {
	rows, err := s.db.r.QueryContext(ctx, `SELECT name FROM pools`)
	if err != nil {
		return nil, fmt.Errorf("collector: learned pools: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// trackEpochs resets the pooled epochs from the pool sizes.
func (s *Shuffler) trackEpochs(pools []poolSize) {
	m := map[string]map[string]bool{}
	for _, p := range pools {
		pool, epoch, _, err := report.ParsePoolKey(p.metric)
		if err != nil || epoch == "" || p.n == 0 {
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

// admitEpoch reports whether an envelope of key may be pooled under
// MaxEpochsPerPool, counting its epoch as pooled when it is.
func (s *Shuffler) admitEpoch(key string) bool {
	pool, epoch, _, err := report.ParsePoolKey(key)
	if err != nil || epoch == "" {
		return true
	}
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

func (s *Shuffler) poolSizes(ctx context.Context) ([]poolSize, error) {
	rows, err := s.db.r.QueryContext(ctx, `SELECT metric, suite, COUNT(*) FROM pool GROUP BY metric, suite ORDER BY metric, suite`)
	if err != nil {
		return nil, fmt.Errorf("collector: pool sizes: %w", err)
	}
	defer rows.Close()
	var out []poolSize
	for rows.Next() {
		var p poolSize
		var suite int64
		if err := rows.Scan(&p.metric, &suite, &p.n); err != nil {
			return nil, err
		}
		p.suite = uint16(suite)
		out = append(out, p)
	}
	return out, rows.Err()
}
