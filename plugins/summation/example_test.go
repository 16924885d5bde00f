package summation_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/blanket-dp/blanket/plugins/summation"
	"github.com/blanket-dp/blanket/sdk"
)

// Example sums the session lengths (0 to 60 minutes) of 100 000 users. k
// follows the paper's choice for n = 100 000 and (eps, delta) = (1, 1e-6);
// eps0 = 6 stands in for the value the accountant would calibrate. The
// seeded source makes the output reproducible; leave Rand unset in
// production.
func Example() {
	ctx := context.Background()
	const n = 100_000
	k, err := summation.SuggestK(n, 1, 1e-6)
	if err != nil {
		panic(err)
	}
	r, err := summation.New(summation.Options{Lo: 0, Hi: 60, K: k, Rand: rand.NewChaCha8([32]byte{1})})
	if err != nil {
		panic(err)
	}
	minutes := make([]float64, n)
	var truth float64
	for i := range minutes {
		minutes[i] = float64(i%61) * 0.9 // 0 to 54 minutes
		truth += minutes[i]
	}
	const eps0 = 6.0
	reports, _ := r.Randomize(ctx, eps0, sdk.Inputs{Reals: minutes})
	stat, _ := r.Accumulate(ctx, eps0, reports)
	est, _ := r.Estimate(ctx, stat)
	fmt.Printf("k = %d, gamma = %.4f\n", k, summation.Gamma(k, eps0))
	fmt.Printf("true mean %.3f\n", truth/n)
	m := est.Items[1]
	fmt.Printf("estimate  %.3f [%.3f, %.3f]\n", m.Value, m.Lo, m.Hi)
	// Output:
	// k = 8, gamma = 0.0219
	// true mean 26.996
	// estimate  27.002 [26.969, 27.035]
}
