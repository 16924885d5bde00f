package accountant

import "math"

// Baseline names, the keys of the maps returned by the *Baselines functions.
const (
	// BaselineClone is the generic clone decomposition (docs/accounting.md §6)
	// evaluated by the same engine: what the mechanism would get if only its
	// local eps were known.
	BaselineClone = "clone"
	// BaselineFMT21 is Feldman, McMillan, Talwar 2021, eq. (1).
	BaselineFMT21 = "fmt21"
	// BaselineBBGN19Hoeffding is Balle et al. 2019, Theorem 5.3 (k-RR
	// specific when the mechanism is k-RR).
	BaselineBBGN19Hoeffding = "bbgn19_hoeffding"
	// BaselineBBGN19Bennett is Balle et al. 2019, Lemma 5.6 (k-RR specific
	// when the mechanism is k-RR).
	BaselineBBGN19Bennett = "bbgn19_bennett"
	// BaselineEFMRTT19 is Erlingsson et al. 2019.
	BaselineEFMRTT19 = "efmrtt19"
)

// BaselineNames lists the baselines in display order.
var BaselineNames = []string{BaselineClone, BaselineFMT21, BaselineBBGN19Hoeffding, BaselineBBGN19Bennett, BaselineEFMRTT19}

var closedForms = map[string]ClosedForm{
	BaselineFMT21:           FMT21,
	BaselineBBGN19Hoeffding: BBGN19Hoeffding,
	BaselineBBGN19Bennett:   BBGN19Bennett,
	BaselineEFMRTT19:        EFMRTT19,
}

func ptr(v float64) *float64 { return &v }

// closedFormMap evaluates every closed-form baseline with f into out: the
// value, or nil where the baseline does not apply.
func closedFormMap(out map[string]*float64, f func(ClosedForm) (float64, bool)) map[string]*float64 {
	for name, b := range closedForms {
		if v, ok := f(b); ok {
			out[name] = ptr(v)
		} else {
			out[name] = nil
		}
	}
	return out
}

// EpsilonBaselines returns, for every baseline, the central eps it proves for
// m at (eps0, n, delta); nil where the baseline does not apply. Baselines
// treat the whole mechanism as a generic randomizer at its local eps, except
// that the Balle et al. bounds use their k-RR form when m is k-RR.
func EpsilonBaselines(m Mechanism, eps0 float64, n int, delta float64) (map[string]*float64, error) {
	if err := checkQuery(eps0, n); err != nil {
		return nil, err
	}
	if err := checkDelta("delta", delta); err != nil {
		return nil, err
	}
	d, err := m.Decompose(eps0)
	if err != nil {
		return nil, err
	}
	out := map[string]*float64{}
	clone := CloneDecomposition(d.LocalEps)
	out[BaselineClone] = ptr(epsilonOf(clone, n, delta).Upper)
	return closedFormMap(out, func(b ClosedForm) (float64, bool) {
		return ClosedFormEpsilon(b, d.LocalEps, d.KRR, n, delta)
	}), nil
}

// DeltaBaselines returns, for every baseline, the delta it proves at eps; nil
// where it does not apply.
func DeltaBaselines(m Mechanism, eps0 float64, n int, eps float64) (map[string]*float64, error) {
	if err := checkQuery(eps0, n); err != nil {
		return nil, err
	}
	if err := checkEps("eps", eps); err != nil {
		return nil, err
	}
	d, err := m.Decompose(eps0)
	if err != nil {
		return nil, err
	}
	out := map[string]*float64{}
	clone := CloneDecomposition(d.LocalEps)
	b, _ := deltaBracket(clone.Upper[0], n, eps)
	out[BaselineClone] = ptr(math.Min(b.hi, 1))
	return closedFormMap(out, func(cf ClosedForm) (float64, bool) {
		return ClosedFormDelta(cf, d.LocalEps, d.KRR, n, eps)
	}), nil
}

// CalibrateBaselines returns, for every baseline, the largest eps0 it allows
// for the target; nil where it does not apply. With t.Rounds > 1 the
// composition baselines (basic_composition, kov15, clone_composed) are set
// and the single-report ones are nil; with one round the reverse. The closed forms apply to a
// mechanism calibrated as a whole (a single randomizer, or the generic view
// of a composition whose local eps equals its budget).
func CalibrateBaselines(m Mechanism, t Target) (map[string]*float64, error) {
	if err := checkDelta("target delta", t.Delta); err != nil {
		return nil, err
	}
	if err := checkN(t.N); err != nil {
		return nil, err
	}
	if err := checkEps("target eps", t.Eps); err != nil {
		return nil, err
	}
	if t.Rounds > 1 {
		return calibrateBaselinesRounds(m, t), nil
	}
	// k-RR-specific forms only when the mechanism is k-RR at every budget;
	// probe at the target eps.
	krr := 0
	if d, err := m.Decompose(math.Max(t.Eps, 0.1)); err == nil {
		krr = d.KRR
	}
	out := withNil(map[string]*float64{}, CompositionBaselineNames)
	c, err := calibrateEps0(Generic(), t)
	if err != nil {
		out[BaselineClone] = nil
	} else {
		out[BaselineClone] = ptr(c)
	}
	return closedFormMap(out, func(cf ClosedForm) (float64, bool) {
		return ClosedFormCalibrate(cf, krr, t.N, t.Eps, t.Delta)
	}), nil
}
