package ldp_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

func TestIndexEncoding(t *testing.T) {
	tests := []struct {
		n, width int
	}{{1, 1}, {2, 1}, {256, 1}, {257, 2}, {65536, 2}, {65537, 3}, {1 << 24, 3}, {1<<24 + 1, 4}}
	for _, tt := range tests {
		if w := ldp.IndexWidth(tt.n); w != tt.width {
			t.Errorf("IndexWidth(%d) = %d, want %d", tt.n, w, tt.width)
		}
		for _, v := range []int{0, tt.n / 2, tt.n - 1} {
			b := make([]byte, tt.width)
			ldp.PutIndex(b, v)
			got, err := ldp.ReadIndex(b, tt.n)
			if err != nil || got != v {
				t.Errorf("n=%d: ReadIndex(PutIndex(%d)) = %d, %v", tt.n, v, got, err)
			}
		}
	}
	bad := []struct {
		report []byte
		n      int
	}{
		{nil, 10},
		{[]byte{1, 2}, 10},
		{[]byte{10}, 10},
		{[]byte{255}, 10},
		{[]byte{1, 0}, 256},
		{[]byte{1}, 300},
	}
	for _, tt := range bad {
		if _, err := ldp.ReadIndex(tt.report, tt.n); !errors.Is(err, sdk.ErrBadReport) {
			t.Errorf("ReadIndex(%v, %d) error = %v, want ErrBadReport", tt.report, tt.n, err)
		}
	}
	enc := ldp.EncodeIndices([]int{0, 299, 7}, 300)
	want := [][]byte{{0, 0}, {1, 43}, {0, 7}}
	for i := range want {
		if !slices.Equal(enc[i], want[i]) {
			t.Errorf("EncodeIndices[%d] = %v, want %v", i, enc[i], want[i])
		}
	}
}

func TestDomain(t *testing.T) {
	d, err := ldp.NewDomain([]string{"a", "b", "c"}, "other", 10)
	if err != nil {
		t.Fatal(err)
	}
	if d.Size() != 4 || d.Other() != "other" || !slices.Equal(d.Labels(), []string{"a", "b", "c", "other"}) || !slices.Equal(d.Categories(), []string{"a", "b", "c"}) {
		t.Errorf("domain = %v (other %q)", d.Labels(), d.Other())
	}
	idx, err := d.Indices([]string{"c", "zzz", "a", "other"})
	if err != nil || !slices.Equal(idx, []int{2, 3, 0, 3}) {
		t.Errorf("Indices = %v, %v", idx, err)
	}
	closed, err := ldp.NewDomain([]string{"a", "b"}, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := closed.Indices([]string{"a", "x"}); !errors.Is(err, sdk.ErrBadInput) {
		t.Errorf("unknown category without other: error = %v, want ErrBadInput", err)
	}
	for _, tt := range []struct {
		cats  []string
		other string
	}{
		{[]string{"a"}, ""},
		{nil, "other"},
		{[]string{"a", "a"}, ""},
		{[]string{"a", "b"}, "b"},
		{make([]string, 0), ""},
		{[]string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}, ""},
	} {
		if _, err := ldp.NewDomain(tt.cats, tt.other, 10); !errors.Is(err, sdk.ErrBadConfig) {
			t.Errorf("NewDomain(%q, %q) error = %v, want ErrBadConfig", tt.cats, tt.other, err)
		}
	}
}

func TestCheckEps0(t *testing.T) {
	for _, e := range []float64{ldp.MinEps0, 1, ldp.MaxEps0} {
		if err := ldp.CheckEps0(e); err != nil {
			t.Errorf("CheckEps0(%v) = %v", e, err)
		}
	}
	for _, e := range []float64{0, -1, 1e-4, ldp.MaxEps0 + 1, math.NaN(), math.Inf(1)} {
		if err := ldp.CheckEps0(e); !errors.Is(err, sdk.ErrBadEps0) {
			t.Errorf("CheckEps0(%v) = %v, want ErrBadEps0", e, err)
		}
	}
}

func TestZScore(t *testing.T) {
	// Reference values from the standard normal table.
	const tol = 1e-6 // table values are given to 7 significant digits
	for _, tt := range []struct{ c, z float64 }{{0.95, 1.959964}, {0.99, 2.575829}, {0.6826895, 1.0}} {
		if z := ldp.ZScore(tt.c); math.Abs(z-tt.z) > tol {
			t.Errorf("ZScore(%v) = %v, want %v", tt.c, z, tt.z)
		}
	}
}

// TestNormSubShift checks the projection against its defining property,
// sum max(v + s, 0) = total, on hand-made cases.
func TestNormSubShift(t *testing.T) {
	const tol = 1e-9 // sums of a few values of order 100
	tests := []struct {
		v     []float64
		total float64
		want  []float64
	}{
		{[]float64{10, 20, 70}, 100, []float64{10, 20, 70}},
		{[]float64{-10, 50, 60}, 100, []float64{0, 45, 55}},
		{[]float64{-10, -5, 30}, 20, []float64{0, 0, 20}},
		{[]float64{5, 5, 5, 5}, 100, []float64{25, 25, 25, 25}},
		{[]float64{-100, 1, 2}, 1, []float64{0, 0, 1}},
	}
	for _, tt := range tests {
		s := ldp.NormSubShift(tt.v, tt.total)
		for i, x := range tt.v {
			if got := max(x+s, 0); math.Abs(got-tt.want[i]) > tol {
				t.Errorf("NormSub(%v, %v)[%d] = %v, want %v", tt.v, tt.total, i, got, tt.want[i])
			}
		}
	}
}

func TestPureItems(t *testing.T) {
	// k-RR with k = 4, eps0 = ln 3: p* = 3/6, q* = 1/6. n = 600, supports
	// (300, 100, 100, 100): estimates (300 - 100)/(1/3) = 600 and 0.
	p := ldp.Pure{P: 0.5, Q: 1.0 / 6, Diff: 1.0 / 3}
	items := p.Items([]string{"a", "b", "c", "d"}, []int64{300, 100, 100, 100}, 600, 0.95)
	const tol = 1e-9 // closed forms of small rationals
	want := []float64{600, 0, 0, 0}
	// Var = n q(1-q)/d^2 + nv (1-p-q)/d = 600·(5/36)·9 + nv·(1/3)·3.
	wantVar := []float64{750 + 600, 750, 750, 750}
	for i, it := range items {
		if math.Abs(it.Value-want[i]) > tol || math.Abs(it.Variance-wantVar[i]) > tol {
			t.Errorf("item %d = %+v, want value %v variance %v", i, it, want[i], wantVar[i])
		}
		if !(it.PostLo <= it.Post && it.Post <= it.PostHi) || it.PostLo < 0 || it.PostHi > 600 {
			t.Errorf("item %d: post %v outside [%v, %v] or [0, 600]", i, it.Post, it.PostLo, it.PostHi)
		}
	}
}

func TestCheckStatistic(t *testing.T) {
	desc := &sdk.Description{Name: "x", Digest: "d"}
	ok := func() *sdk.Statistic {
		return &sdk.Statistic{Plugin: "x", Digest: "d", Eps0: 1, N: 10, Counts: []int64{4, 6}}
	}
	if err := ldp.CheckStatistic(ok(), desc, 2, true); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*sdk.Statistic){
		"plugin":    func(s *sdk.Statistic) { s.Plugin = "y" },
		"digest":    func(s *sdk.Statistic) { s.Digest = "e" },
		"eps0":      func(s *sdk.Statistic) { s.Eps0 = math.NaN() },
		"empty":     func(s *sdk.Statistic) { s.N, s.Counts = 0, []int64{0, 0} },
		"negative":  func(s *sdk.Statistic) { s.Counts[0] = -1 },
		"sum":       func(s *sdk.Statistic) { s.Counts[0] = 5 },
		"length":    func(s *sdk.Statistic) { s.Counts = []int64{10} },
		"malformed": func(s *sdk.Statistic) { s.Malformed = -1 },
		"overflow":  func(s *sdk.Statistic) { s.N = math.MaxInt64; s.Counts = []int64{math.MaxInt64, math.MaxInt64} },
	} {
		s := ok()
		mut(s)
		if err := ldp.CheckStatistic(s, desc, 2, true); !errors.Is(err, sdk.ErrBadStatistic) {
			t.Errorf("%s: error = %v, want ErrBadStatistic", name, err)
		}
	}
	if err := ldp.CheckStatistic(nil, desc, 2, true); !errors.Is(err, sdk.ErrBadStatistic) {
		t.Errorf("nil statistic: error = %v", err)
	}
}
