package ldp

import (
	"context"
	"fmt"

	"github.com/blanket-dp/blanket/sdk"
)

// CheckDraws validates the arguments of sdk.BlanketSampler.SampleBlanket:
// eps0 as CheckEps0 does (errors wrap sdk.ErrBadEps0), and the number of
// draws n in [0, sdk.MaxBlanketDraws] (errors wrap sdk.ErrBadInput).
func CheckDraws(eps0 float64, n int) error {
	if err := CheckEps0(eps0); err != nil {
		return err
	}
	if n < 0 || n > sdk.MaxBlanketDraws {
		return fmt.Errorf("%w: %d blanket draws, must be in [0, %d]", sdk.ErrBadInput, n, sdk.MaxBlanketDraws)
	}
	return nil
}

// DrawIndices is sdk.BlanketSampler.SampleBlanket for a randomizer whose
// reports are output indices (of outputs outputs) in the index encoding:
// it checks eps0 and n (CheckDraws) and returns n reports, each the output
// draw returns, which must be in [0, outputs). ctx is checked every
// CtxEvery draws.
func DrawIndices(ctx context.Context, eps0 float64, n, outputs int, draw func() int) ([][]byte, error) {
	if err := CheckDraws(eps0, n); err != nil {
		return nil, err
	}
	idx := make([]int, n)
	for i := range idx {
		if err := Canceled(ctx, i); err != nil {
			return nil, err
		}
		idx[i] = draw()
	}
	return EncodeIndices(idx, outputs), nil
}
