package plugintest

import (
	"context"
	"errors"
	"fmt"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// The forms test: a randomizer's atoms against its own matrix.
//
// A randomizer that declares itself by atoms at the sizes it ships (its
// output space too large for a matrix) is tested against its sampler
// there only through the atoms (atoms.go), which cannot see how the
// blanket mass is spread over an atom's outputs. On a configuration small
// enough for a matrix, whose every probability the frequency check tests
// against the sampler, the kit asks the randomizer (sdk.FormDeclarer) for
// both forms and checks that the atoms claim no more privacy than the
// matrix gives:
//
//   - the blanket: every declared pair's blanket mass (the sum of its r)
//     is at most the matrix's, sum_y min_x R[x][y] (relative tolerance
//     1e-12);
//   - the guarantee: at n = 1,000 and 100,000 reports and delta = 1e-6,
//     the accountant's upper bound on eps from the atoms is at least the
//     least value its upper bound from the matrix certifies, em.Upper /
//     (1 + accountant.Tolerance) (when the matrix's bound is Tight; its
//     lower bound from the lower-bound triples otherwise). Honest atoms
//     cannot fall below it: the matrix's decomposition takes the largest
//     blanket and merges only outputs of equal ratios (exact), while a
//     smaller blanket is a post-processing the other way (the adversary
//     can hand the extra blanket draws back to the anonymous pool, knowing
//     each other's value) and a spread only raises the bound; so the
//     exact eps of honest atoms is at least the matrix's, which is at
//     least em.Upper / (1 + Tolerance), and ea.Upper is at least that.
//     A lie that merges atoms of different ratios, 3% below the matrix's
//     upper bound, passed the weaker comparison with the matrix's lower
//     bound (9% below at 4 RAPPOR buckets; found in review).
//
// A randomizer whose atoms equal its matrix's decomposition (every
// built-in; ldptest.SameDecomposition, up to a relative 1e-12) passes
// without the accountant's bounds; one that declares looser atoms (less
// blanket, larger eps) passes them. Without sdk.FormDeclarer,
// or without one of the forms at this configuration, the test is skipped
// saying so.

// formsNs are the batch sizes at which the forms test compares eps.
var formsNs = []int{1000, 100_000}

// formsMaxCells bounds the matrices the forms test decomposes.
const formsMaxCells = 1 << 16

// formsAgree runs the forms test at eps0, whose default declaration is d.
func (v *verifier) formsAgree(ctx context.Context, c *Check, name string, eps0 float64, d *accountant.Declaration) {
	name += " forms"
	if d.Form != accountant.FormMatrix && d.Form != accountant.FormAtoms {
		return
	}
	fd, ok := v.r.(sdk.FormDeclarer)
	if !ok {
		c.skip(name, "the randomizer declares one form: implement sdk.FormDeclarer so that the kit compares its atoms with its matrix on a small configuration")
		return
	}
	get := func(form accountant.Form) (*accountant.Declaration, string) {
		if d.Form == form {
			return d, ""
		}
		var other *accountant.Declaration
		err := guard(func() (err error) {
			other, err = fd.DeclareForm(ctx, eps0, form)
			return err
		})
		switch {
		case errors.Is(err, errors.ErrUnsupported):
			return nil, "the randomizer declares one form: implement sdk.FormDeclarer so that the kit compares its atoms with its matrix on a small configuration"
		case err != nil && wraps(err, sdk.ErrBadConfig):
			return nil, fmt.Sprintf("no %s declaration at this configuration (%v)", form, err)
		case err != nil:
			return nil, fmt.Sprintf("DeclareForm(%s): %v", form, err)
		case other == nil || other.Form != form:
			return nil, fmt.Sprintf("DeclareForm(%s) answered another form", form)
		}
		return other, ""
	}
	m, why := get(accountant.FormMatrix)
	if why != "" {
		c.skip(name, "%s", why)
		return
	}
	a, why := get(accountant.FormAtoms)
	if why != "" {
		c.skip(name, "%s", why)
		return
	}
	if m.Matrix == nil || float64(m.Matrix.NumInputs())*float64(m.Matrix.NumOutputs()) > formsMaxCells {
		c.skip(name, "the matrix is too large to decompose here; run the kit on a smaller configuration")
		return
	}
	dm, err := accountant.Decompose(m)
	if err != nil {
		c.fail(name, "the accountant rejects the matrix form: %v", err)
		return
	}
	da, err := accountant.Decompose(a)
	if err != nil {
		c.fail(name, "the accountant rejects the atoms form: %v", err)
		return
	}
	gm := dm.Gamma()
	for i, s := range da.Upper {
		if ga := s.Gamma(); ga > gm*(1+ratioTol) {
			c.fail(name+" blanket", "the atoms' pair %d declares a blanket mass of %.12g, the matrix %.12g: the atoms claim more amplification than the matrix (whose probabilities the sampler is tested against) gives", i, ga, gm)
			return
		}
	}
	c.pass(name+" blanket", "the atoms' blanket mass is at most the matrix's")
	if ldptest.SameDecomposition(da, dm) {
		c.pass(name+" same", "the atoms equal the matrix's decomposition")
		return
	}
	for _, n := range formsNs {
		em, err := accountant.Epsilon(accountant.DeclaredMech{Decl: m, Name: "matrix"}, eps0, n, 1e-6)
		if err != nil {
			c.fail(fmt.Sprintf("%s n=%d", name, n), "the accountant on the matrix: %v", err)
			continue
		}
		ea, err := accountant.Epsilon(accountant.DeclaredMech{Decl: a, Name: "atoms"}, eps0, n, 1e-6)
		if err != nil {
			c.fail(fmt.Sprintf("%s n=%d", name, n), "the accountant on the atoms: %v", err)
			continue
		}
		floor, what := em.Lower, "the matrix's lower bound"
		if em.Tight {
			floor, what = em.Upper/(1+accountant.Tolerance), "the least value the matrix's certified upper bound allows"
		}
		t := Test{Name: fmt.Sprintf("%s n=%d", name, n), Statistic: ea.Upper, Threshold: floor}
		if ea.Upper < floor {
			t.Status = Fail
			t.Message = fmt.Sprintf("the atoms give eps <= %.6g at n = %d, delta = 1e-6, below %s, %.6g: the atoms claim more privacy than the mechanism gives", ea.Upper, n, what, floor)
		} else {
			t.Status = Pass
			t.Message = fmt.Sprintf("atoms eps <= %.6g, at least %s, %.6g", ea.Upper, what, floor)
		}
		c.add(t)
	}
}
