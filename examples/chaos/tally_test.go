package chaos

// The books both scenarios compare, per metric and period: what the users
// recorded (the CLI-shaped test knows it), what the apps' ledgers say the
// shuffler acknowledged, and what the collector counted, held or found
// malformed. The comparison is exact and prints the whole table when a
// row is off.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/collector"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// cell is one metric in one reporting period (its index, plan.PeriodOf).
type cell struct {
	metric string
	period int64
}

// books holds the counts of every cell.
type books struct {
	pl        *plan.Plan
	recorded  map[cell]int64                        // what users recorded; nil when not known
	acked     map[cell]int64                        // ledger entries acknowledged by the shuffler
	notAcked  map[cell]map[client.UploadState]int64 // ledger entries in any other state
	counted   map[cell]int64                        // the collector's valid reports in estimates
	held      map[cell]int64                        // the collector's held reports
	malformed map[cell]int64                        // the collector's malformed reports
}

func newBooks(pl *plan.Plan) *books {
	return &books{pl: pl, acked: map[cell]int64{}, notAcked: map[cell]map[client.UploadState]int64{},
		counted: map[cell]int64{}, held: map[cell]int64{}, malformed: map[cell]int64{}}
}

// addLedger adds one app's ledger.
func (b *books) addLedger(entries []client.LedgerEntry) {
	for _, e := range entries {
		c := cell{e.Metric, b.pl.PeriodOf(e.Start)}
		if e.Upload == client.UploadAcknowledged {
			b.acked[c] += e.Reports
			continue
		}
		if b.notAcked[c] == nil {
			b.notAcked[c] = map[client.UploadState]int64{}
		}
		b.notAcked[c][e.Upload]++
	}
}

// addOutbox adds the ledger of the SQLite outbox in dataDir (an app not
// running).
func (b *books) addOutbox(ctx context.Context, t *testing.T, dataDir string) {
	t.Helper()
	ob, err := client.OpenSQLiteOutbox(ctx, dataDir+"/"+client.OutboxFile)
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	entries, err := ob.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.addLedger(entries)
}

// addCollector reads the collector's counts of every metric of the plan.
func (b *books) addCollector(ctx context.Context, s *server) {
	for _, m := range b.pl.Metrics {
		d := s.metricDetail(ctx, m.Name)
		for _, p := range d.Periods {
			b.addPeriod(m.Name, p)
		}
	}
}

func (b *books) addPeriod(metric string, p collector.PeriodEstimate) {
	if !p.Current {
		return
	}
	c := cell{metric, b.pl.PeriodOf(p.Start)}
	b.counted[c] += p.N
	b.held[c] += p.Held
	b.malformed[c] += p.Malformed
}

// cells returns every cell any book has, by metric then period.
func (b *books) cells() []cell {
	seen := map[cell]bool{}
	for _, m := range []map[cell]int64{b.recorded, b.acked, b.counted, b.held, b.malformed} {
		for c := range m {
			seen[c] = true
		}
	}
	for c := range b.notAcked {
		seen[c] = true
	}
	var out []cell
	for c := range seen {
		out = append(out, c)
	}
	slices.SortFunc(out, func(x, y cell) int {
		if x.metric != y.metric {
			return strings.Compare(x.metric, y.metric)
		}
		return int(x.period - y.period)
	})
	return out
}

// check compares the books cell by cell: every report a ledger says was
// acknowledged is counted once in its period, no ledger entry is left in
// another state, nothing is held or malformed, and, when recorded is
// known, every recorded report was acknowledged. The one loss the
// shuffler may make is a pool that received fewer than n_min reports in
// all (deleted at its deadline): such a cell must count 0. It returns the
// table, and whether every row holds.
func (b *books) check() (string, bool) {
	var sb strings.Builder
	ok := true
	first := int64(-1)
	fmt.Fprintf(&sb, "%-14s %-6s %-13s", "metric", "period", "start (UTC)")
	if b.recorded != nil {
		fmt.Fprintf(&sb, " %8s", "recorded")
	}
	fmt.Fprintf(&sb, " %8s %8s %6s %9s  %-18s %s\n", "acked", "counted", "held", "malformed", "ledger, not acked", "status")
	var tot [5]int64
	for _, c := range b.cells() {
		if first < 0 || c.period < first {
			first = c.period
		}
	}
	for _, c := range b.cells() {
		acked, counted := b.acked[c], b.counted[c]
		want := acked
		if acked < int64(b.pl.NMin) {
			want = 0 // a pool below n_min in all is deleted, never released
		}
		var bad []string
		if b.recorded != nil && b.recorded[c] != acked {
			bad = append(bad, fmt.Sprintf("recorded %d, acknowledged %d", b.recorded[c], acked))
		}
		if counted != want {
			bad = append(bad, fmt.Sprintf("counted %d, want %d", counted, want))
		}
		if len(b.notAcked[c]) > 0 {
			bad = append(bad, "ledger entries not acknowledged")
		}
		if b.held[c] != 0 || b.malformed[c] != 0 {
			bad = append(bad, "held or malformed reports")
		}
		status := "ok"
		if want == 0 && acked > 0 && counted == 0 {
			status = "ok (below n_min in all)"
		}
		if len(bad) > 0 {
			ok = false
			status = "WRONG: " + strings.Join(bad, "; ")
		}
		var na []string
		for st, n := range b.notAcked[c] {
			na = append(na, fmt.Sprintf("%q:%d", st, n))
		}
		slices.Sort(na)
		fmt.Fprintf(&sb, "%-14s %-6d %-13s", c.metric, c.period-first, b.pl.PeriodStart(c.period).UTC().Format("15:04:05"))
		if b.recorded != nil {
			fmt.Fprintf(&sb, " %8d", b.recorded[c])
		}
		fmt.Fprintf(&sb, " %8d %8d %6d %9d  %-18s %s\n", acked, counted, b.held[c], b.malformed[c], strings.Join(na, ","), status)
		tot[0] += b.recorded[c]
		tot[1] += acked
		tot[2] += counted
		tot[3] += b.held[c]
		tot[4] += b.malformed[c]
	}
	fmt.Fprintf(&sb, "%-34s", "total")
	if b.recorded != nil {
		fmt.Fprintf(&sb, " %8d", tot[0])
	}
	fmt.Fprintf(&sb, " %8d %8d %6d %9d\n", tot[1], tot[2], tot[3], tot[4])
	return sb.String(), ok
}

// report logs the table and fails t when a row is off.
func (b *books) report(t *testing.T) {
	t.Helper()
	table, ok := b.check()
	if !ok {
		t.Errorf("the collector's counts do not match the apps' books:\n%s", table)
		return
	}
	t.Logf("every report accounted for:\n%s", table)
}
