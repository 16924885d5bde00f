package ldp_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

func TestCategoricalConfig(t *testing.T) {
	for _, tt := range []struct {
		name  string
		cfg   sdk.Config
		known []string
		ok    bool
		msg   string
	}{
		{"categories", sdk.Config{Categories: []string{"a", "b"}}, nil, true, ""},
		{"known parameter", sdk.Config{Params: map[string]string{"mode": "x"}}, []string{"mode"}, true, ""},
		{"range", sdk.Config{Hi: 1}, nil, false, "p takes categories, not a range [0, 1]"},
		{"no parameters", sdk.Config{Params: map[string]string{"k": "3"}}, nil, false, `p has no parameter "k"`},
		{"one parameter", sdk.Config{Params: map[string]string{"k": "3"}}, []string{"mode"}, false, `p has no parameter "k" (it has "mode")`},
		{"two parameters", sdk.Config{Params: map[string]string{"k": "3"}}, []string{"mode", "d"}, false, `(it has "mode", "d")`},
	} {
		err := ldp.CategoricalConfig("p", tt.cfg, tt.known...)
		if tt.ok != (err == nil) || (!tt.ok && (!errors.Is(err, sdk.ErrBadConfig) || !strings.Contains(err.Error(), tt.msg))) {
			t.Errorf("%s: error = %v, want ok = %v or ErrBadConfig saying %q", tt.name, err, tt.ok, tt.msg)
		}
	}
}

func TestFormFor(t *testing.T) {
	for _, tt := range []struct {
		size int
		want accountant.Form
	}{{2, accountant.FormMatrix}, {64, accountant.FormMatrix}, {65, accountant.FormAtoms}} {
		if got := ldp.FormFor(tt.size, 64); got != tt.want {
			t.Errorf("FormFor(%d, 64) = %q, want %q", tt.size, got, tt.want)
		}
	}
}

func TestUnsupportedForm(t *testing.T) {
	err := ldp.UnsupportedForm("p", accountant.FormGeneric)
	if !errors.Is(err, sdk.ErrBadConfig) || !strings.Contains(err.Error(), `p declares forms "matrix" and "atoms", not "generic"`) {
		t.Errorf("UnsupportedForm = %v", err)
	}
}

func TestDefaultSource(t *testing.T) {
	src := ldptest.Seeded(3)
	if got := ldp.DefaultSource(src); got != src {
		t.Error("DefaultSource replaced an injected source")
	}
	if _, ok := ldp.DefaultSource(nil).(*ldp.CryptoSource); !ok {
		t.Error("DefaultSource(nil) is not a CryptoSource")
	}
}

func TestDomainBatch(t *testing.T) {
	d, err := ldp.NewDomain([]string{"a", "b"}, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if idx, err := d.Batch("p", sdk.Inputs{Categories: []string{"b", "a"}}); err != nil || !slices.Equal(idx, []int{1, 0}) {
		t.Errorf("Batch = %v, %v", idx, err)
	}
	for name, in := range map[string]sdk.Inputs{
		"reals":   {Reals: []float64{1}},
		"both":    {Categories: []string{"a"}, Reals: []float64{1}},
		"unknown": {Categories: []string{"a", "x"}},
	} {
		if _, err := d.Batch("p", in); !errors.Is(err, sdk.ErrBadInput) {
			t.Errorf("%s: error = %v, want ErrBadInput", name, err)
		}
	}
}

func TestAccumulate(t *testing.T) {
	ctx := context.Background()
	desc := &sdk.Description{Name: "p", Digest: "d"}
	// Indices in [0, 300): 2-byte reports, {1, 43} is 299 and {1, 44} 300.
	reports := [][]byte{{0, 5}, nil, {0}, {0, 0, 1}, {1, 44}, {255, 255}, {1, 43}, {0, 5}}
	s, err := ldp.AccumulateIndices(ctx, desc, 1.5, 300, reports)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int64, 300)
	want[5], want[299] = 2, 1
	if s.Plugin != "p" || s.Digest != "d" || s.Eps0 != 1.5 || s.N != 3 || s.Malformed != 5 || !slices.Equal(s.Counts, want) {
		t.Errorf("AccumulateIndices = %+v", s)
	}
	// A custom decoder: even-length reports count their length, odd ones
	// are malformed.
	s, err = ldp.Accumulate(ctx, desc, 1, 5, [][]byte{{}, {1}, {1, 2}, {1, 2, 3}, {1, 2, 3, 4}}, func(counts []int64, r []byte) bool {
		if len(r)%2 == 1 {
			return false
		}
		counts[len(r)]++
		return true
	})
	if err != nil || s.N != 3 || s.Malformed != 2 || !slices.Equal(s.Counts, []int64{1, 0, 1, 0, 1}) {
		t.Errorf("Accumulate = %+v, %v", s, err)
	}
	if s, err := ldp.AccumulateIndices(ctx, desc, 1, 4, nil); err != nil || s.N != 0 || len(s.Counts) != 4 {
		t.Errorf("no reports: %+v, %v", s, err)
	}
	if _, err := ldp.AccumulateIndices(ctx, desc, 0, 4, reports); !errors.Is(err, sdk.ErrBadEps0) {
		t.Errorf("eps0 0: error = %v, want ErrBadEps0", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := ldp.AccumulateIndices(canceled, desc, 1, 4, [][]byte{{0}}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: error = %v, want context.Canceled", err)
	}
}

func TestNewEstimate(t *testing.T) {
	stat := &sdk.Statistic{Plugin: "p", Eps0: 2, N: 10, Malformed: 3, Counts: []int64{4, 6}}
	items := []sdk.Item{{Label: "a", Value: 4}, {Label: "b", Value: 6}}
	e := ldp.NewEstimate("p", stat, 0.9, items)
	if e.Plugin != "p" || e.Eps0 != 2 || e.N != 10 || e.Malformed != 3 || e.Confidence != 0.9 || !slices.Equal(e.Items, items) {
		t.Errorf("NewEstimate = %+v", e)
	}
}
