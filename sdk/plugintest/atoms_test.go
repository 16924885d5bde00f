package plugintest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plugintest"
)

// newKRR100 is k-RR over 100 buckets, where it declares atoms (k >
// krr.MatrixMaxK).
func newKRR100(seed uint64) *krr.Randomizer {
	return must(krr.New(krr.Options{Categories: labels(100), Rand: seeded(seed)}))
}

// hotKRR samples at eps0 + 0.5 what it declares at eps0, keeping k-RR's
// AtomMapper (hotSampler hides it).
type hotKRR struct{ *krr.Randomizer }

func (h hotKRR) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	return h.Randomizer.Randomize(ctx, eps0+0.5, in)
}

// noAtoms hides a randomizer's sdk.AtomMapper.
type noAtoms struct{ sdk.Randomizer }

// atomTests returns the tests of the frequency check whose names hold
// "atoms)" (the chi-square tests on a declared set's atoms) and
// "blanket at".
func atomTests(rep *plugintest.Report) (chi, blanket []plugintest.Test) {
	for _, t := range rep.Check(plugintest.CheckFrequencies).Tests {
		switch {
		case strings.Contains(t.Name, "atoms)"):
			chi = append(chi, t)
		case strings.Contains(t.Name, "blanket at"):
			blanket = append(blanket, t)
		}
	}
	return chi, blanket
}

// TestAtomsCheckedAtSize: k-RR over 100 buckets declares atoms, and its
// sampler is checked through sdk.AtomMapper at that size: chi-square tests
// of its pair at x and x' and of its triple at x, x' and x3, and blanket tests at
// two other inputs, per eps0, all passing. The same sampler at eps0 + 0.5
// fails them (at eps0 = 1 the keep probability is 0.0414 instead of
// 0.0267: about 29 standard errors in 20,000 draws); without the mapper
// the check is skipped and says what to implement, the summary says the
// sampler is unchecked, and Strict fails the run.
func TestAtomsCheckedAtSize(t *testing.T) {
	opts := plugintest.Options{Eps0s: []float64{1, 4}, Skip: []string{plugintest.CheckEstimator, plugintest.CheckInputs, plugintest.CheckReports, plugintest.CheckStatistics}}
	rep, err := plugintest.Verify(context.Background(), newKRR100(30), opts)
	if err != nil {
		t.Fatal(err)
	}
	chi, blanket := atomTests(rep)
	if !rep.Passed() || len(chi) != 2*5 || len(blanket) != 2*2 || rep.AtomTests() != 2*7 {
		t.Fatalf("k-RR over 100 buckets: %d atom tests, %d blanket tests (want 10 and 4), AtomTests %d (want 14), passed %v:\n%s", len(chi), len(blanket), rep.AtomTests(), rep.Passed(), rep)
	}
	for _, tt := range append(chi, blanket...) {
		if tt.Status != plugintest.Pass {
			t.Errorf("%s: %s %s", tt.Name, tt.Status, tt.Message)
		}
	}

	hot, err := plugintest.Verify(context.Background(), hotKRR{newKRR100(31)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	chi, _ = atomTests(hot)
	failed := 0
	for _, tt := range chi {
		if tt.Status == plugintest.Fail {
			failed++
		}
	}
	if hot.Passed() || failed < 4 {
		t.Errorf("sampling at eps0 + 0.5: %d of %d atom tests failed, want at least 4:\n%s", failed, len(chi), hot)
	}

	bare, err := plugintest.Verify(context.Background(), noAtoms{newKRR100(32)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if bare.AtomTests() != 0 {
		t.Errorf("without an AtomMapper: AtomTests %d, want 0 (the skipped tests ran on nothing)", bare.AtomTests())
	}
	f := bare.Check(plugintest.CheckFrequencies)
	if f.Status != plugintest.Skip || !strings.Contains(bare.String(), "implement sdk.AtomMapper") {
		t.Errorf("without an AtomMapper: frequencies %s, want skipped with advice:\n%s", f.Status, bare)
	}
	if !bare.Passed() || len(bare.Unchecked()) != 4 || !strings.HasPrefix(bare.Summary(), "PASS, SAMPLER UNCHECKED") || strings.HasSuffix(bare.String(), "\nPASS\n") {
		t.Errorf("without an AtomMapper: passed %v, %d unchecked (want 4), summary %q", bare.Passed(), len(bare.Unchecked()), bare.Summary())
	}
	if rep.Summary() != "PASS" || len(rep.Unchecked()) != 0 {
		t.Errorf("with the mapper: summary %q, unchecked %q", rep.Summary(), rep.Unchecked())
	}
	opts.Strict = true
	strict, err := plugintest.Verify(context.Background(), noAtoms{newKRR100(33)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if strict.Passed() || strict.Check(plugintest.CheckFrequencies).Status != plugintest.Fail || !strings.Contains(strict.String(), "Options.Strict") {
		t.Errorf("strict without an AtomMapper: passed %v:\n%s", strict.Passed(), strict)
	}
	if checked, err := plugintest.Verify(context.Background(), newKRR100(34), opts); err != nil || !checked.Passed() {
		t.Errorf("strict with the mapper: %v\n%s", err, checked)
	}
}

// avoidsX is k-RR over 100 buckets whose sampler, at inputs from bucket 3
// on, never reports bucket 0 (redrawn): P_z({x = c0}) = 0 there, while the
// declared pair (c0, c1) keeps the blanket mass r = 1/(e + 99) = 0.0098 of
// its atom {c0}. The declared blanket is overstated (and the sampler is not
// eps0-LDP at all: P_c0(0) > 0 = P_c50(0)), so the blanket tests at c50 and
// c99 must fail: 0 draws of 20,000 give an upper bound of 0.0011 < 0.0098.
type avoidsX struct{ *krr.Randomizer }

func (a avoidsX) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	reps, err := a.Randomizer.Randomize(ctx, eps0, in)
	if err != nil {
		return nil, err
	}
	for i, c := range in.Categories {
		if c == "c0" || c == "c1" || c == "c2" {
			continue
		}
		for {
			if y, _ := a.Decode(reps[i]); y != 0 {
				break
			}
			one, err := a.Randomizer.Randomize(ctx, eps0, sdk.Inputs{Categories: []string{c}})
			if err != nil {
				return nil, err
			}
			reps[i] = one[0]
		}
	}
	return reps, nil
}

// TestBlanketZeroCount: a sampler that never draws an atom at the other
// inputs fails their blanket tests (0 of 20,000 draws bound the atom's
// probability by 0.0009 < r = 0.0098). With gonum's inverse incomplete
// beta the bound came out near 1 and the check passed (found in review).
func TestBlanketZeroCount(t *testing.T) {
	opts := plugintest.Options{Eps0s: []float64{1}, Skip: []string{plugintest.CheckEstimator, plugintest.CheckInputs, plugintest.CheckReports, plugintest.CheckStatistics}}
	rep, err := plugintest.Verify(context.Background(), avoidsX{newKRR100(40)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	_, blanket := atomTests(rep)
	failed := 0
	for _, b := range blanket {
		if b.Status == plugintest.Fail && strings.Contains(b.Message, "draws it 0 times") {
			failed++
		}
	}
	if failed != 2 {
		t.Errorf("a sampler that never draws atom {c0} at c50 and c99: %d blanket tests fail on it, want 2:\n%s", failed, rep)
	}
}
