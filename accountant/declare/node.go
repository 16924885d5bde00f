package declare

import "math"

// NodeMatrix returns the law of one node's report of the longitudinal tree
// protocol (accountant.Longitudinal) at eps0, randomized response on the
// node's value: rows are the node values -1, 0, +1, columns the reported
// bits -1, +1. A tree protocol declares it (Declaration.Tree > 0).
func NodeMatrix(eps0 float64) [][]float64 {
	e := math.Exp(eps0)
	hi, lo := e/(e+1), 1/(e+1)
	return [][]float64{{hi, lo}, {0.5, 0.5}, {lo, hi}}
}
