package plugintest_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/plugins/laplace"
	"github.com/blanket-dp/blanket/plugins/rappor"
	"github.com/blanket-dp/blanket/plugins/summation"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/plugintest"
)

// The broken randomizers below each wrap a correct one and break one rule of
// the contract. The kit must fail each of them in the named checks: this is
// what shows that the kit can fail at all. Every statistical failure below
// is far beyond its threshold (the comments give the margins), so these
// tests fail falsely only with negligible probability.

func newKRR(seed uint64) *krr.Randomizer {
	return must(krr.New(krr.Options{Categories: labels(3), Other: "other", Rand: seeded(seed)}))
}

// hotSampler declares eps0 but samples at eps0 + 0.5. With 4 buckets at
// eps0 = 1 the keep probability is 0.599 instead of 0.475: the chi-square
// statistic of 5000 reports has mean about 300 (noncentrality
// 5000·sum (p'-p)²/p), against a threshold near 35.
type hotSampler struct{ sdk.Randomizer }

func (h hotSampler) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	return h.Randomizer.Randomize(ctx, eps0+0.5, in)
}

// biasedEstimate adds a tenth of N to the first bucket's estimate: a bias of
// 100 with BatchSize 1000, where the standard error of the mean of 100
// batches is about 4 (t about 25, threshold about 6).
type biasedEstimate struct{ sdk.Randomizer }

func (b biasedEstimate) Estimate(ctx context.Context, s *sdk.Statistic) (*sdk.Estimate, error) {
	e, err := b.Randomizer.Estimate(ctx, s)
	if err == nil {
		d := float64(e.N) / 10
		e.Items[0].Value += d
		e.Items[0].Lo += d
		e.Items[0].Hi += d
	}
	return e, err
}

// narrowIntervals reports a quarter of the true variance: the variance
// statistic is near 4·99 = 396 against a threshold near 200 (its standard
// deviation under the alternative is about 4·sqrt(2·99) = 56).
type narrowIntervals struct{ sdk.Randomizer }

func (n narrowIntervals) Estimate(ctx context.Context, s *sdk.Statistic) (*sdk.Estimate, error) {
	e, err := n.Randomizer.Estimate(ctx, s)
	if err == nil {
		z := ldp.ZScore(e.Confidence)
		for i := range e.Items {
			it := &e.Items[i]
			it.Variance /= 4
			h := z * math.Sqrt(it.Variance)
			it.Lo, it.Hi = it.Value-h, it.Value+h
		}
	}
	return e, err
}

// fatBlanket declares atoms with every blanket mass r inflated by a fifth, which
// the accountant accepts (sums and p/q ratios are unchanged) but which
// claims more amplification than the mechanism gives: r > min(p, q).
type fatBlanket struct{ *krr.Randomizer }

func (f fatBlanket) Declare(ctx context.Context, eps0 float64) (*accountant.Declaration, error) {
	d, err := f.Declaration(eps0, accountant.FormAtoms)
	if err != nil {
		return nil, err
	}
	for i := range d.Pairs {
		for j := range d.Pairs[i].Atoms {
			d.Pairs[i].Atoms[j].R *= 1.2
		}
	}
	return d, nil
}

// fatOneAtom raises the blanket mass r of one atom of RAPPOR's pair (the
// one with the most room) to min(p, q): every rule the declaration alone
// can be held to still holds, but the sampler gives that atom less at
// other inputs. On 4 buckets, where RAPPOR declares a matrix, the kit
// compares its atoms with the matrix (at eps0 = 1 a blanket of 0.769
// against 0.690); on 100, where it declares atoms, the blanket test sees
// an input draw the atom about 360 times in 5000 against the 672 its
// declared r implies.
type fatOneAtom struct{ *rappor.Randomizer }

func (f fatOneAtom) inflate(d *accountant.Declaration) {
	room, at := 0.0, -1
	for j, a := range d.Pairs[0].Atoms {
		if g := min(a.P, a.Q) - a.R; g > room {
			room, at = g, j
		}
	}
	if at >= 0 {
		a := &d.Pairs[0].Atoms[at]
		a.R = min(a.P, a.Q)
	}
}

func (f fatOneAtom) Declare(ctx context.Context, eps0 float64) (*accountant.Declaration, error) {
	d, err := f.Randomizer.Declare(ctx, eps0)
	if err == nil && d.Form == accountant.FormAtoms {
		f.inflate(d)
	}
	return d, err
}

func (f fatOneAtom) DeclareForm(ctx context.Context, eps0 float64, form accountant.Form) (*accountant.Declaration, error) {
	d, err := f.Randomizer.DeclareForm(ctx, eps0, form)
	if err == nil && form == accountant.FormAtoms {
		f.inflate(d)
	}
	return d, err
}

// understatedMatrix declares the matrix of eps0 + 1 under the label eps0.
type understatedMatrix struct{ *krr.Randomizer }

func (u understatedMatrix) Declare(ctx context.Context, eps0 float64) (*accountant.Declaration, error) {
	d, err := u.Declaration(eps0+1, accountant.FormMatrix)
	if err != nil {
		return nil, err
	}
	d.Eps0 = eps0
	return d, nil
}

// understatedSegments declares laplace's segments of eps0 + 1 under the
// label eps0: the segments' ends exceed e^eps0 (declaration), and the
// declared bin masses are those of a sharper law than the sampler's
// (frequencies: at eps0 = 1 the mass within 1/64 of the input doubles).
type understatedSegments struct{ *laplace.Randomizer }

func (u understatedSegments) Declare(ctx context.Context, eps0 float64) (*accountant.Declaration, error) {
	d, err := u.Randomizer.Declare(ctx, eps0+1)
	if err != nil {
		return nil, err
	}
	d.Eps0 = eps0
	return d, nil
}

// hotLaplace samples at eps0 + 1 what it declares at eps0 (keeping
// laplace's OutputMapper): at eps0 = 1 the mass of the 1/64-wide bins
// near the input doubles, far beyond the chi-square threshold.
type hotLaplace struct{ *laplace.Randomizer }

func (h hotLaplace) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	return h.Randomizer.Randomize(ctx, eps0+1, in)
}

// fatSegments inflates every bin's blanket mass R of laplace's pair by a
// fifth, which claims more amplification than the mechanism gives.
type fatSegments struct{ *laplace.Randomizer }

func (f fatSegments) Declare(ctx context.Context, eps0 float64) (*accountant.Declaration, error) {
	d, err := f.Randomizer.Declare(ctx, eps0)
	if err != nil {
		return nil, err
	}
	for i := range d.Pairs[0].Bins {
		d.Pairs[0].Bins[i].R *= 1.2
	}
	return d, nil
}

// rowBlanket draws its blanket reports from Randomize at the first
// bucket: one input's law, not the blanket. k-RR over 4 buckets at
// eps0 = 1 keeps the bucket with probability 0.475, where the blanket
// gives each bucket 0.25: the chi-square statistic of 5000 draws has
// noncentrality 5000·(0.225²/0.25 + 3·0.075²/0.25) = 1350, against a
// threshold near 34.
type rowBlanket struct{ *krr.Randomizer }

func (b rowBlanket) SampleBlanket(ctx context.Context, eps0 float64, n int) ([][]byte, error) {
	d, _ := b.Describe(ctx)
	return b.Randomize(ctx, eps0, sdk.Inputs{Categories: slices.Repeat(d.Categories[:1], n)})
}

// hotBlanket draws bucket 0 with probability 0.05 and the others
// uniformly, over 100 buckets where k-RR declares atoms: the pair (0, 1)
// gives the atom {0} a blanket share of 0.01, and 5000 draws a chi-square
// noncentrality of about 5000·(0.04²/0.01 + 0.04²·0.01/0.99) = 800,
// against a threshold near 31.
type hotBlanket struct{ *krr.Randomizer }

func (b hotBlanket) SampleBlanket(ctx context.Context, eps0 float64, n int) ([][]byte, error) {
	reps, err := b.Randomizer.SampleBlanket(ctx, eps0, n)
	for i := range reps {
		if i%25 == 0 { // 4% more at bucket 0, taken evenly from every bucket
			reps[i] = []byte{0}
		}
	}
	return reps, err
}

// strictAccumulate fails a batch with a malformed report instead of counting
// it.
type strictAccumulate struct{ sdk.Randomizer }

func (s strictAccumulate) Accumulate(ctx context.Context, eps0 float64, reports [][]byte) (*sdk.Statistic, error) {
	st, err := s.Randomizer.Accumulate(ctx, eps0, reports)
	if err == nil && st.Malformed > 0 {
		return nil, sdk.ErrBadReport
	}
	return st, err
}

// panicky panics on an empty report.
type panicky struct{ sdk.Randomizer }

func (p panicky) Accumulate(ctx context.Context, eps0 float64, reports [][]byte) (*sdk.Statistic, error) {
	for _, r := range reports {
		_ = r[0]
	}
	return p.Randomizer.Accumulate(ctx, eps0, reports)
}

// nanToLo silently replaces NaN inputs with the range's low end.
type nanToLo struct{ sdk.Randomizer }

func (n nanToLo) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	if len(in.Categories) == 0 {
		in.Reals = slices.Clone(in.Reals)
		for i, x := range in.Reals {
			if math.IsNaN(x) {
				in.Reals[i] = -1
			}
		}
	}
	return n.Randomizer.Randomize(ctx, eps0, in)
}

// foreignStatistics estimates any statistic with the right number of
// counts, whoever produced it.
type foreignStatistics struct{ sdk.Randomizer }

func (f foreignStatistics) Estimate(ctx context.Context, s *sdk.Statistic) (*sdk.Estimate, error) {
	if s != nil {
		d, _ := f.Describe(ctx)
		s = s.Clone()
		s.Plugin, s.Digest = d.Name, d.Digest
	}
	return f.Randomizer.Estimate(ctx, s)
}

func TestBrokenRandomizersFail(t *testing.T) {
	sum := func(seed uint64) sdk.Randomizer {
		return must(summation.New(summation.Options{Lo: -1, Hi: 3, K: 3, Rand: seeded(seed)}))
	}
	lap := must(laplace.New(laplace.Options{Lo: 0, Hi: 10}))
	// The laplace cases skip the estimator, blanket and floor checks, which they
	// do not break (Google's sampler is slow under -race: the estimator's
	// 100,000 draws, the blanket's 5000).
	tests := []struct {
		name   string
		r      sdk.Randomizer
		failed []string
	}{
		{"samples at a larger eps0", hotSampler{newKRR(10)}, []string{plugintest.CheckFrequencies, plugintest.CheckPrivacy, plugintest.CheckEstimator}},
		{"biased estimate", biasedEstimate{newKRR(11)}, []string{plugintest.CheckEstimator}},
		{"variance understated", narrowIntervals{newKRR(12)}, []string{plugintest.CheckEstimator}},
		{"blanket overstated", fatBlanket{newKRR(13)}, []string{plugintest.CheckDeclaration}},
		{"one atom's blanket overstated, small", fatOneAtom{must(rappor.New(rappor.Options{Categories: labels(4), Rand: seeded(22)}))}, []string{plugintest.CheckDeclaration}},
		{"one atom's blanket overstated, at size", fatOneAtom{must(rappor.New(rappor.Options{Categories: labels(100), Rand: seeded(23)}))}, []string{plugintest.CheckFrequencies}},
		{"matrix exceeds eps0", understatedMatrix{newKRR(14)}, []string{plugintest.CheckDeclaration, plugintest.CheckFrequencies}},
		{"malformed report fails the batch", strictAccumulate{newKRR(15)}, []string{plugintest.CheckReports}},
		{"panics on an empty report", panicky{newKRR(16)}, []string{plugintest.CheckReports}},
		{"accepts NaN", nanToLo{sum(17)}, []string{plugintest.CheckInputs}},
		{"estimates foreign statistics", foreignStatistics{newKRR(18)}, []string{plugintest.CheckStatistics}},
		{"segments beyond eps0", understatedSegments{lap}, []string{plugintest.CheckDeclaration, plugintest.CheckFrequencies}},
		{"laplace samples at a larger eps0", hotLaplace{lap}, []string{plugintest.CheckFrequencies}},
		{"segments blanket overstated", fatSegments{lap}, []string{plugintest.CheckDeclaration}},
		{"blanket draws from one input's law", rowBlanket{newKRR(24)}, []string{plugintest.CheckBlanket}},
		{"blanket draws favour one bucket, at size", hotBlanket{newKRR100(25)}, []string{plugintest.CheckBlanket}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := plugintest.Options{Eps0s: []float64{1}, Samples: 5000, Batches: 100}
			if d, err := tt.r.Describe(t.Context()); err == nil && d.Name == laplace.Name {
				opts.Skip = []string{plugintest.CheckEstimator, plugintest.CheckBlanket, plugintest.CheckFloorEstimate}
			}
			rep, err := plugintest.Verify(t.Context(), tt.r, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s", rep)
			if rep.Passed() {
				t.Fatalf("the kit passed a broken randomizer:\n%s", rep)
			}
			for _, name := range tt.failed {
				if c := rep.Check(name); c == nil || c.Status != plugintest.Fail {
					t.Errorf("check %q did not fail:\n%s", name, rep)
				}
			}
			if _, err := json.Marshal(rep); err != nil {
				t.Errorf("report does not encode as JSON: %v", err)
			}
		})
	}
}

func TestOptionsRejected(t *testing.T) {
	r := newKRR(20)
	for name, opts := range map[string]plugintest.Options{
		"eps0 out of range": {Eps0s: []float64{100}},
		"eps0 NaN":          {Eps0s: []float64{math.NaN()}},
		"few batches":       {Batches: 5},
		"rate 1":            {FalseFailureRate: 1},
		"slack below 1":     {VarianceSlack: 0.5},
		"negative samples":  {Samples: -1},
		"truth of reals":    {Truth: sdk.Inputs{Reals: []float64{1}}},
	} {
		if _, err := plugintest.Verify(context.Background(), r, opts); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	noOther := must(krr.New(krr.Options{Categories: labels(3)}))
	if _, err := plugintest.Verify(context.Background(), noOther, plugintest.Options{Truth: sdk.Inputs{Categories: []string{"c0", "nope"}}}); err == nil {
		t.Error("unknown truth label without an other bucket: no error")
	}
	if _, err := plugintest.Verify(context.Background(), r, plugintest.Options{Cases: []plugintest.Case{{Category: "c0", Row: 9}}, Skip: []string{plugintest.CheckEstimator}}); err != nil {
		t.Errorf("a bad case is a failed check, not an error: %v", err)
	}
}

func TestCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := plugintest.Verify(ctx, newKRR(21), plugintest.Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
}
