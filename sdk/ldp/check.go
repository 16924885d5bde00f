package ldp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/sdk"
)

// The local budgets the built-in randomizers support. Below MinEps0 the
// estimators' variance (of order n/eps0^2) makes reports useless; above
// MaxEps0 the accountant cannot represent the declaration.
const (
	// MinEps0 is the smallest supported eps0.
	MinEps0 = 1e-3
	// MaxEps0 is the largest supported eps0.
	MaxEps0 = declare.MaxEps0
)

// DefaultConfidence is the level of confidence intervals when none is set.
const DefaultConfidence = 0.95

// CheckEps0 returns an error wrapping sdk.ErrBadEps0 unless eps0 is in
// [MinEps0, MaxEps0].
func CheckEps0(eps0 float64) error {
	if math.IsNaN(eps0) || math.IsInf(eps0, 0) || eps0 < MinEps0 || eps0 > MaxEps0 {
		return fmt.Errorf("%w: eps0 = %v, must be finite and in [%g, %g]", sdk.ErrBadEps0, eps0, float64(MinEps0), float64(MaxEps0))
	}
	return nil
}

// Confidence returns c, or DefaultConfidence when c is 0. Errors wrap
// sdk.ErrBadConfig unless the result is in (0, 1).
func Confidence(c float64) (float64, error) {
	if c == 0 {
		return DefaultConfidence, nil
	}
	if math.IsNaN(c) || !(c > 0 && c < 1) {
		return 0, fmt.Errorf("%w: confidence = %v, must be in (0,1)", sdk.ErrBadConfig, c)
	}
	return c, nil
}

// ZScore returns the two-sided standard normal critical value of a
// confidence level: P(|N(0,1)| <= z) = confidence.
func ZScore(confidence float64) float64 {
	return math.Sqrt2 * math.Erfinv(confidence)
}

// Digest returns the configuration digest of d: the hex SHA-256 (first 16
// bytes) of d's JSON encoding with the Digest field cleared.
func Digest(d sdk.Description) string {
	d.Digest = ""
	b, err := json.Marshal(d)
	if err != nil {
		panic(err) // a Description has only JSON-encodable fields
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// CopyDescription returns a deep copy of d.
func CopyDescription(d *sdk.Description) *sdk.Description {
	c := *d
	c.Categories = append([]string(nil), d.Categories...)
	c.Params = append([]sdk.Param(nil), d.Params...)
	return &c
}

// CheckStatistic validates a statistic before estimation: produced by the
// plugin and configuration of desc at a supported eps0, with counts
// counters, N >= 1, no draws (CheckNoDraws: Estimate refuses them), no
// negative counter, and either counts summing to N (sumIsN, one count per
// report) or each count at most N. Errors wrap sdk.ErrBadStatistic.
func CheckStatistic(s *sdk.Statistic, desc *sdk.Description, counts int, sumIsN bool) error {
	if s == nil {
		return fmt.Errorf("%w: nil statistic", sdk.ErrBadStatistic)
	}
	ref := sdk.Statistic{Plugin: desc.Name, Digest: desc.Digest, Eps0: s.Eps0, Counts: make([]int64, counts)}
	if err := ref.Compatible(s); err != nil {
		return err
	}
	if err := CheckEps0(s.Eps0); err != nil {
		return fmt.Errorf("%w: %v", sdk.ErrBadStatistic, err)
	}
	if s.N < 1 {
		return fmt.Errorf("%w: N = %d, need at least one valid report", sdk.ErrBadStatistic, s.N)
	}
	if err := CheckNoDraws(s); err != nil {
		return err
	}
	if s.Malformed < 0 {
		return fmt.Errorf("%w: Malformed = %d, must be >= 0", sdk.ErrBadStatistic, s.Malformed)
	}
	var sum int64
	for i, c := range s.Counts {
		if c < 0 || c > s.N {
			return fmt.Errorf("%w: count %d = %d, must be in [0, N = %d]", sdk.ErrBadStatistic, i, c, s.N)
		}
		if sumIsN {
			if c > s.N-sum {
				return fmt.Errorf("%w: counts sum to more than N = %d", sdk.ErrBadStatistic, s.N)
			}
			sum += c
		}
	}
	if sumIsN && sum != s.N {
		return fmt.Errorf("%w: counts sum to %d, N = %d", sdk.ErrBadStatistic, sum, s.N)
	}
	return nil
}

// CtxEvery is how many items batch loops process between context checks.
const CtxEvery = 1024

// Canceled returns ctx.Err() every CtxEvery-th item i (and at i = 0).
func Canceled(ctx context.Context, i int) error {
	if i%CtxEvery == 0 {
		return ctx.Err()
	}
	return nil
}
