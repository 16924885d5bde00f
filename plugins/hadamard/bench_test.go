package hadamard_test

import (
	"fmt"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/plugins/hadamard"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

var sinkInt int64

func BenchmarkRandomize(b *testing.B) {
	for _, k := range []int{16, 1024, 10_000} {
		labels := ldptest.Labels(k)
		ldptest.BenchRandomizeSources(b, fmt.Sprintf("k=%d", k), func(b *testing.B, src ldp.Source) sdk.Randomizer {
			return mustNew(b, hadamard.Options{Categories: labels, Rand: src})
		}, 2, sdk.Inputs{Categories: ldptest.Cycle(labels, ldptest.BenchBatch)})
	}
}

func BenchmarkFWHT(b *testing.B) {
	for _, n := range []int{1 << 10, 1 << 14, 1 << 16} {
		b.Run(fmt.Sprintf("K=%d", n), func(b *testing.B) {
			a := make([]int64, n)
			for b.Loop() {
				hadamard.FWHT(a)
			}
			sinkInt = a[0]
		})
	}
}

func BenchmarkAccumulate(b *testing.B) {
	for _, k := range []int{16, 1024, 10_000} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			r := mustNew(b, hadamard.Options{Categories: ldptest.Labels(k), Rand: ldptest.Seeded(1)})
			idx := make([]int, ldptest.BenchBatch)
			for i := range idx {
				idx[i] = i % r.Outputs()
			}
			ldptest.BenchAccumulate(b, r, 2, ldp.EncodeIndices(idx, r.Outputs()))
		})
	}
}

func BenchmarkEstimate(b *testing.B) {
	for _, k := range []int{16, 1024, 10_000, 1<<16 - 1} { // the last has K = 2^16
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			r := mustNew(b, hadamard.Options{Categories: ldptest.Labels(k), Rand: ldptest.Seeded(1)})
			in := sdk.Inputs{Categories: ldptest.Cycle(ldptest.Labels(k), 10*k)}
			ldptest.BenchEstimate(b, r, ldptest.Statistic(b, r, 2, in))
		})
	}
}

// BenchmarkDecomposeMatrix is the accountant's decomposition of the
// matrix form at k = 64 (128 outputs, 4,032 ordered pairs), which a
// calibration repeats at every new budget it probes (the accountant
// remembers decompositions: ForgetMemo makes each one a first).
func BenchmarkDecomposeMatrix(b *testing.B) {
	for _, k := range []int{16, 64} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			r := mustNew(b, hadamard.Options{Categories: ldptest.Labels(k), Rand: ldptest.Seeded(1)})
			d, err := r.Declaration(8, declare.FormMatrix)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				accountant.ForgetMemo()
				if _, err := accountant.Decompose(d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
