package ldp

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/sdk"
)

// CategoricalConfig checks the plugin-independent configuration of a
// categorical randomizer named plugin: no range, and no parameters but
// known (see CheckParams). Errors wrap sdk.ErrBadConfig.
func CategoricalConfig(plugin string, cfg sdk.Config, known ...string) error {
	if cfg.Lo != 0 || cfg.Hi != 0 {
		return fmt.Errorf("%w: %s takes categories, not a range [%v, %v]", sdk.ErrBadConfig, plugin, cfg.Lo, cfg.Hi)
	}
	return CheckParams(plugin, cfg.Params, known...)
}

// CheckParams returns an error wrapping sdk.ErrBadConfig when params names
// a parameter that the randomizer named plugin does not have (one not in
// known).
func CheckParams(plugin string, params map[string]string, known ...string) error {
	for name := range params {
		if slices.Contains(known, name) {
			continue
		}
		if len(known) == 0 {
			return fmt.Errorf("%w: %s has no parameter %q", sdk.ErrBadConfig, plugin, name)
		}
		quoted := make([]string, len(known))
		for i, k := range known {
			quoted[i] = fmt.Sprintf("%q", k)
		}
		return fmt.Errorf("%w: %s has no parameter %q (it has %s)", sdk.ErrBadConfig, plugin, name, strings.Join(quoted, ", "))
	}
	return nil
}

// FormFor returns the form in which a randomizer of the given size
// (buckets, levels or bits) declares itself: the full matrix when size is
// at most matrixMax, else the exact atoms, which stay small for any size.
func FormFor(size, matrixMax int) declare.Form {
	if size <= matrixMax {
		return declare.FormMatrix
	}
	return declare.FormAtoms
}

// UnsupportedForm returns the error, wrapping sdk.ErrBadConfig, of a
// randomizer (who, in the message) that declares itself as a matrix or by
// atoms when asked for another form.
func UnsupportedForm(who string, form declare.Form) error {
	return fmt.Errorf("%w: %s declares forms %q and %q, not %q", sdk.ErrBadConfig, who, declare.FormMatrix, declare.FormAtoms, form)
}

// Accumulate returns the statistic of a batch of reports, the work of
// sdk.Randomizer.Accumulate: the statistic carries desc's name and digest
// and eps0, has counts counters, and add is called on each report in turn
// to add it to the counters; add returns false, leaving the counters as
// they were, for a malformed report, which is then counted in Malformed
// instead of N. eps0 is checked first (errors wrap sdk.ErrBadEps0), and ctx
// every CtxEvery reports.
func Accumulate(ctx context.Context, desc *sdk.Description, eps0 float64, counts int, reports [][]byte, add func(counts []int64, report []byte) bool) (*sdk.Statistic, error) {
	s, err := newStatistic(desc, eps0, counts)
	if err != nil {
		return nil, err
	}
	for i, rep := range reports {
		if err := Canceled(ctx, i); err != nil {
			return nil, err
		}
		if add(s.Counts, rep) {
			s.N++
		} else {
			s.Malformed++
		}
	}
	return s, nil
}

// AccumulateIndices is Accumulate for reports that each hold one index in
// [0, n) in the fixed-width encoding of ReadIndex: Counts[i] is the number
// of reports of index i, and a report that ReadIndex rejects is malformed.
func AccumulateIndices(ctx context.Context, desc *sdk.Description, eps0 float64, n int, reports [][]byte) (*sdk.Statistic, error) {
	// The loop of Accumulate, with ReadIndex inline rather than behind a
	// function value: the call per report would cost a quarter of the time
	// on this hot path.
	s, err := newStatistic(desc, eps0, n)
	if err != nil {
		return nil, err
	}
	for i, rep := range reports {
		if err := Canceled(ctx, i); err != nil {
			return nil, err
		}
		y, err := ReadIndex(rep, n)
		if err != nil {
			s.Malformed++
			continue
		}
		s.Counts[y]++
		s.N++
	}
	return s, nil
}

// newStatistic checks eps0 and returns the empty statistic of desc's
// randomizer at eps0 with counts counters.
func newStatistic(desc *sdk.Description, eps0 float64, counts int) (*sdk.Statistic, error) {
	if err := CheckEps0(eps0); err != nil {
		return nil, err
	}
	return &sdk.Statistic{Plugin: desc.Name, Digest: desc.Digest, Eps0: eps0, Counts: make([]int64, counts)}, nil
}

// NewEstimate returns the estimate that the randomizer named plugin makes
// of a statistic it has checked (CheckStatistic): the statistic's eps0, N
// and Malformed, the confidence level of the items' intervals, and the
// items.
func NewEstimate(plugin string, stat *sdk.Statistic, confidence float64, items []sdk.Item) *sdk.Estimate {
	return &sdk.Estimate{
		Plugin:     plugin,
		Eps0:       stat.Eps0,
		N:          stat.N,
		Malformed:  stat.Malformed,
		Confidence: confidence,
		Items:      items,
	}
}
