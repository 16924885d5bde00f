package collector

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/report"
)

// store is where a collector keeps its key, published plans, batches and
// statistics: sqliteStore, the embedded default for one process, or
// pgStore, shared by replicas on one PostgreSQL database. Every method
// that writes commits before it returns.
type store interface {
	// key returns the collector's private key, generated and stored on
	// first use (every replica of a database shares it); created says
	// whether this call generated it.
	key(ctx context.Context) (key *report.PrivateKey, created bool, err error)
	// lockPublish holds off other replicas' publication of a plan until
	// unlock (so that replicas starting together calibrate once).
	lockPublish(ctx context.Context) (unlock func(), err error)
	// calibration returns the latest plan published for the configured
	// plan digest source under key, or nil.
	calibration(ctx context.Context, source, key string) ([]byte, error)
	// addEpoch records a published plan (nothing when epoch is recorded).
	addEpoch(ctx context.Context, epoch, source, key string, plan []byte) error
	// plans returns up to limit (0: all) plans published under key other
	// than epoch except, newest first.
	plans(ctx context.Context, key, except string, limit int) ([]storedEpoch, error)
	// epochPlan returns the plan published as epoch, under key unless
	// key is "", or nil.
	epochPlan(ctx context.Context, epoch, key string) ([]byte, error)
	// hasBatch reports whether batch id was ingested.
	hasBatch(ctx context.Context, id report.ID) (bool, error)
	// commitBatch records a batch and merges its statistics, one per
	// metric it carries, in one transaction; it reports duplicate, and
	// changes nothing, when the batch id is recorded already (by any
	// replica).
	commitBatch(ctx context.Context, parts []metricBatch) (duplicate bool, err error)
	// statistics returns the statistics of metric, or of every metric
	// when metric is "", by metric, then epoch in the order published,
	// then period.
	statistics(ctx context.Context, metric string) ([]statRow, error)
	// batchList returns the batches of metric in epoch and period, in
	// ingestion order.
	batchList(ctx context.Context, metric, epoch string, period report.Period) ([]batchRecord, error)
	// periodParts returns, for every period, epoch and pool with
	// batches, the smallest batch (in shuffled messages), by period
	// start (horizon.go).
	periodParts(ctx context.Context) ([]horizonPart, error)
	// unperiodedReports returns the valid reports stored without a
	// period.
	unperiodedReports(ctx context.Context) (int64, error)
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
}

func encodeStat(s *sdk.Statistic) ([]byte, error) {
	return json.Marshal(statRecord{s.Plugin, s.Digest, s.Eps0, s.N, s.Malformed, s.Counts})
}

func decodeStat(b []byte) (*sdk.Statistic, error) {
	var r statRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("collector: stored statistic: %w", err)
	}
	return &sdk.Statistic{Plugin: r.Plugin, Digest: r.Digest, Eps0: r.Eps0, N: r.N, Malformed: r.Malformed, Counts: r.Counts}, nil
}

// batchRecord is one row of the batches table.
type batchRecord struct {
	id        report.ID
	metric    string
	epoch     string
	n         int64
	malformed int64
	messages  int64
	eps       *float64
	delta     *float64
	period    report.Period
}

// metricBatch is what one batch adds to one metric in one epoch: its row
// of the batches table and the statistic to merge (nil: none).
type metricBatch struct {
	rec  batchRecord
	stat *sdk.Statistic
}

// statRow is one metric's statistic in one epoch and period.
type statRow struct {
	metric, epoch string
	period        report.Period
	stat          *sdk.Statistic
	batches       int64
}

// mergeStat returns the encoded statistic of b's metric, epoch and period
// after stat merges into old (the stored one, nil for none).
func mergeStat(b batchRecord, old []byte, stat *sdk.Statistic) ([]byte, error) {
	merged := stat
	if old != nil {
		prev, err := decodeStat(old)
		if err != nil {
			return nil, err
		}
		if err := prev.Merge(stat); err != nil {
			return nil, fmt.Errorf("collector: merging batch %s into %s/%s/%s: %w", b.id, b.metric, b.epoch, b.period, err)
		}
		merged = prev
	}
	return encodeStat(merged)
}
