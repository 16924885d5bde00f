//go:build audit

package longitudinal

import "testing"

// TestTheorem5Deep is TestTheorem5 on a tree of 8 periods: the law of
// each of the 256 state sequences, compared pairwise.
func TestTheorem5Deep(t *testing.T) {
	theorem5(t, []theorem5Case{{8, 3, 2}})
}

// TestStepMatchesDefinitionDeep is TestStepMatchesDefinition with 200,000
// users per input sequence.
func TestStepMatchesDefinitionDeep(t *testing.T) {
	stepMatchesDefinition(t, 200000)
}

// TestEstimateUnbiasedDeep is TestEstimateUnbiased with 2000 users.
func TestEstimateUnbiasedDeep(t *testing.T) {
	estimateUnbiased(t, 2000)
}
