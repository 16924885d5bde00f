package builtin_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/plugins/longitudinal"
	"github.com/blanket-dp/blanket/sdk"
)

// TestEstimateRefusesDraws: every built-in's Estimate refuses a
// statistic of its own reports that holds the shuffler's blanket draws,
// with an error wrapping sdk.ErrBadStatistic that names EstimateFloor;
// every built-in that draws from its blanket estimates the statistic by
// EstimateFloor, for N - Draws reports, and the one that does not
// (longitudinal, a tree protocol) answers errors.ErrUnsupported.
func TestEstimateRefusesDraws(t *testing.T) {
	ctx := context.Background()
	cats := sdk.Config{Categories: []string{"a", "b", "c"}}
	configs := map[string]sdk.Config{
		"krr":          cats,
		"hadamard":     cats,
		"rappor":       cats,
		"summation":    {Lo: 0, Hi: 1, Params: map[string]string{"k": "4"}},
		"laplace":      {Lo: 0, Hi: 1},
		"longitudinal": {Categories: []string{"off", "on"}},
	}
	names := slices.Sorted(maps.Keys(builtin.Factories()))
	if !slices.Equal(names, slices.Sorted(maps.Keys(configs))) {
		t.Fatalf("built-ins %q, this test configures %q", names, slices.Sorted(maps.Keys(configs)))
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			r, err := builtin.Open(ctx, name, configs[name])
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			d, err := r.Describe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var in sdk.Inputs
			if d.Input == sdk.InputReal {
				in.Reals = []float64{0.1, 0.5, 0.9, 0.3}
			} else {
				in.Categories = []string{d.Categories[0], d.Categories[1], d.Categories[0], d.Categories[1]}
			}
			var reports [][]byte
			if d.Stateful {
				// The users' reports of the periods until some report:
				// a tree protocol's users send none in some periods.
				states := make([][]byte, in.Len())
				for p := int64(0); len(reports) < 2 && p < 64; p++ {
					var reps [][]byte
					if reps, states, err = r.Step(ctx, 1, p, states, in); err != nil {
						t.Fatal(err)
					}
					for _, rep := range reps {
						if len(rep) > 0 {
							reports = append(reports, rep)
						}
					}
				}
			} else if reports, err = r.Randomize(ctx, 1, in); err != nil {
				t.Fatal(err)
			}
			stat, err := r.Accumulate(ctx, 1, reports)
			if err != nil {
				t.Fatal(err)
			}
			if stat.N < 2 {
				t.Fatalf("%d valid reports of %d inputs", stat.N, in.Len())
			}
			stat.Draws = 1
			if _, err := r.Estimate(ctx, stat); !errors.Is(err, sdk.ErrBadStatistic) || !strings.Contains(err.Error(), "EstimateFloor") {
				t.Errorf("Estimate of a statistic with draws: %v, want an error wrapping sdk.ErrBadStatistic that names EstimateFloor", err)
			}
			est, err := r.EstimateFloor(ctx, stat)
			switch {
			case name == longitudinal.Name:
				if !errors.Is(err, errors.ErrUnsupported) {
					t.Errorf("EstimateFloor of a randomizer without a blanket sampler: %v, want errors.ErrUnsupported", err)
				}
			case err != nil || est.N != stat.N-1:
				t.Errorf("EstimateFloor: %+v, %v; want an estimate of N - Draws = %d reports", est, err, stat.N-1)
			}
		})
	}
}
