package collector

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/internal/servertest"
)

// TestCollectorRefusesAFloorForNow: a plan with a floor is refused at open
// with an error that names it: this collector would count the shuffler's
// blanket draws in its estimates as apps' reports.
func TestCollectorRefusesAFloorForNow(t *testing.T) {
	p := testPlan(t, 10)
	p.Floor = 100
	dir := t.TempDir()
	c, err := OpenCollector(context.Background(), CollectorOptions{Plan: p, Dir: dir, Store: servertest.Store(t, dir), Open: openBuiltin, Token: testToken, Logger: testLogger(t)})
	if err == nil {
		c.Close()
		t.Fatal("OpenCollector took a plan with a floor")
	}
	if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "floor = 100") {
		t.Fatalf("err = %v, want ErrOptions naming floor = 100", err)
	}
}
