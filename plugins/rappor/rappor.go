// Package rappor is unary encoding over d buckets (a declared list of
// categories plus an optional "other" bucket): a report is a d-bit vector
// whose bit j is 1 with probability p when j is the sender's bucket and q
// otherwise, all bits independent. It implements sdk.Randomizer.
//
// Two modes (Wang, Blocki, Li, Jha, USENIX Security 2017):
//
//   - Symmetric is basic one-time RAPPOR (Erlingsson, Pihur, Korolova, CCS
//     2014) with a known dictionary, "SUE": each bit is flipped with
//     probability 1/(e^(eps0/2)+1), p = e^(eps0/2)/(e^(eps0/2)+1), q = 1-p.
//     The budget splits eps0/2 per bit, two bits change between inputs.
//
//   - Optimized is "OUE": p = 1/2, q = 1/(e^eps0+1); the lowest variance of
//     the unary encodings, n·4e^eps0/(e^eps0-1)² per count.
//
//     r, err := rappor.New(rappor.Options{Categories: features, Mode: rappor.Optimized})
//     reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Categories: values})
package rappor

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"strconv"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

// Plugin identity and limits.
const (
	// Name is the plugin name.
	Name = "rappor"
	// Version is the report format version.
	Version = "1"
	// MaxBits is the largest number of buckets d (bits per report).
	MaxBits = 1 << 16
	// MatrixMaxD is the largest d for which the matrix form (2^d outputs) is
	// available; Declare returns it up to here, and the exact atoms above.
	MatrixMaxD = 6
)

// Mode selects the bit probabilities.
type Mode string

// The modes.
const (
	// Symmetric is basic one-time RAPPOR (SUE): p = e^(eps0/2)/(e^(eps0/2)+1),
	// q = 1 - p.
	Symmetric Mode = "symmetric"
	// Optimized is optimized unary encoding (OUE): p = 1/2,
	// q = 1/(e^eps0+1).
	Optimized Mode = "optimized"
)

// Options configures a unary-encoding randomizer.
type Options struct {
	// Categories are the category labels, distinct. Required; with Other at
	// least 1, else at least 2.
	Categories []string
	// Other is the label of a catch-all bucket for inputs not in Categories.
	// Defaults to "" (no bucket: such inputs are rejected).
	Other string
	// Mode selects symmetric RAPPOR or OUE. Defaults to Optimized.
	Mode Mode
	// Confidence is the level of the confidence intervals. Defaults to 0.95.
	Confidence float64
	// Rand is the randomness source. Defaults to crypto/rand (a new
	// ldp.CryptoSource per call). An injected source is shared by all calls,
	// which then must not run concurrently.
	Rand ldp.Source
}

// Randomizer is unary encoding. It is safe for concurrent use unless
// Options.Rand was set.
type Randomizer struct {
	dom   *ldp.Domain
	d     int
	width int
	mode  Mode
	conf  float64
	src   ldp.Source
	desc  sdk.Description
}

var (
	_ sdk.PackedRandomizer = (*Randomizer)(nil)
	_ sdk.AtomMapper       = (*Randomizer)(nil)
)

// New returns a unary-encoding randomizer. Errors wrap sdk.ErrBadConfig.
func New(opts Options) (*Randomizer, error) {
	conf, err := ldp.Confidence(opts.Confidence)
	if err != nil {
		return nil, err
	}
	mode := opts.Mode
	if mode == "" {
		mode = Optimized
	}
	if mode != Symmetric && mode != Optimized {
		return nil, fmt.Errorf("%w: mode %q, want %q or %q", sdk.ErrBadConfig, opts.Mode, Symmetric, Optimized)
	}
	dom, err := ldp.NewDomain(opts.Categories, opts.Other, MaxBits)
	if err != nil {
		return nil, err
	}
	d := dom.Size()
	w := (d + 7) / 8
	r := &Randomizer{dom: dom, d: d, width: w, mode: mode, conf: conf, src: opts.Rand}
	r.desc = sdk.Description{
		Name:        Name,
		Version:     Version,
		Input:       sdk.InputCategorical,
		Categories:  dom.Labels(),
		Other:       dom.Other(),
		Encoding:    fmt.Sprintf("%d-bit vector, bit j in byte j/8 at position j%%8 (least significant first), %d bytes, padding bits zero", d, w),
		ReportBytes: w,
		Params: []sdk.Param{
			{Name: "mode", Value: string(mode), Doc: `"symmetric" (basic one-time RAPPOR, SUE) or "optimized" (OUE)`},
			{Name: "d", Value: strconv.Itoa(d), Doc: "number of bits: the categories plus the other bucket (derived)"},
		},
		Eps0Min: ldp.MinEps0,
		Eps0Max: ldp.MaxEps0,
	}
	r.desc.Digest = ldp.Digest(r.desc)
	return r, nil
}

// FromConfig returns the randomizer of a plugin-independent configuration:
// Categories, Other, Confidence and the parameter "mode"; no range. Errors
// wrap sdk.ErrBadConfig.
func FromConfig(cfg sdk.Config) (*Randomizer, error) {
	if err := ldp.CategoricalConfig(Name, cfg, "mode"); err != nil {
		return nil, err
	}
	return New(Options{Categories: cfg.Categories, Other: cfg.Other, Mode: Mode(cfg.Params["mode"]), Confidence: cfg.Confidence})
}

// D returns the number of buckets (bits per report).
func (r *Randomizer) D() int { return r.d }

// Mode returns the mode.
func (r *Randomizer) Mode() Mode { return r.mode }

// Describe implements sdk.Randomizer.
func (r *Randomizer) Describe(ctx context.Context) (*sdk.Description, error) {
	return ldp.CopyDescription(&r.desc), nil
}

// bitProbs are the probabilities of a 1 and a 0 at the sender's own bit
// (p, 1-p) and at any other bit (q, 1-q), each in closed form.
type bitProbs struct{ p, notP, q, notQ float64 }

func (r *Randomizer) probs(eps0 float64) bitProbs {
	if r.mode == Symmetric {
		e := math.Exp(eps0 / 2)
		return bitProbs{p: e / (e + 1), notP: 1 / (e + 1), q: 1 / (e + 1), notQ: e / (e + 1)}
	}
	e := math.Exp(eps0)
	return bitProbs{p: 0.5, notP: 0.5, q: 1 / (e + 1), notQ: e / (e + 1)}
}

// Pure returns the estimator parameters at eps0: a report supports the
// buckets whose bits are set, p* = p, q* = q; p - q is tanh(eps0/4)
// (symmetric) or tanh(eps0/2)/2 (optimized).
func (r *Randomizer) Pure(eps0 float64) ldp.Pure {
	b := r.probs(eps0)
	diff := math.Tanh(eps0/2) / 2
	if r.mode == Symmetric {
		diff = math.Tanh(eps0 / 4)
	}
	return ldp.Pure{P: b.p, Q: b.q, Diff: diff}
}

// Declare implements sdk.Randomizer: the matrix when d <= MatrixMaxD, else
// the exact atoms.
func (r *Randomizer) Declare(ctx context.Context, eps0 float64) (*declare.Declaration, error) {
	return r.Declaration(eps0, ldp.FormFor(r.d, MatrixMaxD))
}

// DeclareForm implements sdk.FormDeclarer: Declaration.
func (r *Randomizer) DeclareForm(ctx context.Context, eps0 float64, form declare.Form) (*declare.Declaration, error) {
	return r.Declaration(eps0, form)
}

// Declaration returns the declaration at eps0 in the given form; both
// decompose identically. Matrix form needs d <= MatrixMaxD.
//
// Derivation of the atoms. Let alpha = p/q > 1 > beta = (1-p)/(1-q) (so
// alpha/beta = e^eps0 in both modes) and, for an output y with s set bits,
// A(s) = q^s (1-q)^(d-s), its probability if every bit had rate q. Then
// R[v][y] = A(s)·alpha when bit v of y is set and A(s)·beta when not. The
// blanket r_y = min_v R[v][y] is A(s)·beta when y has a zero bit and
// A(d)·alpha for the all-ones output.
//
// For a pair (x, x'), group outputs by (a, b, t): a = bit x, b = bit x',
// t = set bits among the other d-2; there are C(d-2, t) of them and
// s = a+b+t. Summing over t, sum_t C(d-2,t) A(a+b+t) = q^(a+b) (1-q)^(2-a-b).
// Except for the all-ones output, the ratio pair (p/r, q/r) is
// (alpha/beta)^(a, b), i.e. (e,1), (1,e), (e,e) or (1,1), independent of t;
// all-ones has (1,1). Merging equal ratios gives, with c = q(1-q) and
// W = q²(1 - q^(d-2)) (the (1,1) cell without all-ones):
//
//	a=1, b=0:                (beta c,  alpha c, beta c)    ratios (e, 1)
//	a=0, b=1:                (beta c,  beta c,  alpha c)   ratios (1, e)
//	a=b=1, not all ones:     (beta W,  alpha W, alpha W)   ratios (e, e)  (absent when d = 2)
//	a=b=0, and all ones:     (beta (1-q)² + alpha q^d, same, same)          ratios (1, 1)
//
// Every pair is alike, so one set is declared. Blanket mass:
// gamma = beta(1 - q^d) + alpha q^d.
//
// Lower-bound triple (x, x', x3), d >= 3, r = R[x3]: group by the three
// bits (a, b, c); summing over the other d-3 bits leaves weight
// w = q^(a+b+c) (1-q)^(3-a-b-c) and atom (w f(c), w f(a), w f(b)) with
// f(1) = alpha, f(0) = beta; (0,0,0) and (1,1,1) share ratios (1,1). With
// d = 2 the only triple is x3 = x': atoms (w f(b), w f(a), w f(b)) over (a, b),
// declared at inputs 0, 1, 1 (DeclaredSet.Inputs; the others hold for any
// distinct buckets and name none). Atoms maps reports to these atoms.
func (r *Randomizer) Declaration(eps0 float64, form declare.Form) (*declare.Declaration, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	b := r.probs(eps0)
	alpha, beta := b.p/b.q, b.notP/b.notQ
	f := func(bit int) float64 {
		if bit == 1 {
			return alpha
		}
		return beta
	}
	pow := func(s int) float64 { // A(s)
		return math.Pow(b.q, float64(s)) * math.Pow(b.notQ, float64(r.d-s))
	}
	d := &declare.Declaration{Eps0: eps0, Form: form}
	switch form {
	case declare.FormMatrix:
		if r.d > MatrixMaxD {
			return nil, fmt.Errorf("%w: matrix form needs d <= %d, have %d", sdk.ErrBadConfig, MatrixMaxD, r.d)
		}
		outputs := 1 << r.d
		rows := make([][]float64, r.d)
		outLabels := make([]string, outputs)
		for y := range outputs {
			outLabels[y] = fmt.Sprintf("%0*b", r.d, bits.Reverse64(uint64(y))>>(64-r.d))
		}
		for v := range rows {
			rows[v] = make([]float64, outputs)
			for y := range outputs {
				rows[v][y] = pow(bits.OnesCount(uint(y))) * f(y>>v&1)
			}
		}
		m, err := declare.NewMatrix(rows)
		if err != nil {
			return nil, err
		}
		m.InputLabels, m.OutputLabels = r.desc.Categories, outLabels
		d.Matrix = m
	case declare.FormAtoms:
		q, nq := b.q, b.notQ
		c := q * nq
		qd := math.Pow(q, float64(r.d))
		pair := []declare.Atom{
			{R: beta * c, P: alpha * c, Q: beta * c},
			{R: beta * c, P: beta * c, Q: alpha * c},
		}
		if r.d > 2 {
			w := q * q * -math.Expm1(float64(r.d-2)*math.Log(q))
			pair = append(pair, declare.Atom{R: beta * w, P: alpha * w, Q: alpha * w})
		}
		same := beta*nq*nq + alpha*qd
		pair = append(pair, declare.Atom{R: same, P: same, Q: same})
		d.Pairs = []declare.DeclaredSet{{Label: "any two buckets", Atoms: pair}}
		weight := func(ones, bitsN int) float64 {
			return math.Pow(q, float64(ones)) * math.Pow(nq, float64(bitsN-ones))
		}
		var triple []declare.Atom
		label, inputs := "any three buckets", []float64(nil)
		if r.d == 2 {
			label, inputs = "x3 = x'", []float64{0, 1, 1}
			for a := range 2 {
				for bb := range 2 {
					w := weight(a+bb, 2)
					triple = append(triple, declare.Atom{R: w * f(bb), P: w * f(a), Q: w * f(bb)})
				}
			}
		} else {
			for a := range 2 {
				for bb := range 2 {
					for cc := range 2 {
						w := weight(a+bb+cc, 3)
						triple = append(triple, declare.Atom{R: w * f(cc), P: w * f(a), Q: w * f(bb)})
					}
				}
			}
		}
		d.Triples = []declare.DeclaredSet{{Label: label, Atoms: triple, Inputs: inputs}}
	default:
		return nil, ldp.UnsupportedForm(Name, form)
	}
	return d, nil
}

// Randomize implements sdk.Randomizer. Each report is the d-bit vector,
// ReportBytes long. The bits at rate q are drawn 64 at a time with
// ldp.Bits64, each exactly Bernoulli(q).
func (r *Randomizer) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	idx, err := r.dom.Batch(Name, in)
	if err != nil {
		return nil, err
	}
	buf, err := r.randomize(ctx, eps0, idx)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(idx))
	for i := range out {
		out[i] = buf[i*r.width : (i+1)*r.width : (i+1)*r.width]
	}
	return out, nil
}

// RandomizePacked implements sdk.PackedRandomizer: Randomize with the
// reports concatenated.
func (r *Randomizer) RandomizePacked(ctx context.Context, eps0 float64, in sdk.PackedInputs) ([]byte, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	idx, err := r.dom.PackedBatch(Name, in)
	if err != nil {
		return nil, err
	}
	return r.randomize(ctx, eps0, idx)
}

// randomize returns the reports of the buckets idx, concatenated.
func (r *Randomizer) randomize(ctx context.Context, eps0 float64, idx []int) ([]byte, error) {
	b := r.probs(eps0)
	src := ldp.DefaultSource(r.src)
	buf := make([]byte, r.width*len(idx))
	for i, x := range idx {
		if err := ldp.Canceled(ctx, i); err != nil {
			return nil, err
		}
		rep := buf[i*r.width : (i+1)*r.width : (i+1)*r.width]
		// Every bit at rate q, 64 at a time, then the sender's own bit.
		for w := 0; w < r.d; w += 64 {
			v := ldp.Bits64(src, b.q)
			for k := w / 8; k < min(w/8+8, r.width); k++ {
				rep[k] = byte(v)
				v >>= 8
			}
		}
		if tail := r.d & 7; tail != 0 {
			rep[r.width-1] &= 1<<tail - 1
		}
		if ldp.Choose(src, b.p, b.notP) {
			rep[x>>3] |= 1 << (x & 7)
		} else {
			rep[x>>3] &^= 1 << (x & 7)
		}
	}
	return buf, nil
}

// check validates a report's length and padding bits.
func (r *Randomizer) check(report []byte) error {
	if len(report) != r.width {
		return fmt.Errorf("%w: %d bytes, want %d", sdk.ErrBadReport, len(report), r.width)
	}
	if tail := r.d & 7; tail != 0 && report[r.width-1]>>tail != 0 {
		return fmt.Errorf("%w: padding bits after bit %d are set", sdk.ErrBadReport, r.d)
	}
	return nil
}

// Decode returns the bits of a report. Errors wrap sdk.ErrBadReport.
func (r *Randomizer) Decode(report []byte) ([]bool, error) {
	if err := r.check(report); err != nil {
		return nil, err
	}
	out := make([]bool, r.d)
	for j := range out {
		out[j] = report[j>>3]>>(j&7)&1 == 1
	}
	return out, nil
}

// Encode returns the report of a bit vector of length d; the inverse of
// Decode. It panics if len(v) != d.
func (r *Randomizer) Encode(v []bool) []byte {
	if len(v) != r.d {
		panic(fmt.Sprintf("rappor: Encode of %d bits, want %d", len(v), r.d))
	}
	rep := make([]byte, r.width)
	for j, one := range v {
		if one {
			rep[j>>3] |= 1 << (j & 7)
		}
	}
	return rep
}

// Atoms implements sdk.AtomMapper: the atom of each report in set 0 (the
// pair) or set 1 (the triple) of the atoms form at inputs (bucket
// indices). Let a = bit x, b = bit x' and t = bit x3 of the report. Read
// off Declaration, whose atoms are appended in this order:
//
//   - Pair (x, x'), any distinct buckets. Atom 0, (r, p, q) =
//     (beta c, alpha c, beta c) with c = q(1-q), sums the outputs with
//     (a, b) = (1, 0): under A the other d-2 bits sum out and bits x, x'
//     leave q(1-q); bit x set gives alpha under x, and the clear bit x'
//     beta under x' and as blanket. Atom 1 is (0, 1), the same with x
//     and x' swapped. With d > 2,
//     atom 2, weight W = q²(1 - q^(d-2)), is (1, 1) without the all-ones
//     output (weight q^d, whose blanket is alpha, not beta), and atom 3,
//     beta (1-q)² + alpha q^d in each coordinate, is (0, 0) with the
//     all-ones output. With d = 2 the all-ones output is the only (1, 1)
//     output, and the pair has three atoms: atom 2 is (0, 0) with it.
//   - Triple (x, x', x3), d >= 3, any distinct buckets: Declaration's
//     loops append one atom per (a, b, t) with a outermost, so the atom is
//     4a + 2b + t ((0,0,0) and (1,1,1) share a ratio pair but are declared
//     apart).
//   - Triple with d = 2: x3 must be x' (Inputs 0, 1, 1); the atom is 2a + b.
//
// Inputs the set does not hold for (a count other than 2 or 3, a bucket
// out of range, equal buckets but x3 = x' when d = 2) and a set other than
// 0 and 1 fail with sdk.ErrBadInput, a malformed report with
// sdk.ErrBadReport. TestAtomsAgainstMatrix sums the matrix over each
// atom's outputs.
func (r *Randomizer) Atoms(ctx context.Context, eps0 float64, set int, inputs []float64, reports [][]byte) ([]int, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	var xs []int
	var err error
	switch {
	case set == 0:
		xs, err = ldp.SetBuckets(inputs, 2, r.d)
	case set == 1 && r.d == 2:
		xs, err = ldp.TripleX3IsXPrime(inputs, r.d)
	case set == 1:
		xs, err = ldp.SetBuckets(inputs, 3, r.d)
	default:
		err = fmt.Errorf("%w: rappor declares 2 sets (a pair and a triple), not set %d", sdk.ErrBadInput, set)
	}
	if err != nil {
		return nil, err
	}
	out := make([]int, len(reports))
	for i, rep := range reports {
		if err := r.check(rep); err != nil {
			return nil, fmt.Errorf("report %d: %w", i, err)
		}
		bit := func(j int) int { return int(rep[j>>3] >> (j & 7) & 1) }
		a, b := bit(xs[0]), bit(xs[1])
		switch {
		case set == 1 && r.d == 2:
			out[i] = 2*a + b
		case set == 1:
			out[i] = 4*a + 2*b + bit(xs[2])
		case a == 1 && b == 0:
			out[i] = 0
		case a == 0 && b == 1:
			out[i] = 1
		case r.d == 2: // (0, 0) or all ones, merged
			out[i] = 2
		case a == 1 && b == 1 && !r.allOnes(rep):
			out[i] = 2
		default: // (0, 0) or all ones, merged
			out[i] = 3
		}
	}
	return out, nil
}

// allOnes reports whether a valid report has all d bits set.
func (r *Randomizer) allOnes(report []byte) bool {
	n := 0
	for _, v := range report {
		n += bits.OnesCount8(v)
	}
	return n == r.d
}

// Accumulate implements sdk.Randomizer. The statistic's Counts are the
// number of reports with each bit set (d counts).
func (r *Randomizer) Accumulate(ctx context.Context, eps0 float64, reports [][]byte) (*sdk.Statistic, error) {
	return ldp.Accumulate(ctx, &r.desc, eps0, r.d, reports, func(counts []int64, rep []byte) bool {
		if r.check(rep) != nil {
			return false
		}
		for by, v := range rep {
			for v != 0 {
				counts[by<<3+bits.TrailingZeros8(v)]++
				v &= v - 1
			}
		}
		return true
	})
}

// Estimate implements sdk.Randomizer: one item per bucket, the estimated
// number of senders in it, (C(v) - n q)/(p - q) with C(v) the reports with
// bit v set (Wang et al. 2017), variance n q(1-q)/(p-q)² + n_v (1-p-q)/(p-q),
// and Norm-Sub post-processing (see ldp.Pure.Items).
func (r *Randomizer) Estimate(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	if err := ldp.CheckStatistic(stat, &r.desc, r.d, false); err != nil {
		return nil, err
	}
	return ldp.NewEstimate(Name, stat, r.conf, r.Pure(stat.Eps0).Items(r.desc.Categories, stat.Counts, stat.N, r.conf)), nil
}
