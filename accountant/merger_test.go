package accountant

import (
	"cmp"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// mergePlain is Merge as first written, each ratio recomputed at each
// comparison and sorts by slices.SortStableFunc: the reference that
// TestMergerMatchesPlain holds merger to.
func (s AtomSet) mergePlain() AtomSet {
	var pos, bad AtomSet
	for _, at := range s {
		switch {
		case at.R > 0:
			pos = append(pos, at)
		case at.P != 0 || at.Q != 0:
			bad = append(bad, at)
		}
	}
	slices.SortStableFunc(pos, func(x, y Atom) int { return cmp.Compare(x.P/x.R, y.P/y.R) })
	merged := make(AtomSet, 0, len(pos)+len(bad))
	for lo := 0; lo < len(pos); {
		hi := lo + 1
		for hi < len(pos) && sameRatio(pos[hi].P/pos[hi].R, pos[lo].P/pos[lo].R) {
			hi++
		}
		g := pos[lo:hi]
		slices.SortStableFunc(g, func(x, y Atom) int { return cmp.Compare(x.Q/x.R, y.Q/y.R) })
		for i := 0; i < len(g); {
			j, sum := i+1, g[i]
			for j < len(g) && sameRatio(g[j].Q/g[j].R, g[i].Q/g[i].R) {
				sum.R += g[j].R
				sum.P += g[j].P
				sum.Q += g[j].Q
				j++
			}
			merged = append(merged, sum)
			i = j
		}
		lo = hi
	}
	slices.SortStableFunc(merged, func(x, y Atom) int {
		if c := cmp.Compare(x.P/x.R, y.P/y.R); c != 0 {
			return c
		}
		return cmp.Compare(x.Q/x.R, y.Q/y.R)
	})
	return append(merged, bad...)
}

// pairAtomsPlain is pairer.pairAtoms as first written (a map of blanket
// classes copied per pair, entries read by binary search, mergePlain).
func pairAtomsPlain(m *matrixRows, stats []colStat, classes map[float64]int, x, xp int) AtomSet {
	rx, rxp := &m.rows[x], &m.rows[xp]
	var out AtomSet
	left := maps.Clone(classes)
	eachUnion(rx.idx, rxp.idx, func(y int) {
		s := stats[y]
		if s.max == 0 {
			return
		}
		left[s.min]--
		out = append(out, Atom{R: s.min, P: rx.at(y), Q: rxp.at(y)})
	})
	for _, r := range slices.Sorted(maps.Keys(left)) {
		if c := left[r]; c > 0 {
			n := float64(c)
			out = append(out, Atom{R: n * r, P: n * rx.def, Q: n * rxp.def})
		}
	}
	return out.mergePlain()
}

// sameBits reports whether two sets are equal field by field, bit for bit.
func sameBits(a, b AtomSet) bool {
	return slices.EqualFunc(a, b, func(x, y Atom) bool {
		return math.Float64bits(x.R) == math.Float64bits(y.R) &&
			math.Float64bits(x.P) == math.Float64bits(y.P) &&
			math.Float64bits(x.Q) == math.Float64bits(y.Q)
	})
}

// randomAtoms draws a set whose ratios repeat (a few values, each atom
// with its own mass, so that the same ratio is computed with different
// roundings), sit within or just beyond ratioTol of each other, and
// sometimes are NaN, infinite, zero or negative, with atoms of R = 0.
func randomAtoms(rng *rand.Rand) AtomSet {
	const u = 0x1p-52
	// Distinct ratio values: few (as a matrix's pairs have), or many,
	// their pairs then above maxBuckets.
	nv := 1 + rng.IntN(3)
	if rng.IntN(2) == 0 {
		nv = 1 + rng.IntN(20)
	}
	vals := make([]float64, nv)
	for i := range vals {
		switch rng.IntN(24) {
		case 0:
			vals[i] = 0
		case 1:
			vals[i] = math.Inf(1)
		case 2:
			vals[i] = math.NaN()
		case 3:
			vals[i] = -rng.Float64()
		case 4:
			if i > 0 {
				// Near another value: 1 to 6 ulps away.
				vals[i] = vals[rng.IntN(i)] * (1 + float64(1+rng.IntN(6))*u)
				continue
			}
			fallthrough
		default:
			vals[i] = math.Exp(4 * rng.NormFloat64())
		}
	}
	n := rng.IntN(200)
	s := make(AtomSet, n)
	// Half the sets take one R for every atom, as a matrix's columns of
	// one blanket class do: their ratios repeat exactly.
	oneR := rng.IntN(2) == 0
	r0 := rng.Float64()
	for i := range s {
		r := rng.Float64()
		if oneR {
			r = r0
		}
		if rng.IntN(40) == 0 {
			r = 0
		}
		s[i] = Atom{R: r, P: r * vals[rng.IntN(nv)], Q: r * vals[rng.IntN(nv)]}
		if r == 0 && rng.IntN(2) == 0 {
			s[i].P = rng.Float64()
		}
	}
	return s
}

// TestMergerMatchesPlain: Merge (merger, merge.go) gives the plain merge's
// result bit for bit, on random sets and on the same sets merged one after
// the other through one merger (its buffers reused).
func TestMergerMatchesPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var mg merger
	fast, general := 0, 0
	for i := range 10000 {
		s := randomAtoms(rng)
		want := s.mergePlain()
		if got := s.Merge(); !sameBits(got, want) {
			t.Fatalf("set %d: Merge\n got  %v\n want %v\n of %v", i, got, want, s)
		}
		bad := mg.addSet(s)
		if _, ok := mg.mergeDistinct(nil); ok {
			fast++
		} else {
			general++
		}
		if got := mg.merge(bad); !sameBits(got, want) {
			t.Fatalf("set %d: reused merger\n got  %v\n want %v", i, got, want)
		}
	}
	// Both of merge's ways were taken often (else the test shows little).
	if fast < 1000 || general < 1000 {
		t.Errorf("exact-groups way %d times, general way %d: want each >= 1000", fast, general)
	}
}

// TestPairAtomsMatchesPlain: decomposeMatrix's pairer gives the plain
// pair atoms bit for bit on random sparse matrices with shared blanket
// classes, every ordered pair (and x = x').
func TestPairAtomsMatchesPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for trial := range 200 {
		k, outs := 2+rng.IntN(8), 2+rng.IntN(12)
		levels := []float64{0.5, 1, 2, 3}[:1+rng.IntN(4)]
		rows := make([][]float64, k)
		for x := range rows {
			rows[x] = make([]float64, outs)
			var sum float64
			for y := range rows[x] {
				if y%5 != 4 || x == 0 { // some columns share a value
					rows[x][y] = levels[rng.IntN(len(levels))]
				} else {
					rows[x][y] = rows[0][y]
				}
				sum += rows[x][y]
			}
			for y := range rows[x] {
				rows[x][y] /= sum
			}
		}
		mat, err := NewMatrix(rows)
		if err != nil {
			t.Fatal(err)
		}
		m := rowsOf(mat)
		_, stats, _ := m.columns()
		classes := blanketClasses(stats)
		p := newPairer(m, stats, classes)
		for x := range k {
			for xp := range k {
				want := pairAtomsPlain(m, stats, classes, x, xp)
				if got := p.pairAtoms(x, xp); !sameBits(got, want) {
					t.Fatalf("trial %d, pair (%d, %d):\n got  %v\n want %v", trial, x, xp, got, want)
				}
			}
		}
	}
}
