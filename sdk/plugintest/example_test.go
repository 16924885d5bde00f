package plugintest_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/sdk/plugintest"
)

// ExampleVerify checks a small k-RR configuration and prints each check's
// outcome. Frequencies are tested because three categories plus an other
// bucket are declared as a matrix. The seeded source makes the run
// reproducible; a plugin under test may use its default randomness.
func ExampleVerify() {
	r, err := krr.New(krr.Options{
		Categories: []string{"home", "search", "settings"},
		Other:      "other",
		Rand:       rand.NewChaCha8([32]byte{7}),
	})
	if err != nil {
		panic(err)
	}
	rep, err := plugintest.Verify(context.Background(), r, plugintest.Options{})
	if err != nil {
		panic(err)
	}
	for _, c := range rep.Checks {
		fmt.Printf("%-11s %s (%d tests)\n", c.Name, c.Status, len(c.Tests))
	}
	fmt.Println("passed:", rep.Passed())
	// Output:
	// describe    pass (10 tests)
	// declaration pass (18 tests)
	// frequencies pass (15 tests)
	// privacy     pass (9 tests)
	// draws       pass (3 tests)
	// estimator   pass (24 tests)
	// floor       pass (35 tests)
	// inputs      pass (26 tests)
	// reports     pass (30 tests)
	// statistics  pass (20 tests)
	// passed: true
}
