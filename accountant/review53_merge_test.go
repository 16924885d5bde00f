package accountant

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// Review of af7c934 and caa547b (helper-53): Merge's exact-groups way and
// bucket sorts against the plain merge on adversarial ratios the existing
// generator does not draw (-0, -Inf, subnormal and huge ratios where
// ratioTol's product underflows, chains of ratios each within ratioTol of
// the next but not of the first, R subnormal or infinite, P = -0), and the
// parallel pair loop of decomposeMatrix against a serial reference on a
// dense matrix of more than pairBlock ordered pairs.

// review53Atoms draws a set from an adversarial pool of ratio values.
func review53Atoms(rng *rand.Rand) AtomSet {
	const u = 0x1p-52
	pool := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(),
		5e-324, 1e-310, 2.2250738585072014e-308, 1e-300, 1e300, 1.7e308, -1e-310, -1, -0.5}
	nv := 1 + rng.IntN(8)
	if rng.IntN(3) == 0 {
		nv = 1 + rng.IntN(24)
	}
	vals := make([]float64, nv)
	for i := range vals {
		switch c := rng.IntN(10); {
		case c < 3:
			vals[i] = pool[rng.IntN(len(pool))]
		case c < 6 && i > 0:
			// A chain: 1 to 5 ulps above (or below) the previous value.
			f := 1 + float64(1+rng.IntN(5))*u
			if rng.IntN(2) == 0 {
				f = 1 - float64(1+rng.IntN(5))*u/2
			}
			vals[i] = vals[i-1] * f
		case c < 7 && i > 0:
			// Subnormal neighbours: a few units of 2^-1074 apart.
			vals[i] = vals[i-1] + float64(rng.IntN(5)-2)*5e-324
		default:
			vals[i] = math.Exp(8*rng.NormFloat64()) * float64(1-2*rng.IntN(2))
		}
	}
	n := rng.IntN(60)
	s := make(AtomSet, n)
	for i := range s {
		var r float64
		switch rng.IntN(12) {
		case 0:
			r = 5e-324 * float64(1+rng.IntN(4))
		case 1:
			r = math.Inf(1)
		case 2:
			r = 0
		case 3:
			r = 1
		default:
			r = rng.Float64()
		}
		s[i] = Atom{R: r, P: r * vals[rng.IntN(nv)], Q: r * vals[rng.IntN(nv)]}
		if rng.IntN(8) == 0 {
			s[i].P = math.Copysign(0, -1)
		}
	}
	return s
}

// TestReview53MergeAdversarial: Merge and one reused merger give the
// plain merge's result bit for bit on review53Atoms' sets.
func TestReview53MergeAdversarial(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 1))
	var mg merger
	fast := 0
	for i := range 40000 {
		s := review53Atoms(rng)
		want := s.mergePlain()
		if got := s.Merge(); !sameBits(got, want) {
			t.Fatalf("set %d: Merge\n got  %v\n want %v\n of %v", i, got, want, s)
		}
		bad := mg.addSet(s)
		if _, ok := mg.mergeDistinct(nil); ok {
			fast++
		}
		if got := mg.merge(bad); !sameBits(got, want) {
			t.Fatalf("set %d: reused merger\n got  %v\n want %v\n of %v", i, got, want, s)
		}
	}
	if fast < 3000 {
		t.Errorf("exact-groups way taken %d times, want >= 3000", fast)
	}
}

// TestReview53MergeChains: hand-made cases at the edges of the
// exact-groups way's argument.
func TestReview53MergeChains(t *testing.T) {
	const u = 0x1p-52
	negZero := math.Copysign(0, -1)
	cases := []AtomSet{
		// p = -0 and +0 (one group), q = -0 and +0 (one sub-group).
		{{R: 1, P: negZero, Q: 1}, {R: 2, P: 0, Q: 2}, {R: 3, P: 0, Q: negZero}, {R: 1, P: negZero, Q: 0}},
		// A chain p, p(1+3u), p(1+6u): the first two within ratioTol,
		// the third within ratioTol of the second only.
		{{R: 1, P: 1, Q: 1}, {R: 1, P: 1 + 3*u, Q: 1}, {R: 1, P: 1 + 6*u, Q: 1}, {R: 0.5, P: 0.5, Q: 0.5}},
		// A finite p is within ratioTol of +Inf and of -Inf.
		{{R: 1, P: 2, Q: 1}, {R: 1e-320, P: 1, Q: 1e-320}, {R: 1, P: 3, Q: 1}},
		{{R: 1e-320, P: -1, Q: 1}, {R: 1, P: 2, Q: 1}, {R: 1, P: 2, Q: 1}},
		// Subnormal ratios, where ratioTol's product underflows.
		{{R: 1, P: 5e-324, Q: 1}, {R: 1, P: 1e-323, Q: 1}, {R: 1, P: 5e-324, Q: 1}},
		{{R: 1, P: 1e-310, Q: 1}, {R: 1, P: 1e-310 + 5e-324, Q: 1}, {R: 2, P: 2e-310, Q: 2}},
		// Negative ratios straddling 0.
		{{R: 1, P: -1e-300, Q: 1}, {R: 1, P: 1e-300, Q: 1}, {R: 1, P: negZero, Q: 1}},
		// Sums whose ratio reorders the merged atoms (the final sort).
		{{R: 1, P: 1, Q: 3}, {R: 1e-16, P: 1e-16 * 1.5, Q: 1e-16}, {R: 1, P: 1.5, Q: 1}, {R: 1, P: 1, Q: 3}},
		// R = +Inf (ratio 0 or NaN), R = 0 kept last.
		{{R: math.Inf(1), P: 1, Q: 1}, {R: 1, P: 0, Q: 0}, {R: 0, P: 1, Q: 0}, {R: math.Inf(1), P: math.Inf(1), Q: 1}},
	}
	for i, s := range cases {
		want := s.mergePlain()
		if got := s.Merge(); !sameBits(got, want) {
			t.Errorf("case %d: Merge\n got  %v\n want %v", i, got, want)
		}
	}
}

// review53DenseRows returns k rows of outs entries, each column taking
// one of two values of its own (so that a row's default covers one column
// and the exhaustive pair loop runs; pairs repeat and differ), each row
// normalised.
func review53DenseRows(rng *rand.Rand, k, outs int) [][]float64 {
	rows := make([][]float64, k)
	for x := range rows {
		rows[x] = make([]float64, outs)
		var sum float64
		for y := range rows[x] {
			rows[x][y] = float64(y+1) * []float64{1, 2.5}[rng.IntN(2)]
			sum += rows[x][y]
		}
		for y := range rows[x] {
			rows[x][y] /= sum
		}
	}
	return rows
}

// review53CheckDecompose checks that, on a dense matrix of k inputs,
// decomposeMatrix's Upper is, bit for bit and in order, the serial
// reference (every ordered pair's plain pair atoms, first of each key),
// with GOMAXPROCS 1 and 4.
func review53CheckDecompose(t *testing.T, rng *rand.Rand, k, outs int) {
	rows := review53DenseRows(rng, k, outs)
	mat, err := NewMatrix(rows)
	if err != nil {
		t.Fatal(err)
	}
	m := rowsOf(mat)
	explicit, stats, _ := m.columns()
	var work float64
	for _, rows := range explicit {
		work += float64(len(rows)) * float64(len(rows))
	}
	if work < float64(k)*float64(k) {
		t.Fatalf("k %d: the matrix takes the overlap path (work %g < k^2), not the parallel pair loop", k, work)
	}
	classes := blanketClasses(stats)
	var want []AtomSet
	seen := map[string]bool{}
	for x := range k {
		for y := range k {
			if x == y {
				continue
			}
			s := pairAtomsPlain(m, stats, classes, x, y)
			if key := s.key(); !seen[key] {
				seen[key] = true
				want = append(want, s)
			}
		}
	}
	if len(want) < 10 {
		t.Fatalf("k %d: %d distinct pair sets, want more", k, len(want))
	}
	for _, procs := range []int{1, 4} {
		old := runtime.GOMAXPROCS(procs)
		d, err := decomposeMatrix(mat, 0)
		runtime.GOMAXPROCS(old)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Upper) != len(want) {
			t.Fatalf("k %d procs %d: %d upper sets, want %d", k, procs, len(d.Upper), len(want))
		}
		for i := range want {
			if !sameBits(d.Upper[i], want[i]) {
				t.Fatalf("k %d procs %d: upper set %d\n got  %v\n want %v", k, procs, i, d.Upper[i], want[i])
			}
		}
	}
}

// TestReview53DecomposeMatrixParallel: review53CheckDecompose at k = 12
// and 20 (several workers, one block; small enough for -race) and at
// k = 66 and 93 (4,290 and 8,556 ordered pairs, more than one pairBlock).
func TestReview53DecomposeMatrixParallel(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 2))
	review53CheckDecompose(t, rng, 12, 6)
	review53CheckDecompose(t, rng, 20, 5)
	if testing.Short() {
		return
	}
	review53CheckDecompose(t, rng, 66, 5)
	review53CheckDecompose(t, rng, 93, 5)
}
