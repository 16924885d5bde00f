package client_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/client"
)

// TestOutboxStates checks the state metrics' part of the Outbox contract
// on every implementation: a closing with a step stores the state with
// its period, with or without an envelope, and closes the period for the
// metric; a step from a state that is no longer the stored one (another
// process stepped) or of a period not after the stored one (a replay)
// changes nothing; a carried value never goes back to an earlier period.
func TestOutboxStates(t *testing.T) {
	ctx := context.Background()
	const metric = "app/enabled"
	carried := func(day, v string) *client.Value {
		return &client.Value{Metric: metric, Period: dayPeriod(day), Kind: sdk.InputCategorical, Category: v}
	}
	for name, open := range outboxes(t) {
		t.Run(name, func(t *testing.T) {
			o := open()
			defer o.Close()
			// A first step, without a report.
			first := &client.StateStep{Metric: metric, Plan: "plan-a", Digest: "d", Next: []byte("s1")}
			if err := o.ClosePeriod(ctx, client.PeriodClose{Pool: metric, Period: dayPeriod("2026-03-01"), Step: first, Carry: carried("2026-03-01", "true")}); err != nil {
				t.Fatal(err)
			}
			states, err := o.States(ctx)
			if err != nil || len(states) != 1 || states[0].Last != dayPeriod("2026-03-01") || string(states[0].State) != "s1" {
				t.Fatalf("states %+v, %v; want s1 of 2026-03-01", states, err)
			}
			prev := &states[0]
			if _, err := o.Stage(ctx, client.Value{Pool: metric, Metric: metric, Plan: "plan-a", Period: dayPeriod("2026-03-01"), Kind: sdk.InputCategorical, Category: "x"}); !errors.Is(err, client.ErrPeriodClosed) {
				t.Errorf("staging into the stepped period: %v, want ErrPeriodClosed", err)
			}

			// The next step, with a report.
			c := sealedClose(metric, "2026-03-02", false)
			c.Step = &client.StateStep{Metric: metric, Plan: "plan-a", Digest: "d", Prev: prev, Next: []byte("s2")}
			c.Carry = carried("2026-03-02", "false")
			if err := o.ClosePeriod(ctx, c); err != nil {
				t.Fatal(err)
			}

			refused := []struct {
				name string
				c    client.PeriodClose
				want error
			}{
				{"a first step again", client.PeriodClose{Pool: metric, Period: dayPeriod("2026-03-03"),
					Step: &client.StateStep{Metric: metric, Plan: "plan-a", Digest: "d", Next: []byte("bad")}}, client.ErrStalePeriod},
				{"from a state no longer stored", client.PeriodClose{Pool: metric, Period: dayPeriod("2026-03-03"),
					Step: &client.StateStep{Metric: metric, Plan: "plan-a", Digest: "d", Prev: prev, Next: []byte("bad")}}, client.ErrStalePeriod},
				{"a stepped period again", client.PeriodClose{Pool: metric, Period: dayPeriod("2026-03-02"),
					Step: &client.StateStep{Metric: metric, Plan: "plan-a", Digest: "d", Prev: &client.MetricState{Metric: metric, Plan: "plan-a", Digest: "d", Last: dayPeriod("2026-03-02")}, Next: []byte("bad")}},
					client.ErrPeriodClosed},
			}
			for _, tc := range refused {
				tc.c.Carry = carried("2026-03-09", "bad")
				if err := o.ClosePeriod(ctx, tc.c); !errors.Is(err, tc.want) {
					t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
				}
			}
			// A replay whose period the outbox lost as closed is refused
			// by the state's last period.
			replay := client.PeriodClose{Pool: "elsewhere", Period: dayPeriod("2026-03-01"),
				Step: &client.StateStep{Metric: "app/other", Plan: "plan-a", Digest: "d", Next: []byte("o1")}}
			if err := o.ClosePeriod(ctx, replay); err != nil {
				t.Fatal(err)
			}
			sts, _ := o.States(ctx) // app/enabled's, then app/other's
			replay.Period = dayPeriod("2026-02-27")
			replay.Step.Prev = &sts[1]
			if err := o.ClosePeriod(ctx, replay); !errors.Is(err, client.ErrPeriodClosed) {
				t.Errorf("a period before the state's last: %v, want ErrPeriodClosed", err)
			}

			states, err = o.States(ctx)
			if err != nil || len(states) != 2 || string(states[0].State) != "s2" || states[0].Last != dayPeriod("2026-03-02") {
				t.Fatalf("states after the refusals %+v, %v; want s2 of 2026-03-02", states, err)
			}
			if env, err := o.Pending(ctx, 10); err != nil || len(env) != 1 {
				t.Errorf("pending %d, %v; want the one envelope", len(env), err)
			}
			got, err := o.Carried(ctx)
			if err != nil || len(got) != 1 || *carried("2026-03-02", "false") != got[0] {
				t.Fatalf("carried %+v, %v; want false of 2026-03-02", got, err)
			}
			// An earlier period's value does not replace a later one's.
			if err := o.ClosePeriod(ctx, client.PeriodClose{Pool: metric, Period: dayPeriod("2026-02-28"), Carry: carried("2026-02-28", "old")}); err != nil {
				t.Fatal(err)
			}
			if got, _ := o.Carried(ctx); len(got) != 1 || got[0].Category != "false" {
				t.Errorf("carried %+v after an earlier period's, want false", got)
			}
			// Another plan's run is another state.
			other := &client.StateStep{Metric: metric, Plan: "plan-b", Digest: "d", Next: []byte("b1")}
			if err := o.ClosePeriod(ctx, client.PeriodClose{Pool: metric, Period: dayPeriod("2026-03-04"), Step: other}); err != nil {
				t.Fatal(err)
			}
			if states, _ := o.States(ctx); len(states) != 3 || states[1].Plan != "plan-b" || !bytes.Equal(states[1].State, []byte("b1")) || string(states[0].State) != "s2" {
				t.Errorf("states %+v, want plan-a's s2 and plan-b's b1", states)
			}
		})
	}
}
