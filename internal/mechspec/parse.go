package mechspec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/blanket-dp/blanket/sdk/plugin"

	"github.com/blanket-dp/blanket/accountant"
)

// parser is a recursive-descent parser over the bytes of one spec.
type parser struct {
	reg   *Registry
	spec  string
	pos   int
	depth int
}

// weightTol is the tolerance on the sum of parallel weights: the one
// accountant.ParallelMech applies, so that 0.3333333333 thirds pass.
const weightTol = 1e-9

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isBare reports whether c may appear in a bare value.
func isBare(c byte) bool {
	return c > ' ' && c != 0x7f && !strings.ContainsRune(`,():="`, rune(c))
}

// scanName returns the length of the name starting at s[i:].
func scanName(s string, i int) int {
	j := i
	if j < len(s) && isLetter(s[j]) {
		j++
		for j < len(s) && (isLetter(s[j]) || isDigit(s[j]) || s[j] == '_' || s[j] == '-') {
			j++
		}
	}
	return j - i
}

func (p *parser) space() {
	for p.pos < len(p.spec) && isSpace(p.spec[p.pos]) {
		p.pos++
	}
}

// skip skips white space and returns the position reached.
func (p *parser) skip() int {
	p.space()
	return p.pos
}

// peek returns the next byte after white space, or 0 at the end.
func (p *parser) peek() byte {
	p.space()
	if p.pos < len(p.spec) {
		return p.spec[p.pos]
	}
	return 0
}

// got describes what is at the current position, for error messages.
func (p *parser) got() string {
	if p.pos >= len(p.spec) {
		return "end of input"
	}
	r, _ := utf8.DecodeRuneInString(p.spec[p.pos:])
	return fmt.Sprintf("%q", r)
}

func (p *parser) expected(what string) error {
	return &Error{Spec: p.spec, Pos: p.pos, Kind: ErrSyntax, Msg: fmt.Sprintf("expected %s, got %s", what, p.got())}
}

// expect consumes the byte c or returns an error.
func (p *parser) expect(c byte, what string) error {
	if p.peek() != c {
		return p.expected(what)
	}
	p.pos++
	return nil
}

// mech parses a mechanism.
func (p *parser) mech() (accountant.Mechanism, error) {
	p.space()
	start := p.pos
	n := scanName(p.spec, p.pos)
	if n == 0 {
		return nil, p.expected("mechanism name")
	}
	name := p.spec[p.pos : p.pos+n]
	p.pos += n
	switch name {
	case "joint", "parallel", "subsample":
		if p.depth >= MaxDepth {
			return nil, &Error{Spec: p.spec, Pos: start, Kind: ErrLimit,
				Msg: fmt.Sprintf("combinators nested deeper than %d", MaxDepth)}
		}
		if err := p.expect('(', fmt.Sprintf("'(' after %s", name)); err != nil {
			return nil, err
		}
		p.depth++
		defer func() { p.depth-- }()
		switch name {
		case "joint":
			return p.joint()
		case "parallel":
			return p.parallel(start)
		default:
			return p.subsample()
		}
	}
	return p.leaf(name, start)
}

// joint parses the components of joint( ... ).
func (p *parser) joint() (accountant.Mechanism, error) {
	var parts []accountant.Mechanism
	for {
		pos := p.skip()
		m, err := p.mech()
		if err != nil {
			return nil, err
		}
		if err := p.refuseLongitudinal(m, "joint", pos); err != nil {
			return nil, err
		}
		parts = append(parts, m)
		if p.peek() == ',' {
			p.pos++
			continue
		}
		if err := p.expect(')', "',' or ')' in joint"); err != nil {
			return nil, err
		}
		return accountant.Joint(parts...), nil
	}
}

// parallel parses the weighted components of parallel( ... ).
func (p *parser) parallel(start int) (accountant.Mechanism, error) {
	var (
		weights []float64
		parts   []accountant.Mechanism
		sum     float64
	)
	for {
		w, err := p.probability("weight", "parallel weight")
		if err != nil {
			return nil, err
		}
		if err := p.expect(':', "':' after the parallel weight"); err != nil {
			return nil, err
		}
		pos := p.skip()
		m, err := p.mech()
		if err != nil {
			return nil, err
		}
		if err := p.refuseLongitudinal(m, "parallel", pos); err != nil {
			return nil, err
		}
		weights = append(weights, w)
		parts = append(parts, m)
		sum += w
		if p.peek() == ',' {
			p.pos++
			continue
		}
		if err := p.expect(')', "',' or ')' in parallel"); err != nil {
			return nil, err
		}
		if math.Abs(sum-1) > weightTol {
			return nil, &Error{Spec: p.spec, Pos: start, Kind: ErrParam,
				Msg: fmt.Sprintf("parallel: weights must sum to 1, got %g", sum)}
		}
		return accountant.Parallel(weights, parts...), nil
	}
}

// subsample parses subsample(rate, mech).
func (p *parser) subsample() (accountant.Mechanism, error) {
	s, err := p.probability("rate", "subsample rate")
	if err != nil {
		return nil, err
	}
	if err := p.expect(',', "',' after the subsample rate"); err != nil {
		return nil, err
	}
	pos := p.skip()
	m, err := p.mech()
	if err != nil {
		return nil, err
	}
	if err := p.refuseLongitudinal(m, "subsample", pos); err != nil {
		return nil, err
	}
	if err := p.expect(')', "')' after the subsampled mechanism"); err != nil {
		return nil, err
	}
	return accountant.Subsample(s, m), nil
}

// probability parses a number in (0,1].
func (p *parser) probability(what, name string) (float64, error) {
	p.space()
	start := p.pos
	v, ok, err := p.value()
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, p.expected(what)
	}
	f, err := ParseFloat(v)
	if err != nil || !(f > 0 && f <= 1) {
		return 0, &Error{Spec: p.spec, Pos: start, Kind: ErrParam,
			Msg: fmt.Sprintf("%s must be a number in (0,1], got %s", name, v)}
	}
	return f, nil
}

// value parses a bare or quoted value; ok is false if there is none.
func (p *parser) value() (v string, ok bool, err error) {
	p.space()
	if p.pos < len(p.spec) && p.spec[p.pos] == '"' {
		q, err := strconv.QuotedPrefix(p.spec[p.pos:])
		if err != nil {
			return "", false, &Error{Spec: p.spec, Pos: p.pos, Kind: ErrSyntax, Msg: "unterminated or invalid quoted value"}
		}
		v, err := strconv.Unquote(q)
		if err != nil {
			return "", false, &Error{Spec: p.spec, Pos: p.pos, Kind: ErrSyntax, Msg: "invalid quoted value"}
		}
		p.pos += len(q)
		return v, true, nil
	}
	start := p.pos
	for p.pos < len(p.spec) && isBare(p.spec[p.pos]) {
		p.pos++
	}
	return p.spec[start:p.pos], p.pos > start, nil
}

// leaf parses the parameters of a registered mechanism and calls its
// constructor.
func (p *parser) leaf(name string, start int) (accountant.Mechanism, error) {
	ctor, ok := p.reg.lookup(name)
	if !ok {
		return nil, &Error{Spec: p.spec, Pos: start, Kind: ErrUnknown,
			Msg: fmt.Sprintf("unknown mechanism %q (known: %s; combinators: %s); a plugin's mechanism needs its binary %s%s in --plugin-dir or $%s", name,
				strings.Join(p.reg.Names(), ", "), combinatorNames, plugin.BinaryPrefix, name, plugin.PluginDirEnv)}
	}
	st := &paramState{spec: p.spec, name: name, namePos: start}
	for p.peek() == ':' {
		p.pos++
		p.space()
		keyPos := p.pos
		v, ok, err := p.value()
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, p.expected("parameter (key=value) or argument")
		}
		end := p.pos
		pr := &param{value: v, keyPos: keyPos, valuePos: keyPos}
		if p.peek() == '=' {
			if n := scanName(p.spec, keyPos); n == 0 || keyPos+n != end {
				return nil, &Error{Spec: p.spec, Pos: keyPos, Kind: ErrSyntax,
					Msg: fmt.Sprintf("expected parameter name before '=', got %q", v)}
			}
			p.pos++
			p.space()
			pr.key, pr.valuePos = v, p.pos
			if pr.value, ok, err = p.value(); err != nil {
				return nil, err
			} else if !ok {
				return nil, p.expected(fmt.Sprintf("value for %s", pr.key))
			}
			for _, q := range st.params {
				if q.key == pr.key {
					return nil, &Error{Spec: p.spec, Pos: keyPos, Kind: ErrParam,
						Msg: fmt.Sprintf("%s: duplicate parameter %s", name, pr.key)}
				}
			}
		}
		st.params = append(st.params, pr)
	}
	m, err := ctor(Params{s: st})
	if err != nil {
		return nil, asError(p.spec, start, name, err)
	}
	if m == nil {
		return nil, &Error{Spec: p.spec, Pos: start, Kind: ErrParam, Msg: fmt.Sprintf("%s: constructor returned no mechanism", name)}
	}
	if err := st.unused(); err != nil {
		return nil, err
	}
	return m, nil
}
