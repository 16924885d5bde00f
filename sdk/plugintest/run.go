package plugintest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/sdk"
)

// Run verifies r in a Go test: one subtest per check, skipped tests logged
// (a check with nothing to test is skipped with t.Skip), and each failed
// test reported with t.Errorf on t itself, so that the failure points at
// the caller's line (the call of Run), with its statistic, threshold,
// p-value and false-failure share; its check's subtest is marked failed
// too. It stops the test with t.Fatal when Verify returns an error
// (invalid Options, canceled context). A plugin author calls it from a
// test of each configuration worth checking, including a small one:
//
//	func TestConformance(t *testing.T) {
//		r, err := myplugin.New(myplugin.Options{Categories: []string{"a", "b", "c"}})
//		if err != nil {
//			t.Fatal(err)
//		}
//		plugintest.Run(t, r, plugintest.Options{})
//	}
func Run(t *testing.T, r sdk.Randomizer, opts Options) {
	t.Helper()
	rep, err := Verify(t.Context(), r, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Checks {
		t.Run(c.Name, func(t *testing.T) {
			for _, tt := range c.Tests {
				switch tt.Status {
				case Fail:
					t.Fail() // the message is on the parent, at the caller's line
				case Skip:
					t.Logf("skipped %s: %s", tt.Name, tt.Message)
				}
			}
			if c.Status == Skip {
				t.Skip("nothing to test on this configuration")
			}
		})
		for _, tt := range c.Tests {
			if tt.Status == Fail {
				t.Errorf("%s", failure(c.Name, tt))
			}
		}
	}
}

// failure formats a failed test of check: its name, message and the
// figures of its statistical test when it has them.
func failure(check string, tt Test) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s: %s", check, tt.Name, tt.Message)
	var figs []string
	if tt.Statistic != 0 {
		s := fmt.Sprintf("statistic %.6g", tt.Statistic)
		if tt.DF != 0 {
			s += fmt.Sprintf(" (%.6g degrees of freedom)", tt.DF)
		}
		figs = append(figs, s)
	}
	if tt.Threshold != 0 {
		figs = append(figs, fmt.Sprintf("threshold %.6g", tt.Threshold))
	}
	if tt.PValue != 0 {
		figs = append(figs, fmt.Sprintf("p-value %.3g", tt.PValue))
	}
	if tt.Alpha != 0 {
		figs = append(figs, fmt.Sprintf("its share of the false-failure rate %.3g", tt.Alpha))
	}
	if len(figs) > 0 {
		fmt.Fprintf(&b, " [%s]", strings.Join(figs, ", "))
	}
	return b.String()
}
