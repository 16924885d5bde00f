// Command longitudinal compares two ways of following a boolean state
// (say "dark mode on") of n users over a horizon of periods, at one
// central target (eps, delta) per user over the whole horizon:
//
//   - the tree protocol of Erlingsson et al. 2019 (plugins/longitudinal):
//     eps0 calibrated with accountant.CalibrateLongitudinal;
//   - binary randomized response every period (plugins/krr, k = 2): eps0
//     calibrated for the composition of one report per period over the
//     horizon (accountant.Calibrate with Target.Rounds).
//
// Each period's reports are shuffled in one batch with every user's report
// of that period (the model both calibrations assume: the tree protocol's
// level-mates are then all users of a level). The population's states
// change a few times: a share starts on, some switch on at a random
// period, some of those switch off again later. The command runs the real
// plugins in process (randomize, accumulate, estimate) and prints, for each
// period, the truth and both estimates with their standard errors, then
// the root mean square error and the coverage of the intervals over the
// horizon. With -plot it draws the series.
//
//	go run ./examples/longitudinal -n 100000 -periods 64 -plot demo-out/longitudinal.png
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"text/tabwriter"
	"time"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/plugins/longitudinal"
	"github.com/blanket-dp/blanket/sdk"
)

func main() {
	n := flag.Int("n", 100000, "users")
	periods := flag.Int("periods", 64, "periods of the horizon (the target covers every window of this many)")
	tree := flag.Int("tree", 64, "periods per tree of the longitudinal protocol (a power of two)")
	changes := flag.Int("changes", 2, "changes per tree the longitudinal protocol follows (k)")
	eps := flag.Float64("eps", 1, "central target eps per user over the horizon")
	delta := flag.Float64("delta", 1e-6, "central target delta per user over the horizon")
	seed := flag.Uint64("seed", 1, "seed of the population")
	plotPath := flag.String("plot", "", "write the series to this .png or .svg file")
	every := flag.Int("every", 4, "print every this many periods")
	flag.Parse()
	if err := run(config{*n, *periods, *tree, *changes, *eps, *delta, *seed, *plotPath, *every}); err != nil {
		fmt.Fprintln(os.Stderr, "longitudinal:", err)
		os.Exit(1)
	}
}

type config struct {
	n, periods, tree, changes int
	eps, delta                float64
	seed                      uint64
	plot                      string
	every                     int
}

// population returns each user's state per period (states[t][i]) and the
// true number of users on per period. A user makes at most two changes:
// 25% start on; 30% of the others switch on at a uniform period; a third of
// those switch off again at a later one.
func population(n, periods int, seed uint64) ([][]bool, []float64) {
	rng := rand.New(rand.NewPCG(seed, 0x6c6f6e67))
	on := make([]int, n)  // first period on (periods = never)
	off := make([]int, n) // first period off again
	for i := range on {
		on[i], off[i] = periods, periods
		switch u := rng.Float64(); {
		case u < 0.25:
			on[i] = 0
		case u < 0.25+0.75*0.3:
			on[i] = rng.IntN(periods)
			if rng.IntN(3) == 0 && on[i] < periods-1 {
				off[i] = on[i] + 1 + rng.IntN(periods-on[i]-1)
			}
		}
	}
	states := make([][]bool, periods)
	truth := make([]float64, periods)
	for t := range states {
		states[t] = make([]bool, n)
		for i := range on {
			if t >= on[i] && t < off[i] {
				states[t][i] = true
				truth[t]++
			}
		}
	}
	return states, truth
}

// series is one method's estimates: value and standard error per period.
type series struct {
	name  string
	eps0  float64
	value []float64
	se    []float64
}

func run(c config) error {
	ctx := context.Background()
	start := time.Now()
	states, truth := population(c.n, c.periods, c.seed)
	lr, err := longitudinal.New(longitudinal.Options{Tree: c.tree, Changes: c.changes})
	if err != nil {
		return err
	}
	kr, err := krr.New(krr.Options{Categories: []string{"false", "true"}})
	if err != nil {
		return err
	}
	// Calibration: both at (eps, delta) per user over every window of
	// c.periods periods, batches of all n users' reports of a period.
	target := accountant.Target{Eps: c.eps, Delta: c.delta, N: c.n, Rounds: c.periods}
	lc, err := accountant.CalibrateLongitudinal(accountant.LongitudinalMech{Tree: c.tree}, target)
	if err != nil {
		return fmt.Errorf("calibrating longitudinal: %w", err)
	}
	kc, err := accountant.Calibrate(accountant.KRR(2), target)
	if err != nil {
		return fmt.Errorf("calibrating k-RR: %w", err)
	}
	fmt.Printf("%d users, %d periods, target (%g, %g) per user over every window of %d periods (calibrated in %s)\n",
		c.n, c.periods, c.eps, c.delta, c.periods, time.Since(start).Round(time.Millisecond))
	fmt.Printf("  longitudinal (tree %d, k = %d): eps0 = %.4f (proven eps %.4f)\n", c.tree, c.changes, lc.Eps0, lc.Achieved.Upper)
	fmt.Printf("  k-RR every period:             eps0 = %.4f (proven eps %.4f)\n", kc.Eps0, kc.Achieved.Upper)

	lon, rr, err := simulate(ctx, c, states, lr, kr, lc.Eps0, kc.Eps0)
	if err != nil {
		return err
	}
	report(c, truth, lon, rr)
	if c.plot != "" {
		if err := plotSeries(c.plot, truth, lon, rr); err != nil {
			return err
		}
		fmt.Println("plot:", c.plot)
	}
	// The same without the shuffler: pure local DP, composed basically
	// over the window (a tree's transcript is eps0-LDP and a window meets
	// accountant.TreesInWindow trees; k-RR pays eps0 every period).
	lEps0 := c.eps / float64(accountant.TreesInWindow(c.tree, c.periods))
	kEps0 := c.eps / float64(c.periods)
	fmt.Printf("\nWithout a shuffler (local model, basic composition over the window): longitudinal eps0 = %.4f, k-RR eps0 = %.4f\n", lEps0, kEps0)
	llon, lrr, err := simulate(ctx, c, states, lr, kr, lEps0, kEps0)
	if err != nil {
		return err
	}
	report(c, truth, llon, lrr)
	fmt.Printf("done in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// simulate runs both methods at their budgets over the population's
// periods with the real plugins.
func simulate(ctx context.Context, c config, states [][]bool, lr *longitudinal.Randomizer, kr *krr.Randomizer, lEps0, kEps0 float64) (lon, rr series, err error) {
	lon = series{name: fmt.Sprintf("longitudinal (eps0 %.2f)", lEps0), eps0: lEps0}
	rr = series{name: fmt.Sprintf("k-RR every period (eps0 %.2f)", kEps0), eps0: kEps0}
	userStates := make([][]byte, c.n)
	var merged *sdk.Statistic
	for t := 0; t < c.periods; t++ {
		in := sdk.Inputs{Categories: make([]string, c.n)}
		for i, s := range states[t] {
			in.Categories[i] = fmt.Sprint(s)
		}
		// The tree protocol: step every user; merge the tree's statistics.
		reps, next, err := lr.Step(ctx, lEps0, int64(t), userStates, in)
		if err != nil {
			return lon, rr, err
		}
		userStates = next
		var sent [][]byte
		for _, r := range reps {
			if r != nil {
				sent = append(sent, r)
			}
		}
		st, err := lr.Accumulate(ctx, lEps0, sent)
		if err != nil {
			return lon, rr, err
		}
		if t%c.tree == 0 {
			merged = st
		} else if err := merged.Merge(st); err != nil {
			return lon, rr, err
		}
		est, err := lr.Estimate(ctx, merged)
		if err != nil {
			return lon, rr, err
		}
		lon.value = append(lon.value, est.Items[0].Value)
		lon.se = append(lon.se, math.Sqrt(est.Items[0].Variance))
		// k-RR: a fresh report per user.
		kreps, err := kr.Randomize(ctx, kEps0, in)
		if err != nil {
			return lon, rr, err
		}
		kst, err := kr.Accumulate(ctx, kEps0, kreps)
		if err != nil {
			return lon, rr, err
		}
		kest, err := kr.Estimate(ctx, kst)
		if err != nil {
			return lon, rr, err
		}
		rr.value = append(rr.value, kest.Items[1].Value)
		rr.se = append(rr.se, math.Sqrt(kest.Items[1].Variance))
	}

	return lon, rr, nil
}

// report prints every c.every-th period and the summary of both methods.
func report(c config, truth []float64, lon, rr series) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "period\ttruth\tlongitudinal\t± se\tk-RR\t± se\t")
	for t := 0; t < c.periods; t++ {
		if t%c.every != c.every-1 && t != 0 {
			continue
		}
		fmt.Fprintf(w, "%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t\n", t+1, truth[t], lon.value[t], lon.se[t], rr.value[t], rr.se[t])
	}
	w.Flush()
	for _, s := range []series{lon, rr} {
		rmse, cover := errors(s, truth)
		fmt.Printf("%-34s RMSE %8.1f users (%.3f%% of n), 95%% intervals cover the truth in %.0f%% of periods\n", s.name+":", rmse, 100*rmse/float64(c.n), 100*cover)
	}
}

// errors returns the root mean square error of s against truth and the
// share of periods whose 95% interval holds the truth.
func errors(s series, truth []float64) (rmse, cover float64) {
	z := 1.959963984540054
	for t, v := range s.value {
		rmse += (v - truth[t]) * (v - truth[t])
		if math.Abs(v-truth[t]) <= z*s.se[t] {
			cover++
		}
	}
	return math.Sqrt(rmse / float64(len(truth))), cover / float64(len(truth))
}
