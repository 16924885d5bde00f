// Command meanerror compares the error of a mean estimated with the laplace
// and summation plugins at one central target (eps, delta) over a range of
// batch sizes n: for each n it calibrates each plugin's eps0 with the
// accountant (the largest whose sound upper bound meets the target), draws
// n inputs uniform on [0, 1], randomizes them with the real plugin at that
// eps0, and prints the estimate's standard error (from the plugin's own
// variance) and the actual error. It backs the README's table of which
// plugin to pick when.
//
//	go run ./examples/meanerror -eps 1 -delta 1e-6 -n 1e3,1e4,1e5,1e6
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/sdk"
)

func main() {
	eps := flag.Float64("eps", 1, "central target eps")
	delta := flag.Float64("delta", 1e-6, "central target delta")
	ns := flag.String("n", "1e3,1e4,1e5,1e6", "batch sizes, comma-separated")
	ks := flag.String("k", "2,8,32", "summation levels to compare, comma-separated")
	seed := flag.Uint64("seed", 1, "seed of the inputs")
	flag.Parse()
	if err := run(*eps, *delta, *ns, *ks, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "meanerror:", err)
		os.Exit(1)
	}
}

// candidate is one plugin configuration to compare.
type candidate struct {
	name string
	cfg  sdk.Config
	r    sdk.Randomizer
}

func run(eps, delta float64, nList, kList string, seed uint64) error {
	ctx := context.Background()
	cands := []*candidate{{name: "laplace", cfg: sdk.Config{Lo: 0, Hi: 1}}}
	for _, k := range strings.Split(kList, ",") {
		cands = append(cands, &candidate{name: "summation", cfg: sdk.Config{Lo: 0, Hi: 1, Params: map[string]string{"k": strings.TrimSpace(k)}}})
	}
	for _, c := range cands {
		p, err := builtin.Open(ctx, c.name, c.cfg)
		if err != nil {
			return err
		}
		defer p.Close()
		c.r = p
	}
	fmt.Printf("mean of n inputs uniform on [0, 1], central target (%g, %g) per batch\n\n", eps, delta)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "n\tplugin\teps0\tstd error\t|error|\tcalibration s\t")
	for _, f := range strings.Split(nList, ",") {
		nf, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || nf < 1 || nf > 1e8 {
			return fmt.Errorf("n = %q: want a number in [1, 1e8]", f)
		}
		n := int(nf)
		src := rand.New(rand.NewPCG(seed, uint64(n)))
		xs := make([]float64, n)
		truth := 0.0
		for i := range xs {
			xs[i] = src.Float64()
			truth += xs[i]
		}
		truth /= nf
		for _, c := range cands {
			label := c.name
			if k := c.cfg.Params["k"]; k != "" {
				label += ":k=" + k
			}
			start := time.Now()
			mech := accountant.FuncMech{Name: label, Declare: func(e float64) (*accountant.Declaration, error) { return c.r.Declare(ctx, e) }}
			cal, err := accountant.Calibrate(mech, accountant.Target{Eps: eps, Delta: delta, N: n})
			if err != nil {
				return fmt.Errorf("%s at n = %d: %w", label, n, err)
			}
			secs := time.Since(start).Seconds()
			reps, err := c.r.Randomize(ctx, cal.Eps0, sdk.Inputs{Reals: xs})
			if err != nil {
				return err
			}
			st, err := c.r.Accumulate(ctx, cal.Eps0, reps)
			if err != nil {
				return err
			}
			est, err := c.r.Estimate(ctx, st)
			if err != nil {
				return err
			}
			mean := est.Items[1]
			if mean.Label != "mean" {
				return fmt.Errorf("%s: item 1 is %q, want the mean", label, mean.Label)
			}
			fmt.Fprintf(w, "%d\t%s\t%.3f\t%.2e\t%.2e\t%.1f\t\n", n, label, cal.Eps0, math.Sqrt(mean.Variance), math.Abs(mean.Value-truth), secs)
		}
	}
	return w.Flush()
}
