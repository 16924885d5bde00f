package plugintest

import (
	"testing"

	"github.com/blanket-dp/blanket/sdk"
)

// Run verifies r in a Go test: one subtest per check, failed tests reported
// with t.Errorf, skipped ones logged (a check with nothing to test is
// skipped with t.Skip). It stops the test with t.Fatal when Verify returns
// an error (invalid Options, canceled context). A plugin author calls it
// from a test of each configuration worth checking, including a small one:
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
					t.Errorf("%s: %s", tt.Name, tt.Message)
				case Skip:
					t.Logf("skipped %s: %s", tt.Name, tt.Message)
				}
			}
			if c.Status == Skip {
				t.Skip("nothing to test on this configuration")
			}
		})
	}
}
