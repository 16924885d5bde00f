package accountant_test

import (
	"fmt"

	"github.com/blanket-dp/blanket/accountant"
)

// Values are printed to two significant digits: the engine certifies them to
// 0.5%, and the parameters below keep the exact values away from rounding
// boundaries (checked against krrExactDelta).

// A k-ary randomized response with k = 100 at local eps0 = 4, shuffled among
// 50,000 users, is (0.13, 1e-8)-DP; no analysis can prove much better, since
// the lower bound is the same to two digits.
func ExampleEpsilon() {
	r, err := accountant.Epsilon(accountant.KRR(100), 4, 50_000, 1e-8)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("upper %.2g, lower %.2g, local %g, amplified %v\n", r.Upper, r.Lower, r.LocalEps, r.Amplified)
	// Output:
	// upper 0.13, lower 0.13, local 4, amplified true
}

// The largest local budget for which 100-ary randomized response among
// 100,000 users meets (0.5, 1e-6).
func ExampleCalibrate() {
	c, err := accountant.Calibrate(accountant.KRR(100), accountant.Target{Eps: 0.5, Delta: 1e-6, N: 100_000})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("eps0 %.2g gives central eps %.2g\n", c.Eps0, c.Achieved.Upper)
	// Output:
	// eps0 6.7 gives central eps 0.5
}

// Two 10-ary randomized responses in one message, total budget 4 (2 each),
// cost more than one of them alone at 2.
func ExampleJoint() {
	const n, delta = 200_000, 1e-6
	joint, err := accountant.Epsilon(accountant.Joint(accountant.KRR(10), accountant.KRR(10)), 4, n, delta)
	if err != nil {
		fmt.Println(err)
		return
	}
	one, err := accountant.Epsilon(accountant.KRR(10), 2, n, delta)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("joint %.2g, one component %.2g\n", joint.Upper, one.Upper)
	// Output:
	// joint 0.039, one component 0.016
}
