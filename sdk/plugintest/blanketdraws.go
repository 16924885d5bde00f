package plugintest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// The blanket check: a randomizer's blanket draws against its declaration.
//
// A randomizer that implements sdk.BlanketSampler draws reports from its
// blanket omega = r/gamma, r_y = min_x R[x][y] (docs/accounting.md §3),
// for a shuffler to add to its batches (a privacy floor). The kit draws
// Samples of them at each tested eps0, reads them as the frequency check
// reads Randomize's reports, and tests their counts by Pearson's
// chi-square against the blanket of the declaration at eps0:
//
//   - matrix: each output's column minimum over the inputs, over their
//     sum (ldptest.BlanketLaw), the draws mapped to outputs as in the
//     frequency check (Options.Output, sdk.OutputMapper or the index
//     encoding);
//   - atoms: for each declared pair (up to maxAtomSets sets, at the inputs
//     the frequency check takes), the draws mapped to its atoms and bins
//     by sdk.AtomMapper, whose masses are R_j over the sum of the pair's
//     R: summing omega over an atom's outputs gives exactly its blanket
//     mass over gamma, whatever the pair, since r_y does not depend on
//     it;
//   - segments: the first pair's bins (when it declares no exact atoms),
//     the draws mapped to bins as the frequency check maps reports, with
//     masses R_b over the sum of the bins' R.
//
// A sampler that draws from another law (one input's row, the blanket of
// another eps0, a law biased toward some outputs) fails. A generic
// declaration states no blanket, and a stateful randomizer's reports are
// not draws of one declared law: the test is then skipped, and counts as
// unchecked (Report.BlanketUnchecked) as do draws the kit cannot read. A
// randomizer that does not implement sdk.BlanketSampler has the check
// skipped with a message saying so: the interface is optional, so that
// is not unchecked, but a shuffler cannot add a floor for it.
//
// Threshold. The check is a family of its own: alpha is
// FalseFailureRate/families, split evenly between the tested eps0 and,
// within one, between the pairs tested.

// CheckBlanket (named "draws", apart from the frequency check's "blanket at"
// tests) tests the randomizer's blanket draws (sdk.BlanketSampler)
// against the blanket distribution of its declaration (Pearson's
// chi-square).
const CheckBlanket = "draws"

// blanketNotImplemented is the name of the blanket check's test skipped
// for a randomizer without sdk.BlanketSampler.
const blanketNotImplemented = "not implemented"

// blanketSampler returns the randomizer as an sdk.BlanketSampler, ok
// false when it is none or answers a draw of none at the first eps0 with
// errors.ErrUnsupported (a plugin without the RPC); err is any other
// failure of that probe.
func (v *verifier) blanketSampler(ctx context.Context) (bs sdk.BlanketSampler, ok bool, err error) {
	bs, ok = v.r.(sdk.BlanketSampler)
	if !ok {
		return nil, false, nil
	}
	err = guard(func() error {
		_, err := bs.SampleBlanket(ctx, v.opts.Eps0s[0], 0)
		return err
	})
	if errors.Is(err, errors.ErrUnsupported) {
		return nil, false, nil
	}
	return bs, true, err
}

func (v *verifier) checkBlanket(ctx context.Context, c *Check) {
	bs, ok, err := v.blanketSampler(ctx)
	if err != nil {
		c.fail("SampleBlanket", "no draws at eps0 = %g: %v", v.opts.Eps0s[0], err)
		return
	}
	if !ok {
		c.skip(blanketNotImplemented, "the randomizer does not draw from its blanket distribution: the shuffler's privacy floor (blanket reports added to every batch) is unavailable for it; implement sdk.BlanketSampler (RPC SampleBlanket) to offer it")
		return
	}
	if v.desc.Stateful {
		c.skip("all", "a stateful randomizer's reports are not draws of one declared law: the kit has no blanket to test its draws against")
		return
	}
	alpha := v.opts.FalseFailureRate / families / float64(len(v.opts.Eps0s))
	for _, eps0 := range v.opts.Eps0s {
		v.blanketDraws(ctx, c, bs, eps0, alpha)
		if ctx.Err() != nil {
			return
		}
	}
}

// blanketDraws runs the blanket check at eps0 with false-failure budget
// alpha.
func (v *verifier) blanketDraws(ctx context.Context, c *Check, bs sdk.BlanketSampler, eps0, alpha float64) {
	name := fmt.Sprintf("eps0=%g", eps0)
	d, err := v.declare(ctx, eps0)
	if err != nil {
		c.fail(name, "Declare: %v", err)
		return
	}
	type target struct {
		name   string
		probs  []float64
		output outputsFunc
		hint   string
	}
	var targets []target
	switch {
	case d.Form == accountant.FormMatrix && d.Matrix != nil:
		m := d.Matrix
		output, hint, skip, err := v.outputMap(ctx, eps0, m.NumOutputs())
		if !c.usable(name, err, skip) {
			return
		}
		targets = append(targets, target{fmt.Sprintf("%s blanket (%d outputs)", name, m.NumOutputs()), ldptest.BlanketLaw(m), output, hint})
	case d.Form == accountant.FormAtoms:
		sets, skipped := v.atomSets(d)
		for _, s := range skipped {
			if strings.HasPrefix(s, "pair") {
				c.skip(name+" atoms", "%s", s)
			}
		}
		for _, a := range sets {
			if a.triple {
				continue
			}
			f, skip, err := v.atomMap(ctx, eps0, a)
			if !c.usable(name+" "+a.label, err, skip) {
				continue
			}
			probs := ldptest.PairBlanketLaw(a.set)
			targets = append(targets, target{fmt.Sprintf("%s %s blanket (%d atoms)", name, a.label, len(probs)), probs, f, ""})
		}
		if len(targets) == 0 && len(d.Pairs) == 0 {
			c.skip(name, "the atoms declaration has no pair, so no blanket to test draws against")
		}
	case d.Form == accountant.FormSegments:
		if len(d.Pairs) == 0 || len(d.Pairs[0].Atoms) > 0 || len(d.Pairs[0].Bins) == 0 {
			c.skip(name, "the segments declaration's first pair has exact atoms besides bins (or no bins): which output an atom is, is not declared")
			return
		}
		pair := d.Pairs[0]
		output, hint, skip, err := v.outputMap(ctx, eps0, len(pair.Bins))
		if !c.usable(name, err, skip) {
			return
		}
		targets = append(targets, target{fmt.Sprintf("%s blanket (%d bins)", name, len(pair.Bins)), ldptest.PairBlanketLaw(pair), output, hint})
	default:
		c.skip(name, "the %s declaration states no blanket: the draws are unchecked", d.Form)
		return
	}
	if len(targets) == 0 {
		return
	}
	var reports [][]byte
	err = guard(func() (err error) {
		reports, err = bs.SampleBlanket(ctx, eps0, v.opts.Samples)
		return err
	})
	if err == nil && len(reports) != v.opts.Samples {
		err = fmt.Errorf("%d draws for %d asked", len(reports), v.opts.Samples)
	}
	if err != nil {
		c.fail(name+" SampleBlanket", "%v", err)
		return
	}
	for _, t := range targets {
		v.fitTest(ctx, c, eps0, reports, t.probs, t.output, t.hint, t.name, "the declared blanket", alpha/float64(len(targets)))
		if ctx.Err() != nil {
			return
		}
	}
}
