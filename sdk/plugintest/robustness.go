package plugintest

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

// badIndex is where the kit puts the bad value in a batch of badIndex+1
// inputs, to test that the error names it.
const badIndex = 5

// badEps0s returns local budgets outside the randomizer's range.
func (v *verifier) badEps0s() []float64 {
	out := []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, 0}
	if v.desc.Eps0Min > 0 {
		out = append(out, v.desc.Eps0Min/2)
	}
	if big := v.desc.Eps0Max * 2; !math.IsInf(big, 0) && big > v.desc.Eps0Max {
		out = append(out, big)
	}
	return out
}

// checkInputs feeds inputs of the wrong kind, unknown categories (without
// an other bucket), NaN and infinite reals, and local budgets outside the
// supported range. Each must fail with an error wrapping sdk.ErrBadInput
// (inputs) or sdk.ErrBadEps0 (budgets), never a panic, and a bad input's
// error must name its index. Valid edge cases must succeed: an empty batch
// (no reports), unknown categories with an other bucket, finite reals
// outside the range (clamped).
func (v *verifier) checkInputs(ctx context.Context, c *Check) {
	if v.desc.Stateful {
		v.stepInputs(ctx, c)
		return
	}
	eps0 := v.opts.Eps0s[0]
	good := v.sample(badIndex)
	withBad := func(in sdk.Inputs, bad sdk.Inputs) sdk.Inputs {
		return sdk.Inputs{Categories: append(slices.Clone(in.Categories), bad.Categories...), Reals: append(slices.Clone(in.Reals), bad.Reals...)}
	}
	type badCase struct {
		name string
		in   sdk.Inputs
	}
	var bad []badCase
	var okCases []badCase
	if v.desc.Input == sdk.InputCategorical {
		bad = append(bad,
			badCase{"reals for a categorical randomizer", sdk.Inputs{Reals: []float64{0.5}}},
			badCase{"categories and reals together", sdk.Inputs{Categories: good.Categories, Reals: []float64{0.5}}},
		)
		unknown := v.unknownLabel()
		unknownBatch := withBad(good, sdk.Inputs{Categories: []string{unknown}})
		if v.desc.Other == "" {
			bad = append(bad, badCase{"unknown category without an other bucket", unknownBatch})
		} else {
			okCases = append(okCases, badCase{"unknown category goes to the other bucket", unknownBatch})
		}
	} else {
		bad = append(bad,
			badCase{"categories for a real randomizer", sdk.Inputs{Categories: []string{"a"}}},
			badCase{"categories and reals together", sdk.Inputs{Categories: []string{"a"}, Reals: good.Reals}},
			badCase{"NaN", withBad(good, sdk.Inputs{Reals: []float64{math.NaN()}})},
			badCase{"+Inf", withBad(good, sdk.Inputs{Reals: []float64{math.Inf(1)}})},
			badCase{"-Inf", withBad(good, sdk.Inputs{Reals: []float64{math.Inf(-1)}})},
		)
		okCases = append(okCases, badCase{"finite reals outside the range are clamped", sdk.Inputs{Reals: []float64{
			v.desc.Lo - 1, v.desc.Hi + 1, -math.MaxFloat64, math.MaxFloat64, v.desc.Lo, v.desc.Hi}}})
	}
	for _, b := range bad {
		reps, err := v.randomize(ctx, eps0, b.in)
		if !c.expect(wraps(err, sdk.ErrBadInput), b.name, "Randomize returned %d reports and error %v, want an error wrapping sdk.ErrBadInput", len(reps), err) {
			continue
		}
		if len(b.in.Categories)+len(b.in.Reals) == badIndex+1 && (len(b.in.Categories) == 0 || len(b.in.Reals) == 0) {
			c.expect(strings.Contains(err.Error(), strconv.Itoa(badIndex)), b.name+": error names the index",
				"the bad input is at index %d, the error does not say so: %v", badIndex, err)
		}
	}
	for _, b := range okCases {
		reps, err := v.randomize(ctx, eps0, b.in)
		if c.expect(err == nil, b.name, "Randomize: %v", err) {
			stat, err := v.accumulate(ctx, eps0, reps)
			c.expect(err == nil && stat.N == int64(len(reps)) && stat.Malformed == 0, b.name+": reports valid",
				"Accumulate of its reports: N = %d, Malformed = %d, error %v", statN(stat), statBad(stat), err)
		}
	}
	reps, err := v.randomize(ctx, eps0, sdk.Inputs{})
	c.expect(err == nil && len(reps) == 0, "empty batch", "Randomize of no inputs: %d reports, error %v", len(reps), err)

	for _, e := range v.badEps0s() {
		name := fmt.Sprintf("eps0=%v", e)
		_, err := v.randomize(ctx, e, good)
		c.expect(wraps(err, sdk.ErrBadEps0), name+" Randomize", "error %v, want one wrapping sdk.ErrBadEps0", err)
		_, err = v.accumulate(ctx, e, nil)
		c.expect(wraps(err, sdk.ErrBadEps0), name+" Accumulate", "error %v, want one wrapping sdk.ErrBadEps0", err)
		_, err = v.declare(ctx, e)
		c.expect(wraps(err, sdk.ErrBadEps0), name+" Declare", "error %v, want one wrapping sdk.ErrBadEps0", err)
	}
}

func statN(s *sdk.Statistic) int64 {
	if s == nil {
		return -1
	}
	return s.N
}

func statBad(s *sdk.Statistic) int64 {
	if s == nil {
		return -1
	}
	return s.Malformed
}

// sameStat reports whether two statistics are equal in every field.
func sameStat(a, b *sdk.Statistic) bool {
	return a != nil && b != nil && a.Plugin == b.Plugin && a.Digest == b.Digest && a.Eps0 == b.Eps0 &&
		a.N == b.N && a.Malformed == b.Malformed && a.Draws == b.Draws && slices.Equal(a.Counts, b.Counts)
}

func fmtStat(s *sdk.Statistic) string {
	if s == nil {
		return "<nil>"
	}
	counts := fmt.Sprint(s.Counts)
	if len(counts) > 80 {
		counts = counts[:77] + "..."
	}
	if s.Draws != 0 {
		return fmt.Sprintf("{N: %d, Malformed: %d, Draws: %d, Counts: %s}", s.N, s.Malformed, s.Draws, counts)
	}
	return fmt.Sprintf("{N: %d, Malformed: %d, Counts: %s}", s.N, s.Malformed, counts)
}

// reportsBatch is the number of valid reports of the reports check.
const reportsBatch = 64

// oversized is the length of the oversized malformed report.
const oversized = 64 << 10

// checkReports accumulates valid reports, malformed ones (nil, empty,
// truncated, extended, oversized) and random ones of the right length, and
// tests that: every statistic carries the randomizer's name, digest and
// eps0; reports of the wrong length are counted in Malformed, never fatal;
// a random report of the right length is counted exactly once (valid or
// malformed); a batch's statistic is the merge of its reports' statistics
// (so valid reports among malformed ones still count) and does not depend
// on their order (the shuffler permutes them); statistics of two halves
// merge (sdk.Statistic.Merge) into the statistic of the whole; and
// Accumulate does not modify the reports.
func (v *verifier) checkReports(ctx context.Context, c *Check) {
	eps0 := v.opts.Eps0s[0]
	valid, call, err := v.validReports(ctx, eps0, reportsBatch)
	if !c.expect(err == nil, call, "%v", err) {
		return
	}
	lengthOK := true
	for i, r := range valid {
		if len(r) != v.desc.ReportBytes {
			c.fail("report length", "report %d has %d bytes, ReportBytes is %d", i, len(r), v.desc.ReportBytes)
			lengthOK = false
			break
		}
	}
	if lengthOK {
		c.pass("report length", "")
	}
	whole, err := v.accumulate(ctx, eps0, valid)
	if !c.expect(err == nil, "Accumulate", "%v", err) {
		return
	}
	c.expect(whole.Plugin == v.desc.Name && whole.Digest == v.desc.Digest && whole.Eps0 == eps0, "statistic identity",
		"statistic has plugin %q, digest %q, eps0 %v; want %q, %q, %v", whole.Plugin, whole.Digest, whole.Eps0, v.desc.Name, v.desc.Digest, eps0)
	c.expect(whole.N == reportsBatch && whole.Malformed == 0, "valid reports counted", "%d valid reports: N = %d, Malformed = %d", reportsBatch, whole.N, whole.Malformed)

	for _, empty := range []struct {
		name    string
		reports [][]byte
	}{{"no reports (nil)", nil}, {"no reports (empty)", [][]byte{}}} {
		s, err := v.accumulate(ctx, eps0, empty.reports)
		c.expect(err == nil && s.N == 0 && s.Malformed == 0 && len(s.Counts) == len(whole.Counts), empty.name,
			"Accumulate: %s, error %v", fmtStat(s), err)
	}

	rb := v.desc.ReportBytes
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(v.rng.Uint32())
		}
		return b
	}
	wrong := []struct {
		name   string
		report []byte
	}{
		{"nil report", nil},
		{"empty report", []byte{}},
		{"truncated report", slices.Clone(valid[0][:rb-1])},
		{"extended report", append(slices.Clone(valid[0]), 0)},
		{"oversized report", random(oversized)},
		{"random bytes, one short", random(rb - 1)},
		{"random bytes, one long", random(rb + 1)},
	}
	if wrong[2].report == nil { // a 1-byte report truncates to empty, not nil
		wrong[2].report = []byte{}
	}
	var malformed [][]byte
	for _, w := range wrong {
		s, err := v.accumulate(ctx, eps0, [][]byte{w.report})
		c.expect(err == nil && s.N == 0 && s.Malformed == 1, w.name+" is malformed", "Accumulate: %s, error %v", fmtStat(s), err)
		malformed = append(malformed, w.report)
	}
	rightLength := [][]byte{bytes.Repeat([]byte{0xff}, rb), bytes.Repeat([]byte{0}, rb)}
	for range 8 {
		rightLength = append(rightLength, random(rb))
	}
	for i, r := range rightLength {
		s, err := v.accumulate(ctx, eps0, [][]byte{r})
		c.expect(err == nil && s.N+s.Malformed == 1 && s.N >= 0 && s.Malformed >= 0, fmt.Sprintf("right-length bytes %d counted once", i),
			"Accumulate(%x): %s, error %v", r, fmtStat(s), err)
	}

	// A mixed, shuffled batch is the merge of its reports' statistics.
	mixed := slices.Concat(valid, malformed, rightLength)
	v.rng.Shuffle(len(mixed), func(i, j int) { mixed[i], mixed[j] = mixed[j], mixed[i] })
	saved := make([][]byte, len(mixed))
	for i, r := range mixed {
		saved[i] = slices.Clone(r)
	}
	got, err := v.accumulate(ctx, eps0, mixed)
	if c.expect(err == nil, "mixed batch", "Accumulate: %v", err) {
		var want *sdk.Statistic
		ok := true
		for _, r := range mixed {
			s, err := v.accumulate(ctx, eps0, [][]byte{r})
			if err != nil {
				ok = false
				break
			}
			if want == nil {
				want = s
			} else if want.Merge(s) != nil {
				ok = false
				break
			}
		}
		c.expect(ok && sameStat(got, want), "mixed batch is the sum of its reports",
			"Accumulate of %d valid and %d malformed reports gives %s; merging the reports one by one gives %s", len(valid), len(malformed), fmtStat(got), fmtStat(want))
		c.expect(got.N >= reportsBatch && got.Malformed >= int64(len(malformed)), "valid reports count among malformed ones",
			"N = %d (want >= %d), Malformed = %d (want >= %d)", got.N, reportsBatch, got.Malformed, len(malformed))
	}
	unchanged := true
	for i := range mixed {
		if !bytes.Equal(mixed[i], saved[i]) {
			unchanged = false
		}
	}
	c.expect(unchanged, "reports unchanged", "Accumulate modified the reports it was given")

	// Order does not matter.
	perm := slices.Clone(valid)
	v.rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	s, err := v.accumulate(ctx, eps0, perm)
	c.expect(err == nil && sameStat(s, whole), "order", "shuffled reports give %s, in order %s (error %v)", fmtStat(s), fmtStat(whole), err)

	// Halves merge into the whole.
	cut := 1 + v.rng.IntN(len(valid)-1)
	a, errA := v.accumulate(ctx, eps0, valid[:cut])
	b, errB := v.accumulate(ctx, eps0, valid[cut:])
	merged := false
	if errA == nil && errB == nil {
		merged = a.Merge(b) == nil && sameStat(a, whole)
	}
	c.expect(merged, "merge", "statistics of reports [0,%d) and [%d,%d) do not merge into the whole: %s vs %s (errors %v, %v)", cut, cut, len(valid), fmtStat(a), fmtStat(whole), errA, errB)
}

// checkStatistics estimates a valid statistic and checks the estimate's
// shape (identity fields, items by the contract of sdk.Estimate and
// sdk.Item: one item per bucket in order for categorical randomizers, "sum"
// and "mean" for real ones; intervals Value ± z·sqrt(Variance) at the
// estimate's confidence; post-processed values feasible and inside their
// intervals), that Estimate does not modify the statistic, and that foreign
// or corrupt statistics (nil, another plugin or configuration, wrong
// number of counts, no valid reports, negative N or Malformed, bad eps0)
// are rejected with errors wrapping sdk.ErrBadStatistic.
func (v *verifier) checkStatistics(ctx context.Context, c *Check) {
	eps0 := v.opts.Eps0s[0]
	reports, call, err := v.validReports(ctx, eps0, reportsBatch)
	if !c.expect(err == nil, call, "%v", err) {
		return
	}
	stat, err := v.accumulate(ctx, eps0, reports)
	if !c.expect(err == nil, "Accumulate", "%v", err) {
		return
	}
	saved := stat.Clone()
	est, err := v.estimate(ctx, stat)
	c.expect(sameStat(stat, saved), "statistic unchanged", "Estimate modified its statistic: %s, was %s", fmtStat(stat), fmtStat(saved))
	if c.expect(err == nil, "Estimate", "%v", err) {
		v.estimateShape(c, stat, est, v.isTree(ctx, eps0))
	}

	corrupt := []struct {
		name string
		edit func(*sdk.Statistic) *sdk.Statistic
	}{
		{"nil statistic", func(*sdk.Statistic) *sdk.Statistic { return nil }},
		{"another plugin", func(s *sdk.Statistic) *sdk.Statistic { s.Plugin += "-other"; return s }},
		{"another configuration", func(s *sdk.Statistic) *sdk.Statistic { s.Digest += "0"; return s }},
		{"one count more", func(s *sdk.Statistic) *sdk.Statistic { s.Counts = append(s.Counts, 0); return s }},
		{"no valid reports", func(s *sdk.Statistic) *sdk.Statistic {
			s.N, s.Malformed = 0, 3
			clear(s.Counts)
			return s
		}},
		{"negative N", func(s *sdk.Statistic) *sdk.Statistic { s.N = -s.N; return s }},
		{"negative Malformed", func(s *sdk.Statistic) *sdk.Statistic { s.Malformed = -1; return s }},
		{"eps0 NaN", func(s *sdk.Statistic) *sdk.Statistic { s.Eps0 = math.NaN(); return s }},
		{"eps0 0", func(s *sdk.Statistic) *sdk.Statistic { s.Eps0 = 0; return s }},
		{"eps0 +Inf", func(s *sdk.Statistic) *sdk.Statistic { s.Eps0 = math.Inf(1); return s }},
	}
	if len(stat.Counts) > 0 {
		corrupt = append(corrupt,
			struct {
				name string
				edit func(*sdk.Statistic) *sdk.Statistic
			}{"one count fewer", func(s *sdk.Statistic) *sdk.Statistic { s.Counts = s.Counts[:len(s.Counts)-1]; return s }},
			struct {
				name string
				edit func(*sdk.Statistic) *sdk.Statistic
			}{"no counts", func(s *sdk.Statistic) *sdk.Statistic { s.Counts = nil; return s }},
		)
	}
	for _, k := range corrupt {
		e, err := v.estimate(ctx, k.edit(saved.Clone()))
		c.expect(wraps(err, sdk.ErrBadStatistic), k.name, "Estimate returned estimate %v and error %v, want an error wrapping sdk.ErrBadStatistic", e != nil, err)
	}
}

// postTolerance is the relative tolerance on the post-processed counts
// summing to N: a projection computed in float64 over at most a few
// million buckets.
const postTolerance = 1e-9

// ciTolerance is the relative tolerance on an interval's half-width
// z·sqrt(Variance): one square root and one product, a few ulps.
const ciTolerance = 1e-9

// estimateShape checks an estimate's fields; tree says the randomizer is
// a tree protocol (its estimate is one item, the on state's count).
func (v *verifier) estimateShape(c *Check, stat *sdk.Statistic, est *sdk.Estimate, tree bool) {
	c.expect(est.Plugin == v.desc.Name && est.Eps0 == stat.Eps0 && est.N == stat.N && est.Malformed == stat.Malformed,
		"estimate identity", "estimate has plugin %q, eps0 %v, N %d, Malformed %d; statistic %q, %v, %d, %d",
		est.Plugin, est.Eps0, est.N, est.Malformed, v.desc.Name, stat.Eps0, stat.N, stat.Malformed)
	if !c.expect(est.Confidence > 0 && est.Confidence < 1, "confidence", "Confidence = %v, must be in (0,1)", est.Confidence) {
		return
	}
	labels := make([]string, len(est.Items))
	for i, it := range est.Items {
		labels[i] = it.Label
	}
	n := float64(est.N)
	var feasible func(label string) (lo, hi float64, ok bool)
	if tree {
		// A tree protocol estimates the users in the on state: a count,
		// not bounded by the reports N of the span so far.
		c.expect(len(labels) == 1 && labels[0] == v.desc.Categories[1], "items", "items %q, want one: the on state %q", labels, v.desc.Categories[1])
		feasible = func(string) (float64, float64, bool) { return 0, math.Inf(1), true }
	} else if v.desc.Input == sdk.InputCategorical {
		c.expect(slices.Equal(labels, v.desc.Categories), "items", "items %q, want one per bucket in order: %q", labels, v.desc.Categories)
		feasible = func(string) (float64, float64, bool) { return 0, n, true }
	} else {
		c.expect(slices.Contains(labels, "sum") && slices.Contains(labels, "mean"), "items", "items %q, want \"sum\" and \"mean\"", labels)
		feasible = func(l string) (float64, float64, bool) {
			switch l {
			case "sum":
				return n * v.desc.Lo, n * v.desc.Hi, true
			case "mean":
				return v.desc.Lo, v.desc.Hi, true
			}
			return 0, 0, false
		}
	}
	z := ldp.ZScore(est.Confidence)
	var postSum float64
	var problems []string
	for _, it := range est.Items {
		finite := !math.IsNaN(it.Value) && !math.IsInf(it.Value, 0) && !math.IsNaN(it.Variance) && !math.IsInf(it.Variance, 0) && it.Variance >= 0
		if !finite {
			problems = append(problems, fmt.Sprintf("item %q: value %v, variance %v", it.Label, it.Value, it.Variance))
			continue
		}
		h := z * math.Sqrt(it.Variance)
		if !(math.Abs((it.Hi-it.Value)-h) <= ciTolerance*max(h, math.Abs(it.Value)) && math.Abs((it.Value-it.Lo)-h) <= ciTolerance*max(h, math.Abs(it.Value))) {
			problems = append(problems, fmt.Sprintf("item %q: interval [%v, %v] around %v is not ± z·sqrt(variance) = ± %v", it.Label, it.Lo, it.Hi, it.Value, h))
		}
		if !(it.PostLo <= it.Post && it.Post <= it.PostHi) {
			problems = append(problems, fmt.Sprintf("item %q: post-processed %v outside its interval [%v, %v]", it.Label, it.Post, it.PostLo, it.PostHi))
		}
		if a, b, ok := feasible(it.Label); ok {
			tol := postTolerance * max(math.Abs(a), math.Abs(b), 1)
			if math.IsInf(b, 1) {
				tol = postTolerance * max(math.Abs(a), 1)
			}
			if !(it.Post >= a-tol && it.Post <= b+tol) {
				problems = append(problems, fmt.Sprintf("item %q: post-processed %v outside the feasible [%v, %v]", it.Label, it.Post, a, b))
			}
		}
		postSum += it.Post
	}
	if v.desc.Input == sdk.InputCategorical && !tree && !(math.Abs(postSum-n) <= postTolerance*max(n, 1)) {
		problems = append(problems, fmt.Sprintf("post-processed counts sum to %v, want N = %v", postSum, n))
	}
	if len(problems) > 0 {
		c.fail("items valid", "%s", strings.Join(problems, "; "))
	} else {
		c.pass("items valid", "")
	}
}
