package accountant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// decompositionBits is every field of d, floats by their bits.
func decompositionBits(d *Decomposition) string {
	sets := func(ss []AtomSet) string {
		out := ""
		for _, s := range ss {
			out += "["
			for _, a := range s {
				out += fmt.Sprintf("(%x %x %x)", math.Float64bits(a.R), math.Float64bits(a.P), math.Float64bits(a.Q))
			}
			out += "]"
		}
		return out
	}
	return fmt.Sprintf("eps %x krr %d sampled %v exact %v\nU %s\nUS %s\nL %s\nLS %s", math.Float64bits(d.LocalEps), d.KRR, d.Sampled, d.ExactPairs,
		sets(d.Upper), sets(d.UpperSame), sets(d.Lower), sets(d.LowerSame))
}

// fewValueRows returns a random k x K stochastic matrix whose rows take a
// few distinct values (each row a permutation-like mix of two or three
// levels), the kind whose pairs repeat their merged sets.
func fewValueRows(rng *rand.Rand, k, K int, eps0 float64) [][]float64 {
	e := math.Exp(eps0)
	rows := make([][]float64, k)
	levels := []float64{1, e, math.Sqrt(e)}
	nl := 2 + rng.IntN(2)
	for x := range rows {
		rows[x] = make([]float64, K)
		sum := 0.0
		for y := range rows[x] {
			// Structured: a level from a hash of x and y, so that many
			// pairs see the same counts.
			l := levels[(bitsParity((x+1)&y)+rng.IntN(8)/7)%nl]
			rows[x][y] = l
			sum += l
		}
		for y := range rows[x] {
			rows[x][y] /= sum
		}
	}
	return rows
}

func bitsParity(v int) int {
	p := 0
	for ; v > 0; v &= v - 1 {
		p ^= 1
	}
	return p
}

// TestPairSignaturesSameDecomposition: decomposeMatrix gives the same
// decomposition, bit for bit, with the pairs that signatures skip and with
// every pair merged (pairsig.go's argument, checked), on Hadamard
// matrices, k-RR matrices, random matrices of few values (some columns
// dead, several blanket classes), and sparse matrices whose exceptions
// repeat their default; and the signatures do skip pairs.
func TestPairSignaturesSameDecomposition(t *testing.T) {
	defer func() { pairSignatures = true }()
	rng := rand.New(rand.NewPCG(65, 1))
	var cases []struct {
		name string
		m    *Matrix
	}
	add := func(name string, rows [][]float64) {
		mx, err := NewMatrix(rows)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cases = append(cases, struct {
			name string
			m    *Matrix
		}{name, mx})
	}
	for _, k := range []int{2, 3, 8, 16, 33} {
		for _, e0 := range []float64{0.4, 2, 7} {
			add(fmt.Sprintf("hadamard k=%d eps0=%g", k, e0), hadamardRows(k, e0))
			add(fmt.Sprintf("krr k=%d eps0=%g", k, e0), audKRRRows(k, e0))
		}
	}
	for i := range 40 {
		k, K := 2+rng.IntN(14), 2+rng.IntN(40)
		rows := fewValueRows(rng, k, K, 0.3+rng.Float64()*4)
		if i%3 == 0 {
			// A dead column: 0 in every row.
			y := rng.IntN(K)
			for x := range rows {
				s := 1 - rows[x][y]
				rows[x][y] = 0
				for j := range rows[x] {
					rows[x][j] /= s
				}
			}
		}
		add(fmt.Sprintf("few-valued %d", i), rows)
	}
	for i := range 10 {
		k, K := 3+rng.IntN(6), 4+rng.IntN(10)
		var srows []SparseRow
		for range k {
			ent := map[int]float64{}
			def := 1.0 / float64(K)
			for y := range K {
				if rng.IntN(3) == 0 {
					// Half of them equal to the default: an explicit
					// entry that repeats it.
					if rng.IntN(2) == 0 {
						ent[y] = def
					} else {
						ent[y] = def * 2
					}
				}
			}
			// Rebalance through one more explicit entry.
			sum := def * float64(K-len(ent))
			for _, v := range ent {
				sum += v
			}
			for y, v := range ent {
				ent[y] = v / sum
			}
			srows = append(srows, SparseRow{Default: def / sum, Entries: ent})
		}
		mx, err := NewSparseMatrix(K, srows)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct {
			name string
			m    *Matrix
		}{fmt.Sprintf("sparse %d", i), mx})
	}
	skippedAny := 0
	for _, c := range cases {
		pairSignatures = true
		with, errWith := decomposeMatrix(c.m, 0)
		pairSignatures = false
		without, errWithout := decomposeMatrix(c.m, 0)
		if (errWith == nil) != (errWithout == nil) {
			t.Fatalf("%s: error %v with signatures, %v without", c.name, errWith, errWithout)
		}
		if errWith != nil {
			continue
		}
		if a, b := decompositionBits(with), decompositionBits(without); a != b {
			t.Fatalf("%s: decompositions differ\nwith signatures:\n%s\nwithout:\n%s", c.name, a, b)
		}
		if skippedPairs(c.m) > 0 {
			skippedAny++
		}
	}
	if skippedAny < len(cases)/3 {
		t.Errorf("signatures skipped pairs in %d of %d matrices only", skippedAny, len(cases))
	}
}

// skippedPairs counts the ordered pairs of m whose signature an earlier
// pair had.
func skippedPairs(m *Matrix) int {
	r, p := testPairer(m)
	s := newPairSigner(p)
	if s == nil {
		return 0
	}
	seen, skipped := map[string]bool{}, 0
	for x := range r.rows {
		for y := range r.rows {
			if x == y {
				continue
			}
			if key, ok := s.signature(x, y); ok {
				if seen[string(key)] {
					skipped++
				}
				seen[string(key)] = true
			}
		}
	}
	return skipped
}

// TestPairSignatureHadamardOne: every ordered pair of a Hadamard matrix
// has one signature (its rows are balanced and pairwise orthogonal), so a
// decomposition merges one pair.
func TestPairSignatureHadamardOne(t *testing.T) {
	mx, err := NewMatrix(hadamardRows(64, 2))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := skippedPairs(mx), 64*63-1; got != want {
		t.Errorf("skipped %d pairs, want %d", got, want)
	}
}

// referenceSignature derives a pair's signature from the atoms pairAtoms
// adds, column by column (rows read through at), independently of the
// bitsets: the column types with their counts and then the class atoms,
// stably sorted by ratio key, or false where mergeDistinct would share a
// cell between two column types or decline.
func referenceSignature(p *pairer, x, xp int) (string, bool) {
	rx, rxp := &p.m.rows[x], &p.m.rows[xp]
	type typ struct {
		at    Atom
		n     int
		class bool
	}
	var types []typ
	union := make([]int, len(p.classR))
	seen := map[[3]uint64]int{}
	var cols []int
	eachUnion(rx.idx, rxp.idx, func(y int) { cols = append(cols, y) })
	for _, y := range cols {
		c := p.colClass[y]
		if c < 0 {
			continue
		}
		union[c]++
		at := Atom{R: p.stats[y].min, P: rx.at(y), Q: rxp.at(y)}
		k := [3]uint64{math.Float64bits(at.R), math.Float64bits(at.P), math.Float64bits(at.Q)}
		if i, ok := seen[k]; ok {
			types[i].n++
			continue
		}
		seen[k] = len(types)
		types = append(types, typ{at: at, n: 1})
	}
	for c, r := range p.classR {
		if left := p.classN[c] - union[c]; left > 0 {
			n := float64(left)
			types = append(types, typ{at: Atom{R: n * r, P: n * rx.def, Q: n * rxp.def}, n: 1, class: true})
		}
	}
	key := func(t typ) (float64, float64) { return t.at.P / t.at.R, t.at.Q / t.at.R }
	for _, t := range types {
		if p, q := key(t); p != p || q != q {
			return "", false
		}
	}
	slices.SortStableFunc(types, func(a, b typ) int {
		ap, aq := key(a)
		bp, bq := key(b)
		if c := compareFloat(ap, bp); c != 0 {
			return c
		}
		return compareFloat(aq, bq)
	})
	cells, columnTypes := 0, 0
	var prevP, prevQ float64
	out := ""
	for i, t := range types {
		tp, tq := key(t)
		if i == 0 || tp != prevP || tq != prevQ {
			if i > 0 && (tp != prevP && sameRatio(tp, prevP) || tp == prevP && sameRatio(tq, prevQ)) {
				return "", false
			}
			cells++
			columnTypes = 0
		}
		if !t.class {
			if columnTypes++; columnTypes > 1 {
				return "", false
			}
		}
		prevP, prevQ = tp, tq
		out += fmt.Sprintf("%x %x %x %d;", math.Float64bits(t.at.R), math.Float64bits(t.at.P), math.Float64bits(t.at.Q), t.n)
	}
	if cells > maxBuckets {
		return "", false
	}
	return out, true
}

// TestPairSignatureMatchesReference: every pair's signature (its validity
// and its content) is the one derived column by column from the atoms the
// merge would get, on the matrices of TestPairSignaturesSameDecomposition
// and on matrices made to share cells (rows that are multiples of each
// other's levels) and to have many values.
func TestPairSignatureMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(65, 2))
	var mats []*Matrix
	for i := range 60 {
		k, K := 2+rng.IntN(10), 2+rng.IntN(30)
		var rows [][]float64
		switch i % 3 {
		case 0:
			rows = fewValueRows(rng, k, K, 0.3+rng.Float64()*4)
		case 1:
			// Levels shared across classes: column types whose ratio
			// keys coincide.
			rows = make([][]float64, k)
			for x := range rows {
				rows[x] = make([]float64, K)
				for y := range rows[x] {
					rows[x][y] = []float64{1, 2, 4}[rng.IntN(3)] * []float64{1, 2}[y%2]
				}
			}
		default:
			rows = make([][]float64, k)
			for x := range rows {
				rows[x] = make([]float64, K)
				for y := range rows[x] {
					rows[x][y] = 1 + float64(rng.IntN(20))
				}
			}
		}
		for x := range rows {
			normalizeRow(rows[x])
		}
		mx, err := NewMatrix(rows)
		if err != nil {
			t.Fatal(err)
		}
		mats = append(mats, mx)
	}
	for _, k := range []int{4, 16} {
		mx, _ := NewMatrix(hadamardRows(k, 1.5))
		mats = append(mats, mx)
	}
	valid, invalid := 0, 0
	for mi, mx := range mats {
		r, p := testPairer(mx)
		s := newPairSigner(p)
		if s == nil {
			continue
		}
		for x := range r.rows {
			for y := range r.rows {
				if x == y {
					continue
				}
				want, wantOK := referenceSignature(p, x, y)
				key, ok := s.signature(x, y)
				if ok != wantOK {
					t.Fatalf("matrix %d pair (%d, %d): signature valid %v, reference %v (%s)", mi, x, y, ok, wantOK, want)
				}
				if !ok {
					invalid++
					continue
				}
				valid++
				got := ""
				for i := 0; i < len(key); i += 32 {
					w := func(j int) uint64 {
						var v uint64
						for b := 7; b >= 0; b-- {
							v = v<<8 | uint64(key[i+8*j+b])
						}
						return v
					}
					got += fmt.Sprintf("%x %x %x %d;", w(0), w(1), w(2), w(3))
				}
				if got != want {
					t.Fatalf("matrix %d pair (%d, %d): signature\n%s\nreference\n%s", mi, x, y, got, want)
				}
			}
		}
	}
	if valid < 100 || invalid < 100 {
		t.Errorf("%d valid and %d invalid signatures: the matrices do not exercise both", valid, invalid)
	}
}

// TestTripleAtomsAsPlain: tripleAtoms' three-way walk and shared merger
// give, bit for bit, the set of its first version (the union of the rows'
// indices, entries read by binary search, AtomSet.Merge), for every
// triple of random dense and sparse matrices with dead columns.
func TestTripleAtomsAsPlain(t *testing.T) {
	plain := func(p *pairer, x, xp, x3 int) AtomSet {
		rx, rxp, r3 := &p.m.rows[x], &p.m.rows[xp], &p.m.rows[x3]
		var out AtomSet
		live := p.live
		var u []int
		eachUnion(rx.idx, rxp.idx, func(y int) { u = append(u, y) })
		eachUnion(u, r3.idx, func(y int) {
			if p.stats[y].max == 0 {
				return
			}
			live--
			out = append(out, Atom{R: r3.at(y), P: rx.at(y), Q: rxp.at(y)})
		})
		if live > 0 {
			n := float64(live)
			out = append(out, Atom{R: n * r3.def, P: n * rx.def, Q: n * rxp.def})
		}
		return out.Merge()
	}
	rng := rand.New(rand.NewPCG(66, 6))
	compared := 0
	for mi := range 80 {
		k, K := 2+rng.IntN(7), 2+rng.IntN(20)
		var rows [][]float64
		if mi%2 == 0 {
			rows = fewValueRows(rng, k, K, 0.2+3*rng.Float64())
		} else {
			rows = make([][]float64, k)
			for x := range rows {
				rows[x] = make([]float64, K)
				for y := range rows[x] {
					rows[x][y] = float64(1 + rng.IntN(4))
				}
			}
		}
		dead := rng.IntN(K)
		for x := range rows {
			if mi%3 == 0 {
				rows[x][dead] = 0
			}
			normalizeRow(rows[x])
		}
		mx, err := NewMatrix(rows)
		if err != nil {
			t.Fatal(err)
		}
		_, p := testPairer(mx)
		for x := range k {
			for xp := range k {
				for x3 := range k {
					got, want := p.tripleAtoms(x, xp, x3), plain(p, x, xp, x3)
					if a, b := decompositionBits(&Decomposition{Lower: []AtomSet{got}}), decompositionBits(&Decomposition{Lower: []AtomSet{want}}); a != b {
						t.Fatalf("matrix %d triple (%d, %d, %d):\n%s\nfirst version:\n%s", mi, x, xp, x3, a, b)
					}
					compared++
				}
			}
		}
	}
	if compared < 1000 {
		t.Errorf("%d triples compared", compared)
	}
}

// testPairer returns the decomposition's view of m and its pairer, as
// decomposeMatrix makes them.
func testPairer(m *Matrix) (*matrixRows, *pairer) {
	r := rowsOf(m)
	_, stats, _ := r.columns()
	return r, newPairer(r, stats, blanketClasses(stats))
}

// normalizeRow scales row to sum to 1.
func normalizeRow(row []float64) {
	s := 0.0
	for _, v := range row {
		s += v
	}
	for y := range row {
		row[y] /= s
	}
}
