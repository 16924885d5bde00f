package plugintest

import (
	"context"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/blanket-dp/blanket/sdk"
)

// truthBatch is the ground truth of the estimator check.
type truthBatch struct {
	in     sdk.Inputs
	truth  map[string]float64 // by item label
	single []string           // items tested one by one
	rest   []string           // items tested together, as one sum
	// roles maps an item label to its index in single, or -1 for an item
	// of rest. ordered are the expected labels in order (the categories)
	// and posRoles their roles (notTested for none), so that a well-formed
	// estimate is matched by position rather than by a map lookup per item.
	roles    map[string]int
	ordered  []string
	posRoles []int
}

// notTested is the role of an item the estimator check does not test.
const notTested = -2

// role returns the role of item i of an estimate (see truthBatch.roles);
// ok is false for an item that is not tested.
func (tb *truthBatch) role(items []sdk.Item, i int) (r int, ok bool) {
	if len(items) == len(tb.ordered) && items[i].Label == tb.ordered[i] {
		r = tb.posRoles[i]
		return r, r != notTested
	}
	r, ok = tb.roles[items[i].Label]
	return r, ok
}

// setRoles fills roles, ordered and posRoles from single and rest.
func (tb *truthBatch) setRoles(ordered []string) {
	tb.roles = make(map[string]int, len(tb.single)+len(tb.rest))
	for j, l := range tb.single {
		tb.roles[l] = j
	}
	for _, l := range tb.rest {
		tb.roles[l] = -1
	}
	tb.ordered = ordered
	tb.posRoles = make([]int, len(ordered))
	for i, l := range ordered {
		r, ok := tb.roles[l]
		if !ok {
			r = notTested
		}
		tb.posRoles[i] = r
	}
}

// checkEstimator randomizes, accumulates and estimates the ground-truth
// batch Batches times at each eps0 and tests, for every tested item, two
// null hypotheses about its B = Batches estimates X_1..X_B:
//
// Unbiasedness: E[X] = truth (the number of inputs in a bucket, or the sum
// and mean of the clamped reals). The statistic is Student's
// t = |mean(X) - truth|/(s/sqrt(B)) with the empirical standard deviation
// s, so that the test does not depend on the variance the randomizer
// reports. Each X is a sum over BatchSize independent reports, close to
// normal, so t follows Student's t with B-1 degrees of freedom, and the
// test fails when t exceeds its (1 - alpha/2) quantile
// (distuv.StudentsT.Quantile), widened by the Cornish-Fisher skewness term
// (see maxMeanSkew) that keeps the rate near alpha for mildly skewed
// estimates.
//
// Variance: the reported Item.Variance (averaged over the batches, V) is the
// variance of X. For normal X, (B-1)s²/V follows chi-square with B-1
// degrees of freedom; with the estimates' excess kurtosis k (from the
// sample) the kit uses nu = 2/(2/(B-1) + k/B) degrees of freedom, the scaled
// chi-square with the right variance of s². The test fails when nu·s²/V
// exceeds the (1 - alpha/2) quantile (the randomizer understates its
// variance, so its confidence intervals are too narrow), or when
// VarianceSlack times it is below the alpha/2 quantile (it overstates the
// variance by more than VarianceSlack: randomizers may be conservative, like
// the rounding term of summation, but not uselessly so).
//
// alpha is FalseFailureRate/families per family (means, variances) divided by the
// number of eps0 values and of tests in the family. With more than
// MaxItems items, those with positive truth are tested one by one and the
// others through their sum (whose truth is their total): a lone zero-truth
// bucket of a large domain is supported by a handful of reports per batch,
// too few for the normal approximation at small alpha, while their sum is
// supported by many. An item whose estimates are constant, too skewed or
// too heavy-tailed (few supporting reports per batch, as in k-RR over 10^5
// categories with 1000 inputs) is skipped with a message rather than tested
// with an approximation that does not hold.
func (v *verifier) checkEstimator(ctx context.Context, c *Check) {
	if v.desc.Stateful {
		v.stepEstimator(ctx, c)
		return
	}
	tb := v.tb
	nMeans := len(tb.single)
	if len(tb.rest) > 0 {
		nMeans++
	}
	nVars := len(tb.single)
	// Half of the family's budget, the floor estimate check the other
	// (floorestimate.go).
	perEps := v.opts.FalseFailureRate / families / float64(len(v.opts.Eps0s)) / 2
	for _, eps0 := range v.opts.Eps0s {
		v.estimatorAt(ctx, c, eps0, tb, perEps/float64(nMeans), perEps/float64(max(nVars, 1)), nil)
		if ctx.Err() != nil {
			return
		}
	}
}

// estimatorAt runs the estimator check at eps0; with fe set, each batch
// holds Options.BatchSize blanket draws besides its reports and is
// estimated by fe (the floor estimate check, floorestimate.go).
func (v *verifier) estimatorAt(ctx context.Context, c *Check, eps0 float64, tb *truthBatch, alphaMean, alphaVar float64, fe *floorEstimate) {
	B := v.opts.Batches
	values := map[string][]float64{}
	variances := map[string]float64{}
	var restSum []float64
	for b := range B {
		name := fmt.Sprintf("eps0=%g batch %d", eps0, b)
		reports, err := v.randomizeAll(ctx, eps0, tb.in)
		if err != nil {
			c.fail(name, "Randomize: %v", err)
			return
		}
		if fe != nil {
			draws, err := fe.draw(ctx, eps0)
			if err != nil {
				c.fail(name, "SampleBlanket: %v", err)
				return
			}
			reports = append(reports, draws...)
		}
		stat, err := v.accumulate(ctx, eps0, reports)
		if err != nil {
			c.fail(name, "Accumulate: %v", err)
			return
		}
		var est *sdk.Estimate
		if fe != nil {
			est, err = fe.estimate(ctx, stat)
		} else {
			est, err = v.estimate(ctx, stat)
		}
		if err != nil {
			c.fail(name, "Estimate: %v", err)
			return
		}
		seen := make([]bool, len(tb.single))
		var restSeen int
		var sum float64
		for i, it := range est.Items {
			r, ok := tb.role(est.Items, i)
			switch {
			case !ok:
			case r >= 0 && !seen[r]:
				seen[r] = true
				values[tb.single[r]] = append(values[tb.single[r]], it.Value)
				variances[tb.single[r]] += it.Variance / float64(B)
			case r < 0:
				restSeen++
				sum += it.Value
			}
		}
		if i := slices.Index(seen, false); i >= 0 {
			c.fail(name, "the estimate has no item %q", tb.single[i])
			return
		}
		if restSeen != len(tb.rest) {
			c.fail(name, "the estimate has %d of the %d items %q...", restSeen, len(tb.rest), tb.rest[0])
			return
		}
		restSum = append(restSum, sum)
	}
	for _, l := range tb.single {
		name := fmt.Sprintf("eps0=%g item %q", eps0, l)
		c.add(meanTest(name+" mean", values[l], variances[l], tb.truth[l], alphaMean))
		c.add(varianceTest(name+" variance", values[l], variances[l], tb.truth[l], v.opts.VarianceSlack, alphaVar))
	}
	if len(tb.rest) > 0 {
		var truth float64
		for _, l := range tb.rest {
			truth += tb.truth[l]
		}
		c.add(meanTest(fmt.Sprintf("eps0=%g sum of the %d other items", eps0, len(tb.rest)), restSum, math.NaN(), truth, alphaMean))
	}
}

// moments are the sample moments of one item's estimates.
type moments struct {
	n        float64 // number of batches B
	mean, sd float64 // sd: sample standard deviation, divisor B-1
	skew     float64 // m3/m2^1.5
	kurt     float64 // excess kurtosis m4/m2² - 3
}

func momentsOf(x []float64) moments {
	m := moments{n: float64(len(x))}
	for _, v := range x {
		m.mean += v
	}
	m.mean /= m.n
	var m2, m3, m4 float64
	for _, v := range x {
		d := v - m.mean
		m2 += d * d
		m3 += d * d * d
		m4 += d * d * d * d
	}
	m.sd = math.Sqrt(m2 / (m.n - 1))
	m2, m3, m4 = m2/m.n, m3/m.n, m4/m.n
	if m2 > 0 {
		m.skew = m3 / math.Pow(m2, 1.5)
		m.kurt = m4/(m2*m2) - 3
	}
	return m
}

// constTol is the relative spread below which estimates count as constant:
// float64 noise on estimates computed from identical statistics.
const constTol = 1e-9

// constant reports whether the estimates are all equal up to rounding.
func (m moments) constant(truth float64) bool {
	return m.sd <= constTol*max(1, math.Abs(m.mean), math.Abs(truth))
}

// maxMeanSkew is the largest skewness of the mean of the estimates,
// skew/sqrt(B), at which the t-test runs. The threshold is widened by the
// Cornish-Fisher term (t² - 1)·skew/(6 sqrt(B)), at most about 1.5 at this
// bound. A larger skewness means that few reports support the item in each
// batch (a scaled Poisson count of mean λ has skewness 1/sqrt(λ)), where the
// normal approximation fails at small alpha; the test is then skipped.
const maxMeanSkew = 0.25

// minVarianceDF is the fewest effective degrees of freedom at which the
// variance test runs.
const minVarianceDF = 10

func meanTest(name string, x []float64, reported, truth, alpha float64) Test {
	m := momentsOf(x)
	t := Test{Name: name, DF: m.n - 1, Alpha: alpha}
	if m.constant(truth) {
		// Every batch gave the same estimate: either a deterministic
		// estimator, or so few supporting reports that every batch had the
		// same statistic.
		t.Alpha = 0
		switch {
		case math.Abs(m.mean-truth) <= constTol*max(1, math.Abs(truth)):
			t.Status = Pass
			t.Message = fmt.Sprintf("every estimate is %.6g, the truth", m.mean)
		case reported == 0:
			t.Status = Fail
			t.Message = fmt.Sprintf("every estimate is %.6g with reported variance 0, truth %.6g", m.mean, truth)
		default:
			t.Status = Skip
			t.Message = fmt.Sprintf("every estimate is %.6g (truth %.6g): too few reports support this item per batch; set a larger BatchSize or Truth", m.mean, truth)
		}
		return t
	}
	gm := m.skew / math.Sqrt(m.n)
	if math.Abs(gm) > maxMeanSkew {
		t.Status = Skip
		t.Alpha = 0
		t.Message = fmt.Sprintf("the estimates are too skewed for a normal approximation (skewness %.3g, %.3g for their mean): too few reports support this item per batch; set a larger BatchSize or Truth", m.skew, gm)
		return t
	}
	st := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: m.n - 1}
	q := st.Quantile(1 - alpha/2)
	se := m.sd / math.Sqrt(m.n)
	t.Statistic = math.Abs(m.mean-truth) / se
	t.Threshold = q + (q*q-1)*math.Abs(gm)/6
	t.PValue = min(1, 2*st.Survival(t.Statistic))
	t.Message = fmt.Sprintf("mean estimate %.6g over %d batches, truth %.6g, standard error %.3g", m.mean, len(x), truth, se)
	t.Status = Pass
	if !(t.Statistic <= t.Threshold) {
		t.Status = Fail
		t.Message = "biased: " + t.Message
	}
	return t
}

func varianceTest(name string, x []float64, reported, truth, slack, alpha float64) Test {
	m := momentsOf(x)
	t := Test{Name: name, Alpha: alpha}
	s2 := m.sd * m.sd
	if !(reported > 0) || math.IsInf(reported, 0) || m.constant(truth) {
		t.Alpha = 0
		t.Message = fmt.Sprintf("reported variance %v, empirical %.6g", reported, s2)
		switch {
		case reported == 0 && m.constant(truth):
			t.Status = Pass
		case reported > 0 && !math.IsInf(reported, 0):
			t.Status = Skip
			t.Message += ": every estimate is equal, too few reports support this item per batch; set a larger BatchSize or Truth"
		default:
			t.Status = Fail
		}
		return t
	}
	// For non-normal estimates Var(s²) = σ⁴(2/(B-1) + kurt/B); the
	// statistic nu·s²/σ² is compared with chi-square(nu), the scaled
	// chi-square of the same variance (nu = B-1 for normal estimates).
	nu := 2 / (2/(m.n-1) + max(m.kurt, 0)/m.n)
	t.DF = nu
	if nu < minVarianceDF {
		t.Status = Skip
		t.Alpha = 0
		t.Message = fmt.Sprintf("the estimates are too heavy-tailed (excess kurtosis %.3g, %.3g effective degrees of freedom): too few reports support this item per batch; set a larger BatchSize or Truth", m.kurt, nu)
		return t
	}
	chi := distuv.ChiSquared{K: nu}
	t.Statistic = nu * s2 / reported
	t.Threshold = chi.Quantile(1 - alpha/2)
	lo := chi.Quantile(alpha / 2)
	t.PValue = min(1, 2*min(chi.Survival(t.Statistic), chi.CDF(t.Statistic*slack)))
	t.Message = fmt.Sprintf("empirical variance %.6g over %d batches, reported %.6g (ratio %.3g, allowed [%.3g, %.3g])",
		s2, len(x), reported, s2/reported, lo/nu/slack, t.Threshold/nu)
	switch {
	case t.Statistic > t.Threshold:
		t.Status = Fail
		t.Message = "variance understated: " + t.Message
	case t.Statistic*slack < lo:
		t.Status = Fail
		t.Message = fmt.Sprintf("variance overstated more than %g times: %s", slack, t.Message)
	default:
		t.Status = Pass
	}
	return t
}

// truth returns Options.Truth or the default ground-truth batch, with the
// true value of every item and the split into items tested singly and
// together.
func (v *verifier) truth() (*truthBatch, error) {
	tb := &truthBatch{truth: map[string]float64{}}
	if v.desc.Input == sdk.InputReal {
		in := v.opts.Truth.Reals
		if v.opts.Truth.Len() == 0 {
			n := v.opts.BatchSize
			in = make([]float64, n)
			for i := range in {
				u := (float64(i) + 0.5) / float64(n)
				in[i] = v.desc.Lo + (v.desc.Hi-v.desc.Lo)*(1.25*u*u-0.1)
			}
			v.rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
		} else if len(v.opts.Truth.Categories) > 0 {
			return nil, fmt.Errorf("%w: Truth has categories, the randomizer takes reals", errOptions)
		}
		var sum float64
		for i, x := range in {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("%w: Truth.Reals[%d] = %v, must be finite", errOptions, i, x)
			}
			sum += v.clamp(x)
		}
		tb.in = sdk.Inputs{Reals: in}
		tb.truth["sum"], tb.truth["mean"] = sum, sum/float64(len(in))
		tb.single = []string{"sum", "mean"}
		tb.setRoles(nil)
		return tb, nil
	}
	cats := v.desc.Categories
	B := len(cats)
	counts := make([]int, B)
	in := v.opts.Truth.Categories
	if v.opts.Truth.Len() == 0 {
		var hot []int
		if B <= MaxItems {
			for i := range B {
				if i != B/2 {
					hot = append(hot, i)
				}
			}
		} else {
			for _, i := range []int{0, 1, 2, B / 4, B / 2, 3 * B / 4, B - 2, B - 1} {
				if !slices.Contains(hot, i) {
					hot = append(hot, i)
				}
			}
		}
		// Weights len(hot), len(hot)-1, ..., 1, apportioned to BatchSize.
		n := v.opts.BatchSize
		W := len(hot) * (len(hot) + 1) / 2
		left := n
		for j, i := range hot {
			counts[i] = n * (len(hot) - j) / W
			left -= counts[i]
		}
		for j := 0; left > 0; j = (j + 1) % len(hot) {
			counts[hot[j]]++
			left--
		}
		unknown := v.unknownLabel()
		in = nil
		for i, k := range counts {
			for j := range k {
				l := cats[i]
				if v.desc.Other != "" && i == B-1 && j%2 == 1 {
					l = unknown
				}
				in = append(in, l)
			}
		}
		v.rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
	} else {
		if len(v.opts.Truth.Reals) > 0 {
			return nil, fmt.Errorf("%w: Truth has reals, the randomizer takes categories", errOptions)
		}
		for i, l := range in {
			b := v.bucket(l)
			if b < 0 {
				return nil, fmt.Errorf("%w: Truth.Categories[%d] = %q is not a category and there is no other bucket", errOptions, i, l)
			}
			counts[b]++
		}
	}
	tb.in = sdk.Inputs{Categories: in}
	for i, l := range cats {
		tb.truth[l] = float64(counts[i])
	}
	for i, l := range cats {
		if B <= MaxItems || (counts[i] > 0 && len(tb.single) < MaxItems) {
			tb.single = append(tb.single, l)
		} else {
			tb.rest = append(tb.rest, l)
		}
	}
	tb.setRoles(cats)
	return tb, nil
}
