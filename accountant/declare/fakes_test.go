package declare_test

import (
	"math"
	"strconv"
	"testing"

	"github.com/blanket-dp/blanket/accountant/declare"
)

// TestHonestFloor pins the honest floor n - floor(f n) on a table: f = 0
// is the identity, small batches keep at least the victim's report, and
// a decimal fraction counts the fakes it says (0.3 of 10 is 3, though
// float64(0.3) x 10 is 2.99999999999999988898 in exact binary).
func TestHonestFloor(t *testing.T) {
	for _, tc := range []struct {
		n    int
		f    float64
		want int
	}{
		{0, 0, 0},
		{1, 0, 1},
		{2, 0, 2},
		{10000, 0, 10000},
		{10000, 0.1, 9000},
		{10000, 0.05, 9500},
		{10, 0.3, 7},    // the decimal reading: 3 fakes (binary alone: 2)
		{100, 0.29, 71}, // float64(0.29) x 100 = 28.999999999999998 in binary
		{100, 0.07, 93}, // float64(0.07) x 100 = 7.000000000000001 in float64 arithmetic
		{2, 0.5, 1},     // n_min 2, half fake: the victim alone
		{2, 0.49, 2},    // 0.98 fakes: none
		{3, 0.5, 2},
		{1, 0.9, 1}, // floor(0.9) = 0
		{9, 0.999, 1},
		{1000, 0.999, 1},
		{1001, 0.001, 1000},
		{999, 0.001, 999},
		{0, 0.5, 0},
	} {
		if got := declare.HonestFloor(tc.n, tc.f); got != tc.want {
			t.Errorf("HonestFloor(%d, %v) = %d, want %d", tc.n, tc.f, got, tc.want)
		}
		if got := declare.FakeCount(tc.n, tc.f); got != tc.n-tc.want {
			t.Errorf("FakeCount(%d, %v) = %d, want %d", tc.n, tc.f, got, tc.n-tc.want)
		}
	}
}

// TestHonestFloorExact checks HonestFloor against integer arithmetic for
// every fraction p/100 and n up to 300: the fakes are floor(p n / 100),
// computed on integers (no floating point), and the honest floor is
// non-decreasing in n and at least 1.
func TestHonestFloorExact(t *testing.T) {
	for p := range 100 {
		f, err := strconv.ParseFloat("0."+strconv.Itoa(100 + p)[1:], 64) // "0.07", as a plan says it
		if err != nil {
			t.Fatal(err)
		}
		prev := 0
		for n := 1; n <= 300; n++ {
			want := n - p*n/100
			got := declare.HonestFloor(n, f)
			if got != want {
				t.Fatalf("HonestFloor(%d, %v) = %d, want %d - floor(%d x %d / 100) = %d", n, f, got, n, p, n, want)
			}
			if got < prev || got < 1 {
				t.Fatalf("HonestFloor(%d, %v) = %d after %d at n - 1: want non-decreasing and >= 1", n, f, got, prev)
			}
			prev = got
		}
	}
}

// TestFakeFractionDomain: the fraction must be finite and in [0, 1);
// FakeCount panics outside it (every plan and flag checks it first).
func TestFakeFractionDomain(t *testing.T) {
	for _, tc := range []struct {
		f  float64
		ok bool
	}{
		{0, true}, {0.5, true}, {math.Nextafter(1, 0), true},
		{1, false}, {1.5, false}, {-0.1, false}, {math.Copysign(0, -1), true},
		{math.NaN(), false}, {math.Inf(1), false}, {math.Inf(-1), false},
	} {
		if got := declare.ValidFakeFraction(tc.f); got != tc.ok {
			t.Errorf("ValidFakeFraction(%v) = %v, want %v", tc.f, got, tc.ok)
		}
		if tc.ok {
			if h := declare.HonestFloor(7, tc.f); h < 1 || h > 7 {
				t.Errorf("HonestFloor(7, %v) = %d, want in [1, 7]", tc.f, h)
			}
			continue
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("FakeCount(10, %v) did not panic", tc.f)
				}
			}()
			declare.FakeCount(10, tc.f)
		}()
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("FakeCount(-1, 0.1) did not panic")
			}
		}()
		declare.FakeCount(-1, 0.1)
	}()
}
