package accountant

import (
	"fmt"
	"math"
	"math/big"
	"testing"

	"github.com/blanket-dp/blanket/plugins/laplace"
)

// Review of 2aba623, item 4: compoundFew's count C(M + r, r) is the number
// of count vectors compoundEval's first range visits, sum over m <= M of
// C(m + r - 1, r - 1), with M compoundEval's first m_max; compoundFew says
// yes exactly when that number is at most compoundMaxLeaves (exact
// integers here).
func TestReview59CompoundFewCount(t *testing.T) {
	checked, yes, no := 0, 0, 0
	check := func(name string, p prepared, n int) {
		rare := compoundSplit(p, n)
		if rare == nil {
			if compoundFew(p, n) {
				t.Errorf("%s n %d: no split, compoundFew true", name, n)
			}
			return
		}
		// compoundEval's M.
		var piSum, cSum float64
		isRare := map[int]bool{}
		for _, j := range rare {
			isRare[j] = true
			piSum += p.w[j]
		}
		for j := range p.w {
			if !isRare[j] {
				cSum += p.w[j]
			}
		}
		pi := piSum / (piSum + cSum)
		mean := float64(n) * pi
		M := int(math.Min(float64(n), math.Ceil(mean+2*math.Sqrt(mean)+2)))
		r := len(rare)
		count := new(big.Int)
		for m := 0; m <= M; m++ {
			count.Add(count, new(big.Int).Binomial(int64(m+r-1), int64(r-1)))
		}
		if want := new(big.Int).Binomial(int64(M+r), int64(r)); count.Cmp(want) != 0 {
			t.Errorf("%s n %d: sum %v, C(M + r, r) %v", name, n, count, want)
		}
		want := count.Cmp(big.NewInt(compoundMaxLeaves)) <= 0
		got := compoundFew(p, n)
		checked++
		if got {
			yes++
		} else {
			no++
		}
		if got != want {
			t.Errorf("%s n %d: r %d M %d count %v: compoundFew %v", name, n, r, M, count, got)
		}
	}
	for _, c := range r55Cases(59, 200) {
		check(c.name, c.p, c.n)
	}
	for _, eps0 := range []float64{8, 14, 20} {
		d, err := Decompose(laplace.Declaration(eps0, laplace.Bins))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range d.Upper {
			for _, f := range []float64{0.3, 0.6, 0.9, 0.97} {
				p := prepare(s, f*eps0)
				for _, n := range []int{2, 3, 10, 100, 1000, 1e6} {
					check(fmt.Sprintf("laplace eps0 %g eps %g", eps0, f*eps0), p, n)
				}
			}
		}
	}
	// r rare atoms at n = 2 (M = 2): 1 + r + C(r + 1, 2) leaves crosses
	// 65536 between r = 360 and 361.
	for _, r := range []int{359, 360, 361, 362} {
		z := []float64{-1}
		w := []float64{1 - 0.15}
		for j := range r {
			z = append(z, 100+float64(j%7))
			w = append(w, 0.15/float64(r))
		}
		check(fmt.Sprintf("edge r %d", r), r55Prepared(z, w), 2)
	}
	t.Logf("%d splits: %d few, %d not", checked, yes, no)
	if yes == 0 || no == 0 {
		t.Errorf("want both answers")
	}
}
