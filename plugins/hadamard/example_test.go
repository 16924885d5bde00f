package hadamard_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/blanket-dp/blanket/plugins/hadamard"
	"github.com/blanket-dp/blanket/sdk"
)

// Example estimates the distribution of 20 000 error codes over 6 known
// codes at eps0 = 1; each report is a single byte (K = 8 outputs). The
// seeded source makes the output reproducible; leave Rand unset in
// production.
func Example() {
	ctx := context.Background()
	r, err := hadamard.New(hadamard.Options{
		Categories: []string{"E1", "E2", "E3", "E4", "E5", "E6"},
		Rand:       rand.NewChaCha8([32]byte{1}),
	})
	if err != nil {
		panic(err)
	}
	var codes []string
	for i, n := range []int{8000, 6000, 3000, 2000, 1000, 0} {
		codes = append(codes, slices.Repeat([]string{fmt.Sprintf("E%d", i+1)}, n)...)
	}
	const eps0 = 1.0
	reports, _ := r.Randomize(ctx, eps0, sdk.Inputs{Categories: codes})
	stat, _ := r.Accumulate(ctx, eps0, reports)
	est, _ := r.Estimate(ctx, stat)
	fmt.Printf("K = %d outputs, %d-byte reports\n", r.Outputs(), len(reports[0]))
	for _, it := range est.Items {
		fmt.Printf("%s %6.0f ± %4.0f\n", it.Label, it.Value, it.Hi-it.Value)
	}
	// Output:
	// K = 8 outputs, 1-byte reports
	// E1   8340 ±  572
	// E2   6042 ±  580
	// E3   3060 ±  590
	// E4   2186 ±  593
	// E5    883 ±  597
	// E6    247 ±  599
}
