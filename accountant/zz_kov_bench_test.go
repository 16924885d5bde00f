package accountant

import "testing"

func BenchmarkZZKov(b *testing.B) {
	for b.Loop() {
		ForgetMemo()
		kovCalibrate(hadamardFamily(64), Target{Eps: 4, Delta: 1e-6, N: 1000000, Rounds: 365})
	}
}
