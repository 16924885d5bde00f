package ksubset_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/blanket-dp/blanket/examples/ksubset"
	"github.com/blanket-dp/blanket/sdk"
)

// Example randomizes 20,000 browser names at eps0 = 2 into subsets of 2
// of the 8 buckets, accumulates the reports and estimates how many users
// have each browser. The seeded source makes the output reproducible;
// leave Rand unset in production.
func Example() {
	ctx := context.Background()
	r, err := ksubset.New(ksubset.Options{
		Categories: []string{"chrome", "safari", "edge", "firefox", "samsung", "opera", "brave"},
		Other:      "other",
		S:          2,
		Rand:       rand.NewChaCha8([32]byte{1}),
	})
	if err != nil {
		panic(err)
	}
	var browsers []string
	browsers = append(browsers, slices.Repeat([]string{"chrome"}, 12000)...)
	browsers = append(browsers, slices.Repeat([]string{"safari"}, 5000)...)
	browsers = append(browsers, slices.Repeat([]string{"firefox"}, 2000)...)
	browsers = append(browsers, slices.Repeat([]string{"lynx"}, 1000)...) // counted as "other"
	const eps0 = 2.0
	reports, _ := r.Randomize(ctx, eps0, sdk.Inputs{Categories: browsers})
	stat, _ := r.Accumulate(ctx, eps0, reports)
	est, _ := r.Estimate(ctx, stat)
	fmt.Printf("%d-byte reports, each a subset of %d buckets\n", len(reports[0]), r.S())
	for _, it := range est.Items {
		fmt.Printf("%-8s %6.0f  [%6.0f, %6.0f]\n", it.Label, it.Post, it.PostLo, it.PostHi)
	}
	// Output:
	// 1-byte reports, each a subset of 2 buckets
	// chrome    12145  [ 11919,  12370]
	// safari     4812  [  4600,   5025]
	// edge          0  [     0,    141]
	// firefox    2039  [  1831,   2246]
	// samsung       0  [     0,      8]
	// opera        64  [     0,    268]
	// brave         0  [     0,     51]
	// other       940  [   735,   1146]
}
