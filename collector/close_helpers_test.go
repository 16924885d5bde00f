package collector

import (
	"context"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/collector/shuffler"
)

// closeAll closes every period of s's pooled reports, ending up to two
// days from now (shuffler.ClosePeriods), so that its next Release takes
// each pool whole, as at the period's deadline: while a period is open
// the shuffler keeps its last n_min reports pooled.
func closeAll(t testing.TB, s *shuffler.Shuffler) {
	t.Helper()
	if _, err := s.ClosePeriods(context.Background(), time.Now().Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
}
