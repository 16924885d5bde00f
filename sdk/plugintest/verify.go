package plugintest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

// families is the number of families of statistical tests that share
// Options.FalseFailureRate evenly: frequencies, means, variances, the
// privacy audit and the blanket draws.
const families = 5

// errPanic marks an error that stands for a panic inside the randomizer.
var errPanic = errors.New("plugintest: randomizer panicked")

// chunk is the largest batch the kit passes to one Randomize call, so that
// a randomizer served over gRPC gets requests of modest size and the context
// is checked between them.
const chunk = 4096

// Verify runs every check of the plugin contract on r and returns the
// report. A randomizer that misbehaves (wrong results, wrong errors, panics)
// yields failed checks, not an error; Verify returns an error only for
// invalid Options or when ctx is done. It calls r sequentially, so r may use
// a seeded, non-concurrent randomness source.
//
// r is tested at its own configuration: the frequency check needs a matrix
// declaration, which plugins return only for small domains, so run Verify
// on a small configuration as well as on the ones you ship. A stateful
// randomizer (Description.Stateful, a tree protocol) is driven through
// sdk.Stateful.Step; its exact checks need a tree of at most
// MaxEnumeratedTree periods (see the package doc).
func Verify(ctx context.Context, r sdk.Randomizer, opts Options) (*Report, error) {
	v := &verifier{r: r, draws: map[drawKey][]int{}}
	rep := &Report{}
	desc, ok := v.describe(ctx, rep)
	if !ok {
		for _, name := range []string{CheckDeclaration, CheckFrequencies, CheckPrivacy, CheckBlanket, CheckEstimator, CheckInputs, CheckReports, CheckStatistics} {
			c := &Check{Name: name, Status: Skip}
			c.skip("all", "Describe failed")
			rep.Checks = append(rep.Checks, c)
		}
		return rep, ctx.Err()
	}
	opts, err := opts.withDefaults(desc)
	if err != nil {
		return nil, err
	}
	v.desc, v.opts = desc, opts
	v.rng = rand.New(rand.NewPCG(opts.Seed, 0x706c7567696e7465)) // "pluginte"
	if v.tb, err = v.truth(); err != nil {
		return nil, err
	}
	rep.Plugin, rep.Version, rep.Digest = desc.Name, desc.Version, desc.Digest
	rep.Eps0s = slices.Clone(opts.Eps0s)
	rep.FalseFailureRate = opts.FalseFailureRate
	for _, step := range []struct {
		name string
		run  func(context.Context, *Check)
	}{
		{CheckDeclaration, v.checkDeclaration},
		{CheckFrequencies, v.checkFrequencies},
		{CheckPrivacy, v.checkPrivacy},
		{CheckBlanket, v.checkBlanket},
		{CheckEstimator, v.checkEstimator},
		{CheckFloorEstimate, v.checkFloorEstimate},
		{CheckInputs, v.checkInputs},
		{CheckReports, v.checkReports},
		{CheckStatistics, v.checkStatistics},
	} {
		c := &Check{Name: step.name, Status: Skip}
		rep.Checks = append(rep.Checks, c)
		if opts.skipped(step.name) {
			c.skip("all", "skipped by Options.Skip")
			continue
		}
		step.run(ctx, c)
		if err := ctx.Err(); err != nil {
			return rep, err
		}
	}
	if u := rep.Unchecked(); opts.Strict && len(u) > 0 {
		rep.Check(CheckFrequencies).fail("strict", "the sampler went unchecked (%d skipped tests above) and Options.Strict (--strict) requires it checked at every eps0: implement sdk.AtomMapper for an atoms declaration, sdk.OutputMapper for reports that are not output indices", len(u))
	}
	if u := rep.BlanketUnchecked(); opts.Strict && len(u) > 0 {
		rep.Check(CheckBlanket).fail("strict", "the blanket draws went unchecked (%d skipped tests above) and Options.Strict (--strict) requires them checked at every eps0: implement sdk.AtomMapper for an atoms declaration, sdk.OutputMapper for reports that are not output indices", len(u))
	}
	return rep, nil
}

// verifier holds one run's state.
type verifier struct {
	r    sdk.Randomizer
	desc *sdk.Description
	opts Options
	rng  *rand.Rand // the kit's own choices
	tb   *truthBatch
	// draws keeps the cells of the frequency check's samples for the
	// privacy audit, which draws at the same inputs.
	draws map[drawKey][]int
}

// drawKey names a sample of Samples reports: its eps0, its input and how
// its reports were mapped to cells (mappingOutputs, mappingBins or
// mappingSet).
type drawKey struct {
	eps0    float64
	input   Case
	mapping string
}

// The mappings of drawKey.
const (
	mappingOutputs = "outputs"
	mappingBins    = "bins"
)

// mappingSet names the mapping to the atoms of declared set i.
func mappingSet(i int) string { return fmt.Sprintf("set %d", i) }

// guard runs f and turns a panic into an error wrapping errPanic.
func guard(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", errPanic, p)
		}
	}()
	return f()
}

func (v *verifier) declare(ctx context.Context, eps0 float64) (d *accountant.Declaration, err error) {
	err = guard(func() error {
		d, err = v.r.Declare(ctx, eps0)
		return err
	})
	if err == nil && d == nil {
		err = errors.New("plugintest: Declare returned a nil declaration and no error")
	}
	return d, err
}

func (v *verifier) randomize(ctx context.Context, eps0 float64, in sdk.Inputs) (reps [][]byte, err error) {
	err = guard(func() error {
		reps, err = v.r.Randomize(ctx, eps0, in)
		return err
	})
	if err == nil && len(reps) != in.Len() {
		err = fmt.Errorf("plugintest: Randomize returned %d reports for %d inputs", len(reps), in.Len())
	}
	return reps, err
}

// randomizeAll randomizes in chunks of at most chunk inputs.
func (v *verifier) randomizeAll(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	out := make([][]byte, 0, in.Len())
	for lo := 0; lo < in.Len(); lo += chunk {
		hi := min(lo+chunk, in.Len())
		part := sdk.Inputs{}
		if in.Categories != nil {
			part.Categories = in.Categories[lo:hi]
		} else {
			part.Reals = in.Reals[lo:hi]
		}
		reps, err := v.randomize(ctx, eps0, part)
		if err != nil {
			return nil, err
		}
		out = append(out, reps...)
	}
	return out, nil
}

func (v *verifier) accumulate(ctx context.Context, eps0 float64, reports [][]byte) (s *sdk.Statistic, err error) {
	err = guard(func() error {
		s, err = v.r.Accumulate(ctx, eps0, reports)
		return err
	})
	if err == nil && s == nil {
		err = errors.New("plugintest: Accumulate returned a nil statistic and no error")
	}
	return s, err
}

func (v *verifier) estimate(ctx context.Context, s *sdk.Statistic) (e *sdk.Estimate, err error) {
	err = guard(func() error {
		e, err = v.r.Estimate(ctx, s)
		return err
	})
	if err == nil && e == nil {
		err = errors.New("plugintest: Estimate returned a nil estimate and no error")
	}
	return e, err
}

// describe runs the describe check and returns the description when the
// other checks can use it.
func (v *verifier) describe(ctx context.Context, rep *Report) (*sdk.Description, bool) {
	c := &Check{Name: CheckDescribe, Status: Skip}
	rep.Checks = append(rep.Checks, c)
	var d *sdk.Description
	err := guard(func() error {
		var err error
		d, err = v.r.Describe(ctx)
		return err
	})
	if err != nil || d == nil {
		c.fail("Describe", "error %v, description %v", err, d)
		return nil, false
	}
	rep.Plugin, rep.Version, rep.Digest = d.Name, d.Version, d.Digest
	c.expect(d.Name != "", "name", "Name is empty")
	c.expect(d.Version != "", "version", "Version is empty")
	c.expect(d.Digest != "", "digest", "Digest is empty")
	c.expect(d.Encoding != "", "encoding", "Encoding is empty")
	c.expect(d.ReportBytes >= 1, "report bytes", "ReportBytes = %d, must be >= 1", d.ReportBytes)
	ok := c.expect(!math.IsNaN(d.Eps0Min) && !math.IsNaN(d.Eps0Max) && d.Eps0Min > 0 && d.Eps0Min <= d.Eps0Max && d.Eps0Max <= accountant.MaxEps0,
		"eps0 range", "[Eps0Min, Eps0Max] = [%v, %v], must satisfy 0 < Eps0Min <= Eps0Max <= %v (accountant.MaxEps0)", d.Eps0Min, d.Eps0Max, float64(accountant.MaxEps0))
	switch d.Input {
	case sdk.InputCategorical:
		seen := map[string]int{}
		distinct := true
		for i, l := range d.Categories {
			if j, dup := seen[l]; dup {
				c.fail("categories distinct", "category %q at %d and %d", l, j, i)
				distinct = false
				break
			}
			seen[l] = i
		}
		if distinct {
			c.pass("categories distinct", "")
		}
		ok = c.expect(len(d.Categories) >= 2, "categories", "%d buckets, must be >= 2", len(d.Categories)) && distinct && ok
		c.expect(d.Other == "" || (len(d.Categories) > 0 && d.Categories[len(d.Categories)-1] == d.Other),
			"other bucket", "Other = %q is not the last bucket", d.Other)
	case sdk.InputReal:
		ok = c.expect(!math.IsNaN(d.Lo) && !math.IsInf(d.Lo, 0) && !math.IsNaN(d.Hi) && !math.IsInf(d.Hi, 0) && d.Lo < d.Hi && !math.IsInf(d.Hi-d.Lo, 0),
			"range", "[Lo, Hi] = [%v, %v], must be finite with Lo < Hi", d.Lo, d.Hi) && ok
		c.expect(len(d.Categories) == 0 && d.Other == "", "no categories", "a real randomizer lists %d categories", len(d.Categories))
	default:
		c.fail("input kind", "Input = %v, must be categorical or real", d.Input)
		ok = false
	}
	v.describeStateful(c, d)
	var d2 *sdk.Description
	err = guard(func() error {
		var err error
		d2, err = v.r.Describe(ctx)
		return err
	})
	c.expect(err == nil && d2 != nil && d2.Digest == d.Digest, "stable", "a second Describe gave %v, %v", d2, err)
	return d, ok
}

// wraps reports whether err wraps target and is not a recovered panic.
func wraps(err, target error) bool {
	return err != nil && !errors.Is(err, errPanic) && errors.Is(err, target)
}

// bucket returns the bucket of a categorical input by the contract: its
// category, else the other bucket; -1 when there is none.
func (v *verifier) bucket(label string) int {
	if i := slices.Index(v.desc.Categories, label); i >= 0 {
		return i
	}
	if v.desc.Other != "" {
		return len(v.desc.Categories) - 1
	}
	return -1
}

// unknownLabel returns a label that is not a category.
func (v *verifier) unknownLabel() string {
	for i := 0; ; i++ {
		l := fmt.Sprintf("plugintest: not a category %d", i)
		if !slices.Contains(v.desc.Categories, l) {
			return l
		}
	}
}

// clamp clamps a real input to the randomizer's range.
func (v *verifier) clamp(x float64) float64 {
	return min(max(x, v.desc.Lo), v.desc.Hi)
}

// repeat returns a batch of n copies of a case's input.
func (v *verifier) repeat(c Case, n int) sdk.Inputs {
	if v.desc.Input == sdk.InputCategorical {
		return sdk.Inputs{Categories: slices.Repeat([]string{c.Category}, n)}
	}
	return sdk.Inputs{Reals: slices.Repeat([]float64{c.Real}, n)}
}

// sample returns some valid inputs: cycling through the categories, or
// spread over the range.
func (v *verifier) sample(n int) sdk.Inputs {
	if v.desc.Input == sdk.InputCategorical {
		in := make([]string, n)
		for i := range in {
			in[i] = v.desc.Categories[i%len(v.desc.Categories)]
		}
		return sdk.Inputs{Categories: in}
	}
	in := make([]float64, n)
	for i := range in {
		in[i] = v.desc.Lo + (v.desc.Hi-v.desc.Lo)*float64(i)/float64(max(n-1, 1))
	}
	return sdk.Inputs{Reals: in}
}

// defaultOutput decodes the SDK's index encoding.
func defaultOutput(outputs int) func(float64, []byte) (int, error) {
	return func(_ float64, report []byte) (int, error) { return ldp.ReadIndex(report, outputs) }
}
