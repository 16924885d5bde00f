package rappor_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/blanket-dp/blanket/plugins/rappor"
	"github.com/blanket-dp/blanket/sdk"
)

// Example estimates which of four features 5 000 users enabled, with
// optimized unary encoding at eps0 = 2; each report is a 4-bit vector in one
// byte. The seeded source makes the output reproducible; leave Rand unset in
// production.
func Example() {
	ctx := context.Background()
	r, err := rappor.New(rappor.Options{
		Categories: []string{"dark-mode", "sync", "beta", "telemetry"},
		Mode:       rappor.Optimized,
		Rand:       rand.NewChaCha8([32]byte{1}),
	})
	if err != nil {
		panic(err)
	}
	var features []string
	features = append(features, slices.Repeat([]string{"dark-mode"}, 3000)...)
	features = append(features, slices.Repeat([]string{"sync"}, 1500)...)
	features = append(features, slices.Repeat([]string{"beta"}, 500)...)
	const eps0 = 2.0
	reports, _ := r.Randomize(ctx, eps0, sdk.Inputs{Categories: features})
	stat, _ := r.Accumulate(ctx, eps0, reports)
	est, _ := r.Estimate(ctx, stat)
	for _, it := range est.Items {
		fmt.Printf("%-9s raw %5.0f  post %5.0f\n", it.Label, it.Value, it.Post)
	}
	// Output:
	// dark-mode raw  2952  post  2959
	// sync      raw  1489  post  1496
	// beta      raw   504  post   511
	// telemetry raw    26  post    33
}
