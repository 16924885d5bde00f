package plugintest_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/plugins/rappor"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plugintest"
)

// lowAtoms declares, in its atoms form, k-RR's atoms at 0.7 eps0 under
// the label eps0: valid atoms (every ratio within e^eps0, r <= min(p, q))
// with a larger blanket (k c at the lower budget) than the matrix, which
// it declares honestly and samples from.
type lowAtoms struct{ *krr.Randomizer }

func (l lowAtoms) DeclareForm(ctx context.Context, eps0 float64, form accountant.Form) (*accountant.Declaration, error) {
	if form != accountant.FormAtoms {
		return l.Randomizer.DeclareForm(ctx, eps0, form)
	}
	d, err := l.Declaration(0.7*eps0, form)
	if err == nil {
		d.Eps0 = eps0
	}
	return d, err
}

// oneForm hides k-RR's sdk.FormDeclarer.
type oneForm struct{ sdk.Randomizer }

// TestFormsAgree: on a configuration where k-RR declares a matrix, the
// kit asks for its atoms too and finds them equal, in process and
// through the plugin protocol; atoms that claim a
// larger blanket than the matrix fail the declaration check (a lie the
// sampler checks cannot see, since the sampler follows the matrix); a
// randomizer without sdk.FormDeclarer has the test skipped, saying why.
func TestFormsAgree(t *testing.T) {
	opts := plugintest.Options{Eps0s: []float64{1, 4}, Skip: []string{plugintest.CheckEstimator, plugintest.CheckInputs, plugintest.CheckReports, plugintest.CheckStatistics}}
	small := func(seed uint64) *krr.Randomizer {
		return must(krr.New(krr.Options{Categories: labels(4), Rand: seeded(seed)}))
	}
	forms := func(rep *plugintest.Report) (pass, fail, skip int) {
		for _, tt := range rep.Check(plugintest.CheckDeclaration).Tests {
			if !strings.Contains(tt.Name, " forms") {
				continue
			}
			switch tt.Status {
			case plugintest.Pass:
				pass++
			case plugintest.Fail:
				fail++
			default:
				skip++
			}
		}
		return
	}
	rep, err := plugintest.Verify(t.Context(), small(50), opts)
	if err != nil {
		t.Fatal(err)
	}
	if p, f, s := forms(rep); !rep.Passed() || p != 4 || f+s != 0 {
		t.Errorf("honest k-RR: %d forms tests passed, %d failed, %d skipped (want 4, 0, 0):\n%s", p, f, s, rep)
	}
	// The same through the plugin protocol (DeclareRequest.form).
	grpc, err := plugintest.Verify(t.Context(), served(t, sdk.FactoryOf(krr.FromConfig), sdk.Config{Categories: labels(4)}), opts)
	if err != nil {
		t.Fatal(err)
	}
	if p, f, s := forms(grpc); !grpc.Passed() || p != 4 || f+s != 0 {
		t.Errorf("k-RR over gRPC: %d forms tests passed, %d failed, %d skipped (want 4, 0, 0):\n%s", p, f, s, grpc)
	}
	lie, err := plugintest.Verify(t.Context(), lowAtoms{small(51)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, f, _ := forms(lie); lie.Passed() || f != 2 || lie.Check(plugintest.CheckFrequencies).Status != plugintest.Pass {
		t.Errorf("atoms with a larger blanket: %d forms tests failed (want 2, one per eps0), frequencies %s:\n%s", f, lie.Check(plugintest.CheckFrequencies).Status, lie)
	}
	bare, err := plugintest.Verify(t.Context(), oneForm{small(52)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, s := forms(bare); s != 2 || !strings.Contains(bare.String(), "implement sdk.FormDeclarer") {
		t.Errorf("without FormDeclarer: %d forms tests skipped (want 2):\n%s", s, bare)
	}
}

// mergedAtoms declares RAPPOR's atoms with two atoms of its pair merged
// into one (their r, p and q added) although their ratio points differ
// (the same p/r, but different q/r):
// the sums, the blanket and r <= min(p, q) still hold, so only the
// comparison of the guarantees can see the lie (which claims privacy the
// mechanism does not have).
type mergedAtoms struct{ *rappor.Randomizer }

func (m mergedAtoms) DeclareForm(ctx context.Context, eps0 float64, form accountant.Form) (*accountant.Declaration, error) {
	d, err := m.Randomizer.DeclareForm(ctx, eps0, form)
	if err != nil || form != accountant.FormAtoms {
		return d, err
	}
	atoms := d.Pairs[0].Atoms
	for i := range atoms {
		for j := i + 1; j < len(atoms); j++ {
			a, b := atoms[i], atoms[j]
			if math.Abs(a.P/a.R-b.P/b.R) <= 1e-9*(a.P/a.R) && math.Abs(a.Q/a.R-b.Q/b.R) > 1e-6*(a.Q/a.R) {
				atoms[i] = accountant.Atom{R: a.R + b.R, P: a.P + b.P, Q: a.Q + b.Q}
				d.Pairs[0].Atoms = append(atoms[:j:j], atoms[j+1:]...)
				return d, nil
			}
		}
	}
	return d, nil
}

// TestFormsCatchMergedAtoms: atoms merged across different ratios give an
// eps upper bound a few percent below the matrix's (RAPPOR on 4 buckets
// at eps0 = 2: 3% at n = 10^5, inside the 9% between the matrix's lower
// and upper bounds, which the forms test compared with before the
// review); the forms test fails them against the matrix's certified upper
// bound, and honest RAPPOR passes.
func TestFormsCatchMergedAtoms(t *testing.T) {
	opts := plugintest.Options{Eps0s: []float64{2}, Skip: []string{plugintest.CheckFrequencies, plugintest.CheckEstimator, plugintest.CheckInputs, plugintest.CheckReports, plugintest.CheckStatistics}}
	r := func(seed uint64) *rappor.Randomizer {
		return must(rappor.New(rappor.Options{Categories: labels(4), Rand: seeded(seed)}))
	}
	failed := func(rep *plugintest.Report) (n int) {
		for _, tt := range rep.Check(plugintest.CheckDeclaration).Tests {
			if strings.Contains(tt.Name, " forms n=") && tt.Status == plugintest.Fail {
				n++
			}
		}
		return n
	}
	honest, err := plugintest.Verify(t.Context(), r(60), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !honest.Passed() || failed(honest) != 0 {
		t.Errorf("honest RAPPOR:\n%s", honest)
	}
	lie, err := plugintest.Verify(t.Context(), mergedAtoms{r(61)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if lie.Passed() || failed(lie) == 0 {
		t.Errorf("RAPPOR with two atoms of different ratios merged passes the forms test:\n%s", lie)
	}
}
