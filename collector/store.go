package collector

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/report"
)

// store is where a collector keeps its report key schedule, published
// plans, batches and statistics: sqliteStore, the embedded default for
// one process, or pgStore, shared by replicas on one PostgreSQL database.
// Every method that writes commits before it returns.
type store interface {
	// reportKeys returns the report key schedule (keys.go), by start,
	// with the private halves the database keeps.
	reportKeys(ctx context.Context) ([]keyRow, error)
	// changeKeys changes the schedule in one transaction under the
	// publication lock, so that the changes of every replica and of
	// blanket collector rotate-key follow each other: change gets the
	// schedule as it is under the lock and returns the change to make.
	// Nothing is written when change fails or returns an empty change.
	changeKeys(ctx context.Context, change func([]keyRow) (keyChange, error)) error
	// planSigner returns the collector's plan-signing key and its
	// rollover chain, generated and stored on first use (every replica
	// shares it); created says whether this call generated it.
	planSigner(ctx context.Context) (s *planSigner, created bool, err error)
	// lockPublish holds off other replicas' publication of a plan until
	// unlock (so that replicas starting together calibrate once).
	lockPublish(ctx context.Context) (unlock func(), err error)
	// calibration returns the latest plan published for the configured
	// plan digest source, or nil.
	calibration(ctx context.Context, source string) ([]byte, error)
	// addEpoch records a published plan, without its key schedule
	// (nothing when epoch is recorded).
	addEpoch(ctx context.Context, epoch, source string, plan []byte) error
	// plans returns the plans published other than epoch except, newest
	// first.
	plans(ctx context.Context, except string) ([]storedEpoch, error)
	// epochPlan returns the plan published as epoch, or nil.
	epochPlan(ctx context.Context, epoch string) ([]byte, error)
	// hasBatch reports whether batch id was ingested.
	hasBatch(ctx context.Context, id report.ID) (bool, error)
	// commitBatch records batch id and its group in one transaction
	// (fateOf decides the group's fate: its statistics merged, or held
	// with the other held batches of its pool, epoch and period, and all
	// of them merged once they reach n_min). It reports duplicate, and
	// changes nothing, when the batch id is recorded already (by any
	// replica), and whether it held the group.
	commitBatch(ctx context.Context, id report.ID, g batchGroup) (duplicate, held bool, err error)
	// statistics returns the statistics of metric, or of every metric
	// when metric is "", by metric, then epoch in the order published,
	// then period.
	statistics(ctx context.Context, metric string) ([]statRow, error)
	// heldStatistics returns, as statistics does, the merged statistics
	// of the held batches (in no estimate yet).
	heldStatistics(ctx context.Context, metric string) ([]statRow, error)
	// batchList returns the batches of metric in epoch and period, in
	// ingestion order.
	batchList(ctx context.Context, metric, epoch string, period report.Period) ([]batchRecord, error)
	// periodParts returns, for every period, epoch and pool with
	// batches, the smallest batch (in shuffled messages), by period
	// start (horizon.go).
	periodParts(ctx context.Context) ([]horizonPart, error)
	// periodTotals returns, per reporting period with batches, the
	// batches, held batches, valid and malformed reports stored (stored.go),
	// by period start.
	periodTotals(ctx context.Context) ([]storedRow, error)
	// ready returns nil when the store takes reads and writes.
	ready(ctx context.Context) error
	// close releases the store.
	close() error
}

// hooks are test hooks of a store.
type hooks struct {
	// beforeCommit, when set, runs inside the ingest transaction after
	// every write and before the commit.
	beforeCommit func()
}

// storedEpoch is a published plan.
type storedEpoch struct {
	epoch string
	plan  []byte
}

// statRecord is the stored form of an sdk.Statistic.
type statRecord struct {
	Plugin    string  `json:"plugin"`
	Digest    string  `json:"digest"`
	Eps0      float64 `json:"eps0"`
	N         int64   `json:"n"`
	Malformed int64   `json:"malformed"`
	Counts    []int64 `json:"counts"`
	// Draws is how many of N are the shuffler's blanket draws (floor.go).
	Draws int64 `json:"draws,omitempty"`
}

func encodeStat(s *sdk.Statistic) ([]byte, error) {
	return json.Marshal(statRecord{s.Plugin, s.Digest, s.Eps0, s.N, s.Malformed, s.Counts, s.Draws})
}

func decodeStat(b []byte) (*sdk.Statistic, error) {
	var r statRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("collector: stored statistic: %w", err)
	}
	return &sdk.Statistic{Plugin: r.Plugin, Digest: r.Digest, Eps0: r.Eps0, N: r.N, Malformed: r.Malformed, Counts: r.Counts, Draws: r.Draws}, nil
}

// batchRecord is one row of the batches table.
type batchRecord struct {
	id        report.ID
	metric    string
	epoch     string
	n         int64
	malformed int64
	messages  int64
	// draws is the shuffler's blanket draws the batch's guarantee counts
	// (floor.go): besides n, never among them.
	draws  int64
	eps    *float64
	delta  *float64
	period report.Period
	// held is set while the batch's statistic waits, held, for more of
	// its pool, epoch and period (fateOf).
	held bool
}

// metricBatch is what one batch adds to one metric in one epoch: its row
// of the batches table and the statistic to merge (nil: none).
type metricBatch struct {
	rec  batchRecord
	stat *sdk.Statistic
}

// batchGroup is what one batch adds to one pool in one epoch: the rows
// and statistics of the metrics it carries, and its valid reports
// (messages, with pooled travel).
type batchGroup struct {
	// pool, epoch and period name the group's pool key.
	pool, epoch string
	period      report.Period
	// messages is the group's valid reports (messages); nMin the n_min of
	// its epoch's plan.
	messages, nMin int64
	// names are every metric row name of the pool: the pool's own (a
	// metric's with separate travel, the pool row of a batch with no
	// valid message) and its metrics'.
	names []string
	parts []metricBatch
}

// groupFate is what an ingest does with a group of a batch.
type groupFate int

const (
	// mergeOwn merges the group's statistics (of no valid report: its
	// malformed counts only) into the published ones, the held batches
	// untouched.
	mergeOwn groupFate = iota
	// hold keeps the group's statistics with the held ones.
	hold
	// publish merges the held statistics of the group's pool key and the
	// group's own into the published ones, and clears the held ones.
	publish
)

// fateOf decides the fate of a group whose pool key holds heldMessages
// valid reports of held batches (ingest.go): publish when they reach the
// group's n_min together, hold otherwise; a group without a valid report
// changes no estimate and leaves the held ones be.
func fateOf(g batchGroup, heldMessages int64) groupFate {
	switch {
	case g.messages == 0:
		return mergeOwn
	case heldMessages+g.messages >= g.nMin:
		return publish
	}
	return hold
}

// mergeGroup returns, per metric of g's pool, the statistic to merge into
// the published ones when g publishes: its own part's merged with the
// held one (held, by metric; either may be absent), and the batches it
// adds.
func mergeGroup(g batchGroup, held map[string]statRow) ([]metricMerge, error) {
	var out []metricMerge
	seen := map[string]bool{}
	for _, p := range g.parts {
		if p.stat == nil {
			continue
		}
		m := metricMerge{metric: p.rec.metric, stat: p.stat, batches: 1}
		if h, ok := held[p.rec.metric]; ok {
			merged := *h.stat
			merged.Counts = append([]int64(nil), h.stat.Counts...)
			if err := merged.Merge(p.stat); err != nil {
				return nil, fmt.Errorf("collector: merging batch %s into the held batches of %s/%s/%s: %w", p.rec.id, p.rec.metric, g.epoch, g.period, err)
			}
			m.stat, m.batches = &merged, 1+h.batches
		}
		seen[p.rec.metric] = true
		out = append(out, m)
	}
	for name, h := range held {
		if !seen[name] {
			out = append(out, metricMerge{metric: name, stat: h.stat, batches: h.batches})
		}
	}
	return out, nil
}

// metricMerge is a statistic to merge into one metric's row of an epoch
// and period, and the batches it counts.
type metricMerge struct {
	metric  string
	stat    *sdk.Statistic
	batches int64
}

// mergeStats returns the encoded merge of stat into old (nil: none).
func mergeStats(old []byte, stat *sdk.Statistic, what string) ([]byte, error) {
	if old == nil {
		return encodeStat(stat)
	}
	prev, err := decodeStat(old)
	if err != nil {
		return nil, err
	}
	if err := prev.Merge(stat); err != nil {
		return nil, fmt.Errorf("collector: merging into %s: %w", what, err)
	}
	return encodeStat(prev)
}

// statRow is one metric's statistic in one epoch and period.
type statRow struct {
	metric, epoch string
	period        report.Period
	stat          *sdk.Statistic
	batches       int64
}
