package shuffler_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/blanket-dp/blanket/collector/shuffler"
)

// Shuffle draws from crypto/rand when given a nil source; a seeded source
// makes the order reproducible, as in tests.
func ExampleShuffle() {
	reports := []string{"a", "b", "c", "d", "e"}
	shuffler.Shuffle(rand.NewChaCha8([32]byte{1}), reports)
	fmt.Println(reports)
	// Output: [b a d e c]
}
