//go:build audit

package laplace

import "testing"

// TestSamplerMatchesDeclarationDeep is TestSamplerMatchesDeclaration with
// 100,000 draws per input.
func TestSamplerMatchesDeclarationDeep(t *testing.T) {
	samplerMatchesDeclaration(t, 100_000)
}
