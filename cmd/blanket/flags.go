package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/internal/mechspec"
)

// The flag values below validate on Set and return the broken rule as an
// error starting with "must"; flagError adds the flag name and the value.

// intValue is an integer flag in [min, max], written as 1000000, 1_000_000
// or 1e6 (mechspec.ParseInt).
type intValue struct {
	min, max int
	// example completes the rule, e.g. " (e.g. 1e6)".
	example string
	v       int
	set     bool
}

// newCountValue returns a number-of-users flag: [1, accountant.MaxN].
func newCountValue() *intValue {
	return &intValue{min: 1, max: accountant.MaxN, example: " (e.g. 1e6, 1_000_000)"}
}

// newRoundsValue returns a number-of-reports-per-user flag: [1,
// accountant.MaxRounds], 1 unless given.
func newRoundsValue() *intValue {
	return &intValue{min: 1, max: accountant.MaxRounds, example: " (e.g. 365, 1e3, 1_000)", v: 1}
}

func (c *intValue) String() string {
	if !c.set {
		return ""
	}
	return strconv.Itoa(c.v)
}

func (c *intValue) Set(s string) error {
	v, err := c.parse(s)
	if err != nil {
		return err
	}
	c.v, c.set = v, true
	return nil
}

func (c *intValue) Type() string { return "int" }

func (c *intValue) parse(s string) (int, error) {
	v, err := mechspec.ParseInt(strings.TrimSpace(s))
	if err != nil || v < c.min || v > c.max {
		return 0, fmt.Errorf("must be an integer in [%d, %d]%s", c.min, c.max, c.example)
	}
	return v, nil
}

// floatRule is the domain of a float flag.
type floatRule struct {
	// text completes "must be ...".
	text string
	ok   func(float64) bool
}

var (
	// probRule is the domain of delta.
	probRule = floatRule{"a number in (0,1)", func(v float64) bool { return v > 0 && v < 1 }}
	// epsRule is the domain of a central eps.
	epsRule = floatRule{"a finite number > 0", func(v float64) bool { return v > 0 }}
	// eps0Rule is the domain of a local budget.
	eps0Rule = floatRule{fmt.Sprintf("a finite number in (0, %g]", accountant.MaxEps0), func(v float64) bool { return v > 0 && v <= accountant.MaxEps0 }}
)

func (r floatRule) parse(s string) (float64, error) {
	v, err := mechspec.ParseFloat(strings.TrimSpace(s))
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || !r.ok(v) {
		return 0, errors.New("must be " + r.text)
	}
	return v, nil
}

// floatValue is a float flag with a domain.
type floatValue struct {
	rule floatRule
	v    float64
	set  bool
}

func (f *floatValue) String() string {
	if !f.set {
		return ""
	}
	return strconv.FormatFloat(f.v, 'g', -1, 64)
}

func (f *floatValue) Set(s string) error {
	v, err := f.rule.parse(s)
	if err != nil {
		return err
	}
	f.v, f.set = v, true
	return nil
}

func (f *floatValue) Type() string { return "float" }

// sweepValue is either one value or a range LO:HI (LO < HI) of a curve
// axis. Integer sweeps use intValue's syntax, the others a floatRule.
type sweepValue struct {
	integer *intValue // the domain of an integer sweep
	rule    floatRule // the domain of a float sweep
	lo, hi  float64
	isRange bool
	set     bool
	text    string
}

func (s *sweepValue) String() string { return s.text }

func (s *sweepValue) Type() string {
	if s.integer != nil {
		return "int|LO:HI"
	}
	return "float|LO:HI"
}

func (s *sweepValue) Set(text string) error {
	parse := func(t string) (float64, error) {
		if s.integer != nil {
			v, err := s.integer.parse(t)
			return float64(v), err
		}
		return s.rule.parse(t)
	}
	loText, hiText, isRange := strings.Cut(text, ":")
	lo, err := parse(loText)
	if err != nil {
		return fmt.Errorf("%v, or a range LO:HI of such values", err)
	}
	hi := lo
	if isRange {
		if hi, err = parse(hiText); err != nil {
			return fmt.Errorf("%v, or a range LO:HI of such values", err)
		}
		if !(lo < hi) {
			return errors.New("must be a range LO:HI with LO < HI")
		}
	}
	*s = sweepValue{integer: s.integer, rule: s.rule, lo: lo, hi: hi, isRange: isRange, set: true, text: text}
	return nil
}

// logSpace returns points values from lo to hi, evenly spaced on a log
// scale, with both ends exact.
func logSpace(lo, hi float64, points int) []float64 {
	out := make([]float64, points)
	r := math.Log(hi / lo)
	for i := range out {
		out[i] = lo * math.Exp(r*float64(i)/float64(points-1))
	}
	out[0], out[points-1] = lo, hi
	return out
}

// logSpaceInts is logSpace rounded to integers, without repeats (a narrow
// integer range yields fewer than points values).
func logSpaceInts(lo, hi, points int) []int {
	var out []int
	for _, v := range logSpace(float64(lo), float64(hi), points) {
		n := int(math.Round(v))
		if len(out) == 0 || n != out[len(out)-1] {
			out = append(out, n)
		}
	}
	return out
}
