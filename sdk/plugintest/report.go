package plugintest

import (
	"fmt"
	"math"
	"strings"
)

// Status is the outcome of a check or of one of its tests.
type Status string

// The outcomes.
const (
	// Pass means the randomizer met the requirement.
	Pass Status = "pass"
	// Fail means it did not; the test's Message says how.
	Fail Status = "fail"
	// Skip means the requirement could not be tested on this configuration;
	// the Message says why (for example: the declaration has no matrix, so
	// run the kit on a small configuration too).
	Skip Status = "skip"
)

// The names of the checks, in the order Verify runs them.
const (
	// CheckDescribe validates the Description.
	CheckDescribe = "describe"
	// CheckDeclaration validates each declaration with the accountant and
	// bounds its exact likelihood ratios by e^eps0.
	CheckDeclaration = "declaration"
	// CheckFrequencies tests the sampler's output frequencies against the
	// declared matrix rows (Pearson's chi-square).
	CheckFrequencies = "frequencies"
	// CheckEstimator tests that Estimate is unbiased (t-test) and that its
	// reported variance matches the spread of the estimates (chi-square).
	CheckEstimator = "estimator"
	// CheckInputs feeds malformed inputs and budgets.
	CheckInputs = "inputs"
	// CheckReports feeds malformed reports and tests that statistics add up
	// and merge.
	CheckReports = "reports"
	// CheckStatistics feeds foreign and corrupt statistics to Estimate and
	// validates the shape of an estimate.
	CheckStatistics = "statistics"
)

// Report is the result of Verify: one Check per requirement, each made of
// named tests.
type Report struct {
	// Plugin, Version and Digest identify the verified configuration
	// (Description.Name, Version and Digest).
	Plugin  string `json:"plugin"`
	Version string `json:"version"`
	Digest  string `json:"digest"`
	// Eps0s are the local budgets tested.
	Eps0s []float64 `json:"eps0s"`
	// FalseFailureRate bounds the probability that a correct randomizer
	// fails any statistical test of the run (Options.FalseFailureRate).
	FalseFailureRate float64 `json:"false_failure_rate"`
	// Checks are the checks in the order they ran.
	Checks []*Check `json:"checks"`
}

// Check is one requirement of the plugin contract.
type Check struct {
	// Name is one of the Check* constants.
	Name string `json:"name"`
	// Status is Fail if any test failed, Skip if every test was skipped (or
	// there were none), else Pass.
	Status Status `json:"status"`
	// Tests are the individual tests.
	Tests []Test `json:"tests"`
}

// Test is one test of a check. Statistical tests fill Statistic, DF,
// Threshold, PValue and Alpha; deterministic tests leave them zero.
type Test struct {
	// Name says what was tested, e.g. `eps0=2 input "a" (row 0)`.
	Name string `json:"name"`
	// Status is the outcome.
	Status Status `json:"status"`
	// Message explains the outcome.
	Message string `json:"message,omitempty"`
	// Statistic is the test statistic (chi-square, |t|, or a ratio), capped
	// at math.MaxFloat64 so that the report encodes as JSON.
	Statistic float64 `json:"statistic,omitempty"`
	// DF is the degrees of freedom of the statistic's null distribution.
	DF float64 `json:"df,omitempty"`
	// Threshold is the critical value the statistic was compared with.
	Threshold float64 `json:"threshold,omitempty"`
	// PValue is the probability, under the null hypothesis, of a statistic
	// at least as extreme.
	PValue float64 `json:"p_value,omitempty"`
	// Alpha is the false-failure rate of this test: its share of the run's
	// FalseFailureRate.
	Alpha float64 `json:"alpha,omitempty"`
	// Atoms is set on the frequency check's tests that ran on reports read
	// through the randomizer's Atoms (sdk.AtomMapper): the sampler checked
	// against an atoms declaration, at a size with no matrix.
	Atoms bool `json:"atoms,omitempty"`
}

// Passed reports whether no check failed. Skipped checks do not fail a run;
// read their messages.
func (r *Report) Passed() bool {
	for _, c := range r.Checks {
		if c.Status == Fail {
			return false
		}
	}
	return true
}

// Unchecked returns why the sampler went unchecked somewhere in the run:
// the messages of the frequency check's skipped tests, each prefixed by
// its test's name (an atoms declaration whose randomizer does not map
// reports to atoms, a generic declaration, reports the kit cannot read,
// or the check skipped by Options.Skip). A run with none checked the
// sampler against the declaration at every eps0 it tested.
func (r *Report) Unchecked() []string {
	c := r.Check(CheckFrequencies)
	if c == nil {
		return nil
	}
	var out []string
	for _, t := range c.Tests {
		if t.Status == Skip {
			out = append(out, t.Name+": "+t.Message)
		}
	}
	return out
}

// BlanketUnchecked returns why the randomizer's blanket draws went
// unchecked somewhere in the run: the messages of the blanket check's
// skipped tests, each prefixed by its test's name (draws the kit cannot
// read, a declaration that states no blanket, or the check skipped by
// Options.Skip). A randomizer without sdk.BlanketSampler has none: the
// interface is optional, and the check says it is missing.
func (r *Report) BlanketUnchecked() []string {
	c := r.Check(CheckBlanket)
	if c == nil {
		return nil
	}
	var out []string
	for _, t := range c.Tests {
		if t.Status == Skip && t.Name != blanketNotImplemented {
			out = append(out, t.Name+": "+t.Message)
		}
	}
	return out
}

// Summary is the report's last line: PASS or FAIL, and when the sampler
// went unchecked (Unchecked), or the blanket draws of a randomizer that
// offers them (BlanketUnchecked), PASS says so, never bare.
func (r *Report) Summary() string {
	if !r.Passed() {
		return "FAIL"
	}
	if u := r.Unchecked(); len(u) > 0 {
		return fmt.Sprintf("PASS, SAMPLER UNCHECKED (%d frequency tests skipped, see frequencies above): the declaration was not tested against the sampler at this configuration", len(u))
	}
	if u := r.BlanketUnchecked(); len(u) > 0 {
		return fmt.Sprintf("PASS, BLANKET DRAWS UNCHECKED (%d blanket tests skipped, see blanket above): the randomizer's blanket draws were not tested against its declaration at this configuration", len(u))
	}
	return "PASS"
}

// AtomTests returns how many tests of the frequency check ran on reports
// read through the randomizer's atoms (Test.Atoms), passed or failed: the
// chi-square tests of each declared set at its inputs and the blanket
// tests at other inputs.
func (r *Report) AtomTests() int {
	c := r.Check(CheckFrequencies)
	if c == nil {
		return 0
	}
	n := 0
	for _, t := range c.Tests {
		if t.Atoms {
			n++
		}
	}
	return n
}

// Check returns the check with the given name, or nil.
func (r *Report) Check(name string) *Check {
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// String formats the report for a terminal: a header, one line per check
// (with the smallest p-value of its statistical tests), one indented line
// per failed or skipped test, and the Summary.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plugin %s version %s (digest %s)\n", r.Plugin, r.Version, r.Digest)
	fmt.Fprintf(&b, "eps0 %v, false-failure rate %g\n", r.Eps0s, r.FalseFailureRate)
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "%-4s %s: %d tests", strings.ToUpper(string(c.Status)), c.Name, len(c.Tests))
		minP, at := 2.0, ""
		for _, t := range c.Tests {
			if t.Alpha > 0 && t.PValue < minP {
				minP, at = t.PValue, t.Name
			}
		}
		if at != "" {
			fmt.Fprintf(&b, ", smallest p-value %.3g (%s)", minP, at)
		}
		b.WriteByte('\n')
		for _, t := range c.Tests {
			if t.Status == Pass {
				continue
			}
			fmt.Fprintf(&b, "     %-4s %s: %s", t.Status, t.Name, t.Message)
			if t.Alpha > 0 {
				fmt.Fprintf(&b, " (statistic %.4g, threshold %.4g, p = %.3g, alpha %.3g)", t.Statistic, t.Threshold, t.PValue, t.Alpha)
			}
			b.WriteByte('\n')
		}
	}
	b.WriteString(r.Summary())
	b.WriteByte('\n')
	return b.String()
}

// add appends a test and updates the check's status.
func (c *Check) add(t Test) {
	t.Statistic = capFinite(t.Statistic)
	t.Threshold = capFinite(t.Threshold)
	c.Tests = append(c.Tests, t)
	c.Status = Skip
	for _, t := range c.Tests {
		switch {
		case t.Status == Fail:
			c.Status = Fail
			return
		case t.Status == Pass:
			c.Status = Pass
		}
	}
}

// usable records a mapping's error as a failed test, or its reason to
// skip as a skipped test, named name, and reports whether there was
// neither, so that the caller may use the mapping.
func (c *Check) usable(name string, err error, skip string) bool {
	switch {
	case err != nil:
		c.fail(name, "%v", err)
		return false
	case skip != "":
		c.skip(name, "%s", skip)
		return false
	}
	return true
}

func (c *Check) pass(name, format string, args ...any) {
	c.add(Test{Name: name, Status: Pass, Message: fmt.Sprintf(format, args...)})
}

func (c *Check) fail(name, format string, args ...any) {
	c.add(Test{Name: name, Status: Fail, Message: fmt.Sprintf(format, args...)})
}

func (c *Check) skip(name, format string, args ...any) {
	c.add(Test{Name: name, Status: Skip, Message: fmt.Sprintf(format, args...)})
}

// expect adds a deterministic test: Pass when ok, else Fail with the message.
func (c *Check) expect(ok bool, name, format string, args ...any) bool {
	if ok {
		c.add(Test{Name: name, Status: Pass})
	} else {
		c.fail(name, format, args...)
	}
	return ok
}

// capFinite maps NaN to 0 and infinities to ±math.MaxFloat64, so that a
// Report always encodes as JSON.
func capFinite(x float64) float64 {
	switch {
	case math.IsNaN(x):
		return 0
	case math.IsInf(x, 1):
		return math.MaxFloat64
	case math.IsInf(x, -1):
		return -math.MaxFloat64
	}
	return x
}
