package krr_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/sdk"
)

// Example randomizes 10 000 screen names at eps0 = 2, accumulates the
// reports and estimates how many users were on each screen. The seeded
// source makes the output reproducible; leave Rand unset in production.
func Example() {
	ctx := context.Background()
	r, err := krr.New(krr.Options{
		Categories: []string{"home", "search", "settings"},
		Other:      "other",
		Rand:       rand.NewChaCha8([32]byte{1}),
	})
	if err != nil {
		panic(err)
	}
	var screens []string
	screens = append(screens, slices.Repeat([]string{"home"}, 6000)...)
	screens = append(screens, slices.Repeat([]string{"search"}, 3000)...)
	screens = append(screens, slices.Repeat([]string{"about"}, 1000)...) // counted as "other"
	const eps0 = 2.0
	reports, _ := r.Randomize(ctx, eps0, sdk.Inputs{Categories: screens})
	stat, _ := r.Accumulate(ctx, eps0, reports)
	est, _ := r.Estimate(ctx, stat)
	for _, it := range est.Items {
		fmt.Printf("%-8s %6.0f  [%6.0f, %6.0f]\n", it.Label, it.Post, it.PostLo, it.PostHi)
	}
	// Output:
	// home       5921  [  5795,   6048]
	// search     2999  [  2888,   3111]
	// settings     79  [     0,    173]
	// other      1001  [   901,   1101]
}
