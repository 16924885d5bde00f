package accountant

// Error-free and compensated floating-point sums, shared by the engine's
// paths.

// twoSum returns a + b rounded and its rounding error (Knuth): a + b = s + e
// exactly.
func twoSum(a, b float64) (s, e float64) {
	s = a + b
	bb := s - a
	e = (a - (s - bb)) + (b - bb)
	return s, e
}

// kahan is a compensated running sum.
type kahan struct{ sum, comp float64 }

// add adds v to the sum.
func (k *kahan) add(v float64) {
	y := v - k.comp
	t := k.sum + y
	k.comp = (t - k.sum) - y
	k.sum = t
}
