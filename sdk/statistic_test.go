package sdk_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/blanket-dp/blanket/sdk"
)

func stat(n int64, counts ...int64) *sdk.Statistic {
	return &sdk.Statistic{Plugin: "krr", Digest: "abc", Eps0: 1, N: n, Malformed: 1, Counts: counts}
}

func TestMerge(t *testing.T) {
	s := stat(3, 1, 2)
	if err := s.Merge(stat(5, 4, 1)); err != nil {
		t.Fatal(err)
	}
	if s.N != 8 || s.Malformed != 2 || !slices.Equal(s.Counts, []int64{5, 3}) {
		t.Errorf("merged = %+v", s)
	}
	tests := map[string]*sdk.Statistic{
		"nil":      nil,
		"plugin":   {Plugin: "rappor", Digest: "abc", Eps0: 1, Counts: []int64{0, 0}},
		"digest":   {Plugin: "krr", Digest: "abd", Eps0: 1, Counts: []int64{0, 0}},
		"eps0":     {Plugin: "krr", Digest: "abc", Eps0: 2, Counts: []int64{0, 0}},
		"length":   {Plugin: "krr", Digest: "abc", Eps0: 1, Counts: []int64{0}},
		"overflow": {Plugin: "krr", Digest: "abc", Eps0: 1, N: math.MaxInt64, Counts: []int64{0, 0}},
	}
	for name, o := range tests {
		before := s.Clone()
		if err := s.Merge(o); !errors.Is(err, sdk.ErrBadStatistic) {
			t.Errorf("%s: error = %v, want ErrBadStatistic", name, err)
		}
		if s.N != before.N || !slices.Equal(s.Counts, before.Counts) {
			t.Errorf("%s: failed merge changed the statistic", name)
		}
	}
}

func TestCloneIsDeep(t *testing.T) {
	s := stat(3, 1, 2)
	c := s.Clone()
	c.Counts[0] = 100
	if s.Counts[0] != 1 {
		t.Error("Clone shares Counts")
	}
}

func TestInputKindString(t *testing.T) {
	for k, want := range map[sdk.InputKind]string{sdk.InputCategorical: "categorical", sdk.InputReal: "real", sdk.InputUnspecified: "unspecified", 7: "unspecified"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(k), got, want)
		}
	}
}
