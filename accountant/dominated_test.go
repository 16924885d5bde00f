package accountant

import (
	"fmt"
	"math"
	"testing"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/plugins/hadamard"
)

func TestLowerBoardCountsOnlyEarlierFinishedSets(t *testing.T) {
	b := newLowerBoard(4)
	if v := b.before(3); v != 0 {
		t.Fatalf("nothing finished: before(3) = %v, want 0", v)
	}
	b.finish(2, 5)
	b.finish(0, 3)
	for _, c := range []struct {
		j    int
		want float64
	}{{0, 0}, {1, 3}, {2, 3}, {3, 5}} {
		if v := b.before(c.j); v != c.want {
			t.Errorf("before(%d) = %v, want %v", c.j, v, c.want)
		}
	}
}

// hadamardAtoms is the atoms declaration of Hadamard response over k
// buckets at eps0, decomposed.
func hadamardAtoms(t testing.TB, k int, eps0 float64) *Decomposition {
	t.Helper()
	cats := make([]string, k)
	for i := range cats {
		cats[i] = fmt.Sprint("c", i)
	}
	r, err := hadamard.New(hadamard.Options{Categories: cats})
	if err != nil {
		t.Fatal(err)
	}
	decl, err := r.Declaration(eps0, declare.FormAtoms)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decompose(decl)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The argument of dominated.go: where the check fires, the set's own bound,
// refined to the end, is below the dominating bound.
func TestPrunedLowerSetIsBelowTheDominatingBound(t *testing.T) {
	const delta = 1e-8
	fired := 0
	for _, eps0 := range []float64{1, 4, 8} {
		d := hadamardAtoms(t, 8, eps0)
		if len(d.Lower) != 2 {
			t.Fatalf("hadamard:k=8 eps0 %v: %d lower sets, want 2", eps0, len(d.Lower))
		}
		for _, n := range []int{100, 10_000, 1_000_000} {
			L, _, _ := epsLower(d.Lower[0], n, delta, eps0, nil)
			e, ok, pruned := epsLower(d.Lower[1], n, delta, eps0, func() float64 { return L })
			full, _, _ := epsLower(d.Lower[1], n, delta, eps0, nil)
			if !(full < L) && pruned {
				t.Errorf("eps0 %v n %d: pruned, yet the set's bound %v is not below %v", eps0, n, full, L)
			}
			if pruned {
				fired++
				if e != 0 || !ok {
					t.Errorf("eps0 %v n %d: pruned set returned (%v, %v), want (0, true)", eps0, n, e, ok)
				}
			} else if e != full {
				t.Errorf("eps0 %v n %d: not pruned, yet %v differs from %v", eps0, n, e, full)
			}
		}
	}
	// Hadamard's seven-atom set is below its four-atom set at these
	// parameters (every one, with the check firing on the first lattice).
	if fired != 9 {
		t.Errorf("the check fired %d times of 9", fired)
	}
}

// epsilonOf gives the same figures and flag with and without pruning.
func TestPruningLeavesEpsilonUnchanged(t *testing.T) {
	const delta = 1e-8
	type tc struct {
		name string
		d    *Decomposition
	}
	var cases []tc
	for _, eps0 := range []float64{1, 4, 8, 12} {
		cases = append(cases, tc{fmt.Sprintf("hadamard:k=8 eps0 %v", eps0), hadamardAtoms(t, 8, eps0)})
		for _, k := range []int{2, 10} {
			d, err := KRR(k).Decompose(eps0)
			if err != nil {
				t.Fatal(err)
			}
			cases = append(cases, tc{fmt.Sprintf("krr:k=%d eps0 %v", k, eps0), d})
		}
		d, err := Generic().Decompose(eps0)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, tc{fmt.Sprintf("generic eps0 %v", eps0), d})
	}
	for _, c := range cases {
		for _, n := range []int{100, 10_000, 1_000_000} {
			compareLowerPruning(t, fmt.Sprintf("%s n %d", c.name, n), c.d, n, delta)
		}
	}
}

func compareLowerPruning(t *testing.T, name string, d *Decomposition, n int, delta float64) {
	t.Helper()
	on := epsilonOf(d, n, delta)
	pruneLowerSets = false
	off := epsilonOf(d, n, delta)
	pruneLowerSets = true
	if math.Float64bits(on.Upper) != math.Float64bits(off.Upper) ||
		math.Float64bits(on.Lower) != math.Float64bits(off.Lower) || on.Tight != off.Tight {
		t.Errorf("%s: with pruning %+v, without %+v", name, on, off)
	}
}
