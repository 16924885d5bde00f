package shuffler

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/internal/health"
)

// TestStoreReadiness checks the shuffler's store check against its
// write handle: ready while the writer is free; not ready while a
// transaction holds the writer past the probe's deadline (a wedged
// writer, with reads still answering); not ready, naming writes, when
// the write handle fails.
func TestStoreReadiness(t *testing.T) {
	f := newShufflerFixture(t, Options{Plan: testPlan(t, 1000), Collector: "http://127.0.0.1:1"})
	var store health.Check
	for _, c := range f.s.Checks() {
		if c.Name == "shuffler store" {
			store = c
		}
	}
	if store.Ready == nil {
		t.Fatal(`no "shuffler store" check`)
	}
	ready := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		return store.Ready(ctx)
	}
	if err := ready(); err != nil {
		t.Fatalf("fresh store: %v", err)
	}
	tx, err := sqliteDB(t, f.s).W.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ready(); err == nil || !strings.Contains(err.Error(), "writes") {
		t.Errorf("writer held by a transaction: %v, want an error naming writes", err)
	}
	tx.Rollback()
	if err := ready(); err != nil {
		t.Errorf("writer free again: %v", err)
	}
	sqliteDB(t, f.s).W.Close()
	if err := ready(); err == nil || !strings.Contains(err.Error(), "writes") {
		t.Errorf("write handle closed: %v, want an error naming writes", err)
	}
}
