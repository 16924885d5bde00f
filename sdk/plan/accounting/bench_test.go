package accounting_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/plan/accounting"
)

var sinkF float64

// BenchmarkCalibrateDemoPlan measures the calibration of the demo plan
// (examples/plan.yaml: k-RR over 20 categories, RAPPOR over 12, summation
// with k = 8, separate travel, n_min = 1e4, target (1, 1e-6)) through the
// built-in plugins, for one period and for a horizon of 365.
func BenchmarkCalibrateDemoPlan(b *testing.B) {
	open := func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
		return builtin.Open(ctx, name, cfg)
	}
	for _, rounds := range []int{1, 365} {
		b.Run(fmt.Sprintf("rounds=%d", rounds), func(b *testing.B) {
			for b.Loop() {
				accountant.ForgetMemo() // time the computation, not the memo
				p, err := plan.Load("../../../examples/plan.yaml")
				if err != nil {
					b.Fatal(err)
				}
				if err := accounting.CalibrateRounds(context.Background(), p, open, rounds); err != nil {
					b.Fatal(err)
				}
				sinkF = p.Guarantee.Eps
			}
		})
	}
}
