package collector

import (
	"context"
	"fmt"
	"sync"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/report"
)

// The open-and-accumulate stage of Ingest: opening a batch's sealed
// reports under an epoch's binding, and accumulating the valid ones with
// the metrics' plugins (one metric's reports, or pooled messages).

// accumulate accumulates the opened reports of pool in epoch e: a
// metric's reports, or pooled messages. It returns the metrics' rows and
// statistics, and the number of valid reports or messages.
func (c *Collector) accumulate(ctx context.Context, e *epochState, pool string, plain [][]byte) ([]metricBatch, int64, error) {
	if e.pool != nil {
		return c.accumulatePool(ctx, e.pool, plain)
	}
	ms := e.metrics[pool]
	stat, err := ms.r.Accumulate(ctx, ms.m.Eps0, plain)
	if err != nil {
		return nil, 0, fmt.Errorf("collector: metric %q: accumulating: %w", ms.m.Name, err)
	}
	if err := checkAccumulated(stat, ms, len(plain)); err != nil {
		return nil, 0, err
	}
	return []metricBatch{{rec: batchRecord{metric: pool, n: stat.N, malformed: stat.Malformed}, stat: stat}}, stat.N, nil
}

// accumulatePool splits pooled messages into their parts and accumulates
// them per metric. It returns the metrics' contributions (those with at
// least one report) and the number of valid messages: those that decode,
// carry what the travel mode says, and none of whose parts a plugin
// dropped. (A message with a dropped part still went through the
// shuffle, so not counting it understates the batch: the guarantee can
// only come out weaker.)
func (c *Collector) accumulatePool(ctx context.Context, ps *poolState, plain [][]byte) ([]metricBatch, int64, error) {
	per := make([][][]byte, len(ps.metrics))
	valid := int64(0)
	for _, pt := range plain {
		msg, err := report.DecodeMessage(pt)
		if err != nil || !ps.valid(msg) {
			continue
		}
		valid++
		for _, p := range msg {
			per[p.Metric] = append(per[p.Metric], p.Report)
		}
	}
	var out []metricBatch
	for i, ms := range ps.metrics {
		if len(per[i]) == 0 {
			continue
		}
		stat, err := ms.r.Accumulate(ctx, ms.m.Eps0, per[i])
		if err != nil {
			return nil, 0, fmt.Errorf("collector: metric %q: accumulating: %w", ms.m.Name, err)
		}
		if err := checkAccumulated(stat, ms, len(per[i])); err != nil {
			return nil, 0, err
		}
		valid -= stat.Malformed
		out = append(out, metricBatch{rec: batchRecord{metric: ms.m.Name, n: stat.N, malformed: stat.Malformed}, stat: stat})
	}
	return out, max(valid, 0), nil
}

// valid reports whether a decoded message carries what the pool's travel
// mode says: every metric once, in plan order (joint), or exactly one
// metric (parallel), each part of its plugin's report length.
func (ps *poolState) valid(msg []report.Part) bool {
	switch accountant.Travel(ps.travel) {
	case accountant.TravelJoint:
		if len(msg) != len(ps.metrics) {
			return false
		}
		for i, p := range msg {
			if p.Metric != i {
				return false
			}
		}
	case accountant.TravelParallel:
		if len(msg) != 1 || msg[0].Metric >= len(ps.metrics) {
			return false
		}
	default:
		return false
	}
	for _, p := range msg {
		if rb := ps.metrics[p.Metric].desc.ReportBytes; rb > 0 && len(p.Report) != rb {
			return false
		}
	}
	return true
}

// checkAccumulated checks a plugin's statistic for a batch of n reports:
// it must be of the metric's plugin, configuration and eps0 and count each
// report once. A plugin that lies is an error, not data.
func checkAccumulated(s *sdk.Statistic, ms *metricState, n int) error {
	ref := &sdk.Statistic{Plugin: ms.desc.Name, Digest: ms.desc.Digest, Eps0: ms.m.Eps0}
	if s == nil {
		return fmt.Errorf("collector: metric %q: plugin returned no statistic", ms.m.Name)
	}
	ref.Counts = make([]int64, len(s.Counts))
	if err := ref.Compatible(s); err != nil {
		return fmt.Errorf("collector: metric %q: plugin statistic: %w", ms.m.Name, err)
	}
	if s.N < 0 || s.Malformed < 0 || s.N+s.Malformed != int64(n) {
		return fmt.Errorf("collector: metric %q: plugin counted N = %d and Malformed = %d for %d reports", ms.m.Name, s.N, s.Malformed, n)
	}
	return nil
}

// openAll opens the sealed reports of a batch with key and binding, in
// parallel. It returns the plaintexts of those that open and, when
// reportBytes > 0, have that length.
func (c *Collector) openAll(key *report.PrivateKey, binding report.Binding, reportBytes int, sealed [][]byte) [][]byte {
	out := make([][]byte, len(sealed))
	workers := max(1, min(c.o.Workers, len(sealed)/64))
	var wg sync.WaitGroup
	chunk := (len(sealed) + workers - 1) / workers
	for w := range workers {
		lo, hi := w*chunk, min(len(sealed), (w+1)*chunk)
		if lo >= hi {
			break
		}
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				if pt, err := report.Open(key, binding, sealed[i]); err == nil && (reportBytes <= 0 || len(pt) == reportBytes) {
					out[i] = pt
				}
			}
		})
	}
	wg.Wait()
	plain := out[:0]
	for _, pt := range out {
		if pt != nil {
			plain = append(plain, pt)
		}
	}
	return plain
}

// IngestStats are the collector's ingest counters since it was opened.
type IngestStats struct {
	// Batches counts batches ingested; Duplicates, batches acknowledged
	// again without counting; Bad, bodies that did not decode; Refused,
	// well-formed batches refused.
	Batches    int64 `json:"batches"`
	Duplicates int64 `json:"duplicates"`
	Bad        int64 `json:"bad"`
	Refused    int64 `json:"refused"`
	// Reports and Malformed count valid and dropped reports.
	Reports   int64 `json:"reports"`
	Malformed int64 `json:"malformed"`
	// Held counts the ingested batches with fewer than n_min valid
	// reports (of an epoch), HeldReports those reports: stored and counted
	// in Batches and Reports, held out of every estimate until later
	// batches of their pool, epoch and period bring them to n_min
	// (IngestResult.Held).
	Held        int64 `json:"held"`
	HeldReports int64 `json:"held_reports"`
	// KeyDeleted counts the reports (of Malformed) of batches of a period
	// whose report key was deleted: they arrived too late to be opened.
	KeyDeleted int64 `json:"key_deleted"`
	// Draws counts the shuffler's blanket draws of ingested batches (a
	// plan's floor), in neither Reports nor Malformed.
	Draws int64 `json:"draws"`
}
