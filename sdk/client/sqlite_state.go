package client

import (
	"context"
	"database/sql"
	"errors"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/report"
)

// The state metrics' part of the SQLite outbox: the randomizers' states
// (metric_states) and the values carried forward (carried_values),
// written by ClosePeriod in the transaction that commits the period's
// envelope.

// commitState writes c's step and carried value in tx, after checking
// that the step may commit (checkStep). The caller has checked that the
// period is not closed for the metric stepped.
func (o *SQLiteOutbox) commitState(ctx context.Context, tx *sql.Tx, c PeriodClose) error {
	p := c.Period
	if st := c.Step; st != nil {
		cur, err := readState(ctx, tx, st.Metric, st.Plan, st.Digest)
		if err != nil {
			return o.errf("state: %w", err)
		}
		if err := checkStep(st, cur, p); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO metric_states (metric, plan, digest, start, length, state) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (metric, plan, digest) DO UPDATE SET start = excluded.start, length = excluded.length, state = excluded.state`,
			st.Metric, st.Plan, st.Digest, p.Start, p.Length, st.Next); err != nil {
			return o.errf("state: %w", err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO closed_periods (pool, start, length) VALUES (?, ?, ?) ON CONFLICT DO NOTHING", st.Metric, p.Start, p.Length); err != nil {
			return o.errf("close period: %w", err)
		}
	}
	if v := c.Carry; v != nil {
		if _, err := tx.ExecContext(ctx, `INSERT INTO carried_values (metric, start, length, kind, category, total) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (metric) DO UPDATE SET start = excluded.start, length = excluded.length, kind = excluded.kind,
			category = excluded.category, total = excluded.total WHERE excluded.start >= carried_values.start`,
			v.Metric, v.Period.Start, v.Period.Length, int(v.Kind), v.Category, v.Sum); err != nil {
			return o.errf("carried value: %w", err)
		}
	}
	return nil
}

// readState returns the stored state of a run, or nil.
func readState(ctx context.Context, tx *sql.Tx, metric, plan, digest string) (*MetricState, error) {
	s := &MetricState{Metric: metric, Plan: plan, Digest: digest}
	err := tx.QueryRowContext(ctx, "SELECT start, length, state FROM metric_states WHERE metric = ? AND plan = ? AND digest = ?", metric, plan, digest).
		Scan(&s.Last.Start, &s.Last.Length, &s.State)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// States implements Outbox.
func (o *SQLiteOutbox) States(ctx context.Context) ([]MetricState, error) {
	rows, err := o.db.QueryContext(ctx, "SELECT metric, plan, digest, start, length, state FROM metric_states ORDER BY metric, plan, digest")
	if err != nil {
		return nil, o.errf("states: %w", err)
	}
	defer rows.Close()
	var out []MetricState
	for rows.Next() {
		var s MetricState
		if err := rows.Scan(&s.Metric, &s.Plan, &s.Digest, &s.Last.Start, &s.Last.Length, &s.State); err != nil {
			return nil, o.errf("states: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, o.errf("states: %w", err)
	}
	return out, nil
}

// Carried implements Outbox.
func (o *SQLiteOutbox) Carried(ctx context.Context) ([]Value, error) {
	rows, err := o.db.QueryContext(ctx, "SELECT metric, start, length, kind, category, total FROM carried_values ORDER BY metric")
	if err != nil {
		return nil, o.errf("carried values: %w", err)
	}
	defer rows.Close()
	var out []Value
	for rows.Next() {
		var v Value
		var kind int
		var p report.Period
		if err := rows.Scan(&v.Metric, &p.Start, &p.Length, &kind, &v.Category, &v.Sum); err != nil {
			return nil, o.errf("carried values: %w", err)
		}
		v.Period, v.Kind = p, sdk.InputKind(kind)
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, o.errf("carried values: %w", err)
	}
	return out, nil
}
