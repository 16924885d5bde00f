package collector

import (
	"context"
	"fmt"
	"maps"

	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// accepts reports whether the shuffler pools envelopes of key: a pool of
// its plan (plan.Plan.Pools), tagged with a plan epoch (report.PoolKey:
// each epoch pools apart, so that a released batch holds at least n_min
// reports of one epoch) or untagged.
func (s *Shuffler) accepts(key string) bool {
	pool, epoch := report.SplitPoolKey(key)
	return (*s.pools.Load())[pool] && (epoch == "" || validEpoch(epoch))
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
		pool, epoch := report.SplitPoolKey(p.metric)
		if epoch == "" || p.n == 0 {
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
	pool, epoch := report.SplitPoolKey(key)
	if epoch == "" {
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
