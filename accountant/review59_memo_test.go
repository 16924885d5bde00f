package accountant

import (
	"math"
	"testing"
)

// Review of 2aba623, item 3: compoundLower's memo key (memoKey + 'l') is
// apart from evaluate's (memoKey, 25 + 24 a bytes for a atoms: one byte
// shorter than any suffixed key modulo 24) and from evaluateCompound's
// (memoKey + 'c', same length, different last byte). Whatever the order
// of the calls, each returns its own computation's bits.

func TestReview59MemoKeysApart(t *testing.T) {
	s := AtomSet{{R: 0.01, P: 0.01, Q: 0.01}, {R: 0.02, P: 0.03, Q: 0.01}}
	k := memoKey(s, 7, 1, 0.5, true)
	l := append(memoKey(s, 7, 1, 0.5, true), 'l')
	c := append(memoKey(s, 7, 1, 0.5, true), 'c')
	if string(l) == string(c) || len(l) != len(k)+1 || l[len(l)-1] == c[len(c)-1] {
		t.Fatalf("keys: %x %x %x", k, l, c)
	}
	for a := range 60 {
		for b := range 60 {
			if 25+24*a == 26+24*b {
				t.Fatalf("an evaluate key of %d atoms has the length of a suffixed key of %d", a, b)
			}
		}
	}
}

func r59Bits(b bracket) [2]uint64 {
	return [2]uint64{math.Float64bits(b.lo), math.Float64bits(b.hi)}
}

func TestReview59MemoOrder(t *testing.T) {
	d, err := KRRMech{K: 1000}.Decompose(20)
	if err != nil {
		t.Fatal(err)
	}
	s := d.Upper[0]
	const n = 1000
	for i, eps := range []float64{3.25, 7.125, 11.0625} {
		hRel := hRelStart / float64(int(1)<<(3+i)) // keys no other test uses
		p := prepare(s, eps)
		want, ok := compoundEval(p, n, hRel, true)
		if !ok || !(want.lo > 0) {
			t.Fatalf("eps %g: the compound path does not apply (%v %+v)", eps, ok, want)
		}
		wantEval := compute(s, n, eps, hRel, true)
		wantComp := computePaths(s, n, eps, hRel, true, true)
		if want.lo == wantEval.lo || want.lo == wantComp.lo {
			t.Fatalf("eps %g: compoundLower's value equals another path's lower end; the case cannot tell the keys apart", eps)
		}
		check := func(order string) {
			if got := compoundLower(s, n, eps, hRel); got != want.lo {
				t.Errorf("eps %g order %s: compoundLower %g, want %g", eps, order, got, want.lo)
			}
			if got := evaluate(s, n, eps, hRel, true); r59Bits(got) != r59Bits(wantEval) {
				t.Errorf("eps %g order %s: evaluate %+v, want %+v", eps, order, got, wantEval)
			}
			if got := evaluateCompound(s, n, eps, hRel, true); r59Bits(got) != r59Bits(wantComp) {
				t.Errorf("eps %g order %s: evaluateCompound %+v, want %+v", eps, order, got, wantComp)
			}
		}
		switch i {
		case 0:
			compoundLower(s, n, eps, hRel)
			check("lower first")
		case 1:
			evaluate(s, n, eps, hRel, true)
			check("evaluate first")
		case 2:
			evaluateCompound(s, n, eps, hRel, true)
			check("compound first")
		}
	}
}
