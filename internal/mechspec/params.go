package mechspec

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Params gives a Constructor typed access to the parameters of one leaf of a
// spec (krr:k=10:eps0=1.5 has the parameters k and eps0; matrix:FILE.json
// has the positional argument FILE.json). Errors name the mechanism, the key
// and the rule, and point at the value in the spec. Every parameter a
// Constructor does not ask for is rejected after it returns, so constructors
// need not check for unknown keys.
type Params struct {
	s *paramState
}

type param struct {
	key      string // "" for a positional argument
	value    string
	keyPos   int
	valuePos int
	used     bool
}

type paramState struct {
	spec    string
	name    string
	namePos int
	params  []*param
	asked   []string // keys the constructor asked for, in order
}

// Mechanism returns the name of the mechanism the parameters belong to.
func (p Params) Mechanism() string {
	if p.s == nil {
		return ""
	}
	return p.s.name
}

// lookup returns the parameter with the key and records that the
// constructor knows the key.
func (p Params) lookup(key string) *param {
	if p.s == nil {
		return nil
	}
	known := false
	for _, k := range p.s.asked {
		known = known || k == key
	}
	if !known {
		p.s.asked = append(p.s.asked, key)
	}
	for _, pr := range p.s.params {
		if pr.key == key {
			pr.used = true
			return pr
		}
	}
	return nil
}

// Has reports whether key is given.
func (p Params) Has(key string) bool { return p.lookup(key) != nil }

// Keys returns the keys given, in spec order.
func (p Params) Keys() []string {
	if p.s == nil {
		return nil
	}
	var keys []string
	for _, pr := range p.s.params {
		if pr.key != "" {
			keys = append(keys, pr.key)
		}
	}
	return keys
}

// String returns the value of key, which is required.
func (p Params) String(key string) (string, error) {
	pr := p.lookup(key)
	if pr == nil {
		return "", p.missing(key)
	}
	return pr.value, nil
}

// StringOr returns the value of key, or def when key is not given.
func (p Params) StringOr(key, def string) (string, error) {
	if pr := p.lookup(key); pr != nil {
		return pr.value, nil
	}
	return def, nil
}

// Int returns the integer value of key, which is required. The syntax is
// that of ParseInt (100, 1_000, 1e3).
func (p Params) Int(key string) (int, error) {
	pr := p.lookup(key)
	if pr == nil {
		return 0, p.missing(key)
	}
	return p.parseInt(pr)
}

// IntOr returns the integer value of key, or def when key is not given.
func (p Params) IntOr(key string, def int) (int, error) {
	pr := p.lookup(key)
	if pr == nil {
		return def, nil
	}
	return p.parseInt(pr)
}

// Float returns the finite floating-point value of key, which is required.
// NaN and Inf are rejected.
func (p Params) Float(key string) (float64, error) {
	pr := p.lookup(key)
	if pr == nil {
		return 0, p.missing(key)
	}
	return p.parseFloat(pr)
}

// FloatOr returns the finite floating-point value of key, or def when key is
// not given.
func (p Params) FloatOr(key string, def float64) (float64, error) {
	pr := p.lookup(key)
	if pr == nil {
		return def, nil
	}
	return p.parseFloat(pr)
}

// Arg returns the positional argument (FILE.json in matrix:FILE.json), which
// is required and must be unique.
func (p Params) Arg() (string, error) {
	if p.s == nil {
		return "", p.missing("")
	}
	var first *param
	for _, pr := range p.s.params {
		if pr.key != "" {
			continue
		}
		if first != nil {
			return "", p.errorAt(pr.valuePos, fmt.Sprintf("%s takes one argument, got a second: %q", p.s.name, pr.value), nil)
		}
		pr.used = true
		first = pr
	}
	if first == nil {
		return "", p.missing("")
	}
	return first.value, nil
}

// Invalid returns an error for the value of key (the positional argument
// when key is "") breaking rule, e.g. p.Invalid("k", ">= 2") gives
// "krr: k must be >= 2, got 1". The error points at the value.
func (p Params) Invalid(key, rule string) error {
	pr := p.find(key)
	if pr == nil {
		return p.errorAt(p.namePos(), fmt.Sprintf("%s: %s must be %s", p.Mechanism(), describe(key), rule), nil)
	}
	return p.errorAt(pr.valuePos, fmt.Sprintf("%s: %s must be %s, got %s", p.Mechanism(), describe(key), rule, pr.value), nil)
}

// Wrap returns err as an error about the value of key (the positional
// argument when key is ""), pointing at the value in the spec, e.g.
// "matrix:m.json: open m.json: no such file or directory". errors.Is and
// errors.As see err.
func (p Params) Wrap(key string, err error) error {
	pr := p.find(key)
	switch {
	case pr == nil:
		return p.errorAt(p.namePos(), fmt.Sprintf("%s: %v", p.Mechanism(), err), err)
	case key == "":
		return p.errorAt(pr.valuePos, fmt.Sprintf("%s:%s: %v", p.Mechanism(), pr.value, err), err)
	default:
		return p.errorAt(pr.valuePos, fmt.Sprintf("%s: %s=%s: %v", p.Mechanism(), key, pr.value, err), err)
	}
}

// find returns the first parameter with key without marking it used.
func (p Params) find(key string) *param {
	if p.s == nil {
		return nil
	}
	for _, pr := range p.s.params {
		if pr.key == key {
			return pr
		}
	}
	return nil
}

func (p Params) namePos() int {
	if p.s == nil {
		return 0
	}
	return p.s.namePos
}

func describe(key string) string {
	if key == "" {
		return "argument"
	}
	return key
}

func (p Params) parseInt(pr *param) (int, error) {
	v, err := ParseInt(pr.value)
	if err != nil {
		rule := "an integer"
		if errors.Is(err, errRange) {
			rule = fmt.Sprintf("an integer in [%d, %d]", math.MinInt, math.MaxInt)
		}
		return 0, p.errorAt(pr.valuePos, fmt.Sprintf("%s: %s must be %s, got %s", p.s.name, pr.key, rule, pr.value), nil)
	}
	return v, nil
}

func (p Params) parseFloat(pr *param) (float64, error) {
	v, err := ParseFloat(pr.value)
	if err != nil {
		return 0, p.errorAt(pr.valuePos, fmt.Sprintf("%s: %s must be a finite number, got %s", p.s.name, pr.key, pr.value), nil)
	}
	return v, nil
}

func (p Params) missing(key string) error {
	if p.s == nil {
		return p.errorAt(0, "missing "+describe(key), nil)
	}
	msg := fmt.Sprintf("%s: missing parameter %s", p.s.name, key)
	if key == "" {
		msg = fmt.Sprintf("%s: missing argument (%s:VALUE)", p.s.name, p.s.name)
	}
	if keys := p.Keys(); len(keys) > 0 {
		msg += fmt.Sprintf(" (given: %s)", strings.Join(keys, ", "))
	}
	return p.errorAt(p.s.namePos, msg, nil)
}

func (p Params) errorAt(pos int, msg string, cause error) error {
	spec := ""
	if p.s != nil {
		spec = p.s.spec
	}
	return &Error{Spec: spec, Pos: pos, Msg: msg, Kind: ErrParam, Cause: cause}
}

// unused returns an error for the first parameter the constructor did not
// ask for.
func (s *paramState) unused() error {
	for _, pr := range s.params {
		if pr.used {
			continue
		}
		takes := "no parameters"
		if len(s.asked) > 0 {
			takes = "parameters " + strings.Join(s.asked, ", ")
		}
		if pr.key == "" {
			return &Error{Spec: s.spec, Pos: pr.valuePos, Kind: ErrParam,
				Msg: fmt.Sprintf("%s: unexpected argument %q (%s takes %s)", s.name, pr.value, s.name, takes)}
		}
		return &Error{Spec: s.spec, Pos: pr.keyPos, Kind: ErrParam,
			Msg: fmt.Sprintf("%s: unknown parameter %q (%s takes %s)", s.name, pr.key, s.name, takes)}
	}
	return nil
}
