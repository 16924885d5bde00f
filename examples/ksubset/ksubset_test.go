package ksubset_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/examples/ksubset"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// newKSubset adapts ksubset.New to the shared checks, with subsets of 2
// buckets where there are at least 3 (so that the checks run k-subset
// proper, not k-RR) and of 1 below.
func newKSubset(o ldptest.Options) (sdk.Randomizer, error) {
	k := len(o.Categories)
	if o.Other != "" {
		k++
	}
	return ldptest.Randomizer(ksubset.New(ksubset.Options{Categories: o.Categories, Other: o.Other, S: max(1, min(2, k-1)), Confidence: o.Confidence, Rand: o.Rand}))
}

func mustNew(t testing.TB, opts ksubset.Options) *ksubset.Randomizer {
	return ldptest.Must(t, ksubset.New, opts)
}

func TestNewRejectsBadConfig(t *testing.T) {
	ldptest.CheckCategoricalConfig(t, newKSubset)
	for _, s := range []int{-1, 3, 4} {
		if _, err := ksubset.New(ksubset.Options{Categories: []string{"a", "b", "c"}, S: s}); !errors.Is(err, sdk.ErrBadConfig) {
			t.Errorf("s = %d of 3 buckets: error = %v, want ErrBadConfig", s, err)
		}
	}
}

func TestFromConfig(t *testing.T) {
	for _, tt := range []struct {
		params map[string]string
		k, s   int
	}{{nil, 100, 12}, {map[string]string{"s": "30"}, 100, 30}, {map[string]string{"s": "99"}, 100, 99}, {nil, 4, 1}} {
		cfg := sdk.Config{Categories: ldptest.Labels(tt.k), Params: tt.params}
		r, err := ksubset.FromConfig(cfg)
		if err != nil || r.K() != tt.k || r.S() != tt.s {
			t.Errorf("FromConfig(%d categories, %v): k %d, s %d, %v; want k %d, s %d", tt.k, tt.params, r.K(), r.S(), err, tt.k, tt.s)
		}
	}
	labels := ldptest.Labels(10)
	ldptest.CheckCategoricalFromConfig(t, func(cfg sdk.Config) error { _, err := ksubset.FromConfig(cfg); return err }, map[string]sdk.Config{
		"s not a number": {Categories: labels, Params: map[string]string{"s": "two"}},
		"s zero":         {Categories: labels, Params: map[string]string{"s": "0"}},
		"s k":            {Categories: labels, Params: map[string]string{"s": "10"}},
		"s fraction":     {Categories: labels, Params: map[string]string{"s": "2.5"}},
	})
}

func TestDescribe(t *testing.T) {
	ldptest.CheckCategoricalDescribe(t, newKSubset, ksubset.Name, ldp.BitmapBytes(301))
	d, _ := mustNew(t, ksubset.Options{Categories: ldptest.Labels(100)}).Describe(context.Background())
	if !slices.Contains(d.Params, sdk.Param{Name: "s", Value: "12", Doc: "size of a reported subset, in [1, k-1]; default max(1, k/8)"}) {
		t.Errorf("Params %+v lack s = 12", d.Params)
	}
	d3, _ := mustNew(t, ksubset.Options{Categories: ldptest.Labels(100), S: 3}).Describe(context.Background())
	if d3.Digest == d.Digest {
		t.Error("s = 3 and s = 12 share a digest")
	}
}

// TestRandomizeMatchesDeclaration checks the sampler against its own
// declared matrix rows by Pearson's chi-square (ldptest.CheckOutputs at
// ldptest.Alpha), reading each report through Outputs, at each bucket of
// a small configuration and an unknown label (the other bucket).
func TestRandomizeMatchesDeclaration(t *testing.T) {
	ctx := context.Background()
	const draws = 30_000 // C(6, 2) = 15 outputs: the smallest expected count is above 30 000/(5e^3+10) ≈ 270
	for _, eps0 := range []float64{0.5, 3} {
		r := mustNew(t, ksubset.Options{Categories: ldptest.Labels(5), Other: "other", S: 2, Rand: ldptest.Seeded(uint64(eps0 * 10))})
		d, err := r.Declaration(eps0, accountant.FormMatrix)
		if err != nil {
			t.Fatal(err)
		}
		for x, label := range append(ldptest.Labels(5), "unknown") {
			reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Categories: slices.Repeat([]string{label}, draws)})
			if err != nil {
				t.Fatal(err)
			}
			decode := func(rep []byte) (int, error) {
				o, err := r.Outputs(ctx, eps0, [][]byte{rep})
				if err != nil {
					return 0, err
				}
				return o[0], nil
			}
			ldptest.CheckOutputs(t, fmt.Sprintf("eps0=%g input %q", eps0, label), reports, decode, ldptest.MatrixRow(d.Matrix, x))
		}
	}
}

func TestEstimateUnbiased(t *testing.T) {
	ldptest.CheckEstimateUnbiased(t, newKSubset, "")
}

func TestEstimateItems(t *testing.T) {
	ldptest.CheckEstimateItems(t, newKSubset)
}

// TestEstimateRejectsCounts: counts that do not sum to s·N cannot come
// from reports of s buckets each.
func TestEstimateRejectsCounts(t *testing.T) {
	ctx := context.Background()
	r := mustNew(t, ksubset.Options{Categories: ldptest.Labels(10), S: 3, Rand: ldptest.Seeded(5)})
	stat := ldptest.Statistic(t, r, 1, sdk.Inputs{Categories: ldptest.Cycle(ldptest.Labels(10), 100)})
	if _, err := r.Estimate(ctx, stat); err != nil {
		t.Fatal(err)
	}
	stat.Counts[0]--
	if _, err := r.Estimate(ctx, stat); !errors.Is(err, sdk.ErrBadStatistic) {
		t.Errorf("counts summing to s·N - 1: error = %v, want ErrBadStatistic", err)
	}
}

func TestMalformed(t *testing.T) {
	r := mustNew(t, ksubset.Options{Categories: ldptest.Labels(12), S: 3})
	valid := [][]byte{ldp.EncodeBitmap([]int{0, 5, 11}, 12), ldp.EncodeBitmap([]int{1, 2, 3}, 12)}
	malformed := [][]byte{
		nil, {}, {0x07},
		{0x07, 0x00, 0x00},        // a byte too many
		{0x03, 0x00},              // 2 bits
		{0x0f, 0x00},              // 4 bits
		{0x03, 0x10},              // bit 12 of 12
		ldp.EncodeBitmap(nil, 12), // none
	}
	decode := func(rep []byte) error { _, err := r.Decode(rep); return err }
	ldptest.CheckMalformed(t, r, decode, valid, malformed, map[int]int64{0: 1, 1: 1, 5: 1, 11: 1, 4: 0})
}

func TestMerge(t *testing.T) {
	r := mustNew(t, ksubset.Options{Categories: ldptest.Labels(20), S: 4})
	ldptest.CheckMerge(t, r, sdk.Inputs{Categories: ldptest.Cycle(ldptest.Labels(20), 1000)}, []byte{1})
}

func TestCanceled(t *testing.T) {
	ldptest.CheckCanceled(t, mustNew(t, ksubset.Options{Categories: ldptest.Labels(3)}), sdk.Inputs{Categories: []string{"c0"}})
}

func TestConcurrentUse(t *testing.T) {
	r := mustNew(t, ksubset.Options{Categories: ldptest.Labels(40), S: 5})
	ldptest.CheckConcurrentUse(t, r, sdk.Inputs{Categories: ldptest.Cycle(ldptest.Labels(40), 500)}, false)
}

// FuzzAccumulate feeds arbitrary bytes as reports of a 13-bucket, s = 3
// configuration: Accumulate never panics and counts a report valid
// exactly when Decode accepts it, every decoded subset has 3 distinct
// buckets below 13 and re-encodes to the same bytes, and Outputs maps it
// to a rank below C(13, 3) = 286 or fails with sdk.ErrBadReport.
func FuzzAccumulate(f *testing.F) {
	r, err := ksubset.New(ksubset.Options{Categories: ldptest.Labels(13), S: 3})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range [][]byte{nil, {0x07, 0x00}, {0x00, 0x1c}, {0x00, 0x20}, {0xff, 0xff}, {0x01, 0x01, 0x01}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, report []byte) {
		ctx := context.Background()
		stat, err := r.Accumulate(ctx, 1, [][]byte{report})
		if err != nil {
			t.Fatal(err)
		}
		members, err := r.Decode(report)
		out, oerr := r.Outputs(ctx, 1, [][]byte{report})
		if err != nil {
			if !errors.Is(err, sdk.ErrBadReport) || !errors.Is(oerr, sdk.ErrBadReport) || stat.N != 0 || stat.Malformed != 1 {
				t.Fatalf("rejected report %x: %v, Outputs %v, statistic %+v", report, err, oerr, stat)
			}
			return
		}
		if stat.N != 1 || len(members) != 3 || members[2] >= 13 || !slices.IsSorted(members) {
			t.Fatalf("accepted report %x: members %v, statistic %+v", report, members, stat)
		}
		if re := ldp.EncodeBitmap(members, 13); !slices.Equal(re, report) {
			t.Fatalf("re-encoded %x as %x", report, re)
		}
		if oerr != nil || out[0] < 0 || out[0] >= 286 {
			t.Fatalf("Outputs(%x) = %v, %v", report, out, oerr)
		}
	})
}
