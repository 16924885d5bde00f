package accountant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// review66Matrix returns a random valid matrix meant to stress pair
// signatures: rows of two or three levels (hi = e lo, mid) in random or
// structured positions, different numbers of hi per row (several blanket
// classes, ratios that coincide across classes), dead columns (explicit
// 0 and -0), sparse rows whose explicit entries repeat the default, rows
// of def -0 with every live column explicit, sameRatio-close values, rows
// of many distinct values, and k up to 70.
func review66Matrix(rng *rand.Rand) (*Matrix, string, error) {
	k := 2 + rng.IntN(14)
	K := 2 + rng.IntN(30)
	if rng.IntN(6) == 0 {
		k, K = 65+rng.IntN(6), 2+rng.IntN(5)
	}
	D := 0
	if rng.IntN(3) == 0 {
		D = 1 + rng.IntN(3)
	}
	e := math.Exp(0.2 + 3*rng.Float64())
	hs := []int{1 + rng.IntN(K), 1 + rng.IntN(K)}
	structured := rng.IntN(2) == 0
	sparse := rng.IntN(2) == 0
	desc := fmt.Sprintf("k %d K %d D %d e %g hs %v structured %v sparse %v", k, K, D, e, hs, structured, sparse)
	var srows []SparseRow
	negZero := math.Copysign(0, -1)
	for x := range k {
		h := hs[rng.IntN(2)]
		if h > K {
			h = K
		}
		vals := make([]float64, K)
		switch r := rng.IntN(20); {
		case r == 0 && K > 16:
			// Many distinct values.
			s := 0.0
			for y := range vals {
				vals[y] = 1 + rng.Float64()*(e-1)
				s += vals[y]
			}
			for y := range vals {
				vals[y] /= s
			}
		default:
			lo := 1 / (float64(h)*e + float64(K-h))
			hi := e * lo
			if r == 1 {
				// sameRatio-close to the other rows' hi.
				hi *= 1 + 0x1p-51
			}
			// Positions of hi.
			pos := make([]bool, K)
			if structured {
				c := 0
				for y := range K {
					if c < h && bitsParity((x+1)&(y+1)) == 1 {
						pos[y] = true
						c++
					}
				}
				for y := 0; c < h; y++ {
					if !pos[y] {
						pos[y] = true
						c++
					}
				}
			} else {
				for _, y := range rng.Perm(K)[:h] {
					pos[y] = true
				}
			}
			for y := range vals {
				vals[y] = lo
				if pos[y] {
					vals[y] = hi
				}
			}
		}
		// Columns: K live then D dead, shuffled by a fixed map.
		ent := map[int]float64{}
		def := vals[0]
		// Default: the most frequent value in the row (lo normally).
		cnt := map[float64]int{}
		for _, v := range vals {
			cnt[v]++
			if cnt[v] > cnt[def] {
				def = v
			}
		}
		allExplicit := rng.IntN(12) == 0
		for y, v := range vals {
			if v != def || allExplicit || rng.IntN(5) == 0 {
				ent[y] = v
			}
		}
		for j := range D {
			if rng.IntN(2) == 0 {
				ent[K+j] = negZero
			} else {
				ent[K+j] = 0
			}
		}
		if allExplicit {
			def = 0
			if rng.IntN(2) == 0 {
				def = negZero
			}
			if D == 0 {
				def = vals[0] // no dead column to take a 0 default
				allExplicit = false
			}
		}
		srows = append(srows, SparseRow{Default: def, Entries: ent})
	}
	if !sparse {
		rows := make([][]float64, k)
		for x, r := range srows {
			rows[x] = make([]float64, K+D)
			for y := range rows[x] {
				rows[x][y] = r.Default
				if v, ok := r.Entries[y]; ok {
					rows[x][y] = v
				}
			}
		}
		m, err := NewMatrix(rows)
		return m, desc, err
	}
	m, err := NewSparseMatrix(K+D, srows)
	return m, desc, err
}

// TestReview66PairSignaturesRandom: decomposeMatrix's decomposition is
// the same, bit for bit (and its error the same), with pair signatures
// and with every pair merged, on random matrices of review66Matrix.
func TestReview66PairSignaturesRandom(t *testing.T) {
	defer func() { pairSignatures = true }()
	rng := rand.New(rand.NewPCG(66, 4))
	compared, skipping, overlapPath, wide, errs := 0, 0, 0, 0, 0
	for i := range 70 {
		m, desc, err := review66Matrix(rng)
		if err != nil {
			t.Fatalf("case %d %s: %v", i, desc, err)
		}
		for _, eps0 := range []float64{0, 5} {
			pairSignatures = true
			with, errWith := decomposeMatrix(m, eps0)
			pairSignatures = false
			without, errWithout := decomposeMatrix(m, eps0)
			if fmt.Sprint(errWith) != fmt.Sprint(errWithout) {
				t.Fatalf("case %d %s eps0 %g: error %v with signatures, %v without", i, desc, eps0, errWith, errWithout)
			}
			if errWith != nil {
				errs++
				continue
			}
			if a, b := decompositionBits(with), decompositionBits(without); a != b {
				t.Fatalf("case %d %s eps0 %g: decompositions differ\nwith:\n%s\nwithout:\n%s", i, desc, eps0, a, b)
			}
			compared++
		}
		if skippedPairs(m) > 0 {
			skipping++
		}
		r := rowsOf(m)
		explicit, _, _ := r.columns()
		work := 0.0
		for _, rows := range explicit {
			work += float64(len(rows)) * float64(len(rows))
		}
		if work < float64(len(r.rows))*float64(len(r.rows)) {
			overlapPath++
		}
		if len(r.rows) > 64 {
			wide++
		}
	}
	t.Logf("%d decompositions compared (%d errors alike), %d matrices with skipped pairs, %d on the overlap path, %d with k > 64", compared, errs, skipping, overlapPath, wide)
	if compared < 100 || skipping < 30 || wide < 5 {
		t.Errorf("too few cases exercised")
	}
}

// TestReview66PairSignatureReference: signatures match the column-by-column
// reference of pairsig_test.go on the random matrices of review66Matrix
// (where the reference merges two column types of equal bits, such as an
// explicit entry equal to the row's default, the signer may decline: a
// decline is safe, so only a valid signature must match).
func TestReview66PairSignatureReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(66, 5))
	valid, signerDeclines := 0, 0
	for i := range 150 {
		m, desc, err := review66Matrix(rng)
		if err != nil {
			t.Fatal(err)
		}
		r, p := testPairer(m)
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
				if !ok {
					if wantOK {
						signerDeclines++
					}
					continue
				}
				if !wantOK {
					t.Fatalf("case %d %s pair (%d, %d): signature valid, reference declines", i, desc, x, y)
				}
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
					t.Fatalf("case %d %s pair (%d, %d): signature\n%s\nreference\n%s", i, desc, x, y, got, want)
				}
				valid++
			}
		}
	}
	t.Logf("%d valid signatures matched; the signer declined %d the reference accepts", valid, signerDeclines)
}
