package olh_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/blanket-dp/blanket/examples/custom-plugin/olh"
	"github.com/blanket-dp/blanket/sdk"
)

// Example estimates how many of 20 000 users chose each of 50 pages, with
// 4-byte reports at eps0 = 2: g = 11 hash values (of the primes 7 and 11
// next to e^2 + 1 = 8.4, the one with the smaller variance) and 1320 seeds. The seeded source makes
// the output reproducible; leave Rand unset in production.
func Example() {
	ctx := context.Background()
	pages := make([]string, 50)
	for i := range pages {
		pages[i] = fmt.Sprintf("page%02d", i)
	}
	r, err := olh.New(olh.Options{Categories: pages, Rand: rand.NewChaCha8([32]byte{1})})
	if err != nil {
		panic(err)
	}
	var visits []string
	visits = append(visits, slices.Repeat([]string{"page00"}, 10_000)...)
	visits = append(visits, slices.Repeat([]string{"page01"}, 6_000)...)
	visits = append(visits, slices.Repeat([]string{"page02"}, 4_000)...)
	const eps0 = 2.0
	f, _ := r.Family(eps0)
	reports, _ := r.Randomize(ctx, eps0, sdk.Inputs{Categories: visits})
	stat, _ := r.Accumulate(ctx, eps0, reports)
	est, _ := r.Estimate(ctx, stat)
	fmt.Printf("g = %d, %d seeds, %d-byte reports\n", f.G(), f.Seeds(), len(reports[0]))
	for _, it := range est.Items[:4] {
		fmt.Printf("%s %6.0f ± %3.0f\n", it.Label, it.Value, it.Hi-it.Value)
	}
	// Output:
	// g = 11, 1320 seeds, 4-byte reports
	// page00   9906 ± 331
	// page01   6082 ± 297
	// page02   3980 ± 277
	// page03    206 ± 236
}
