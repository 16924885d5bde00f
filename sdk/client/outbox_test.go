package client_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/report"
)

// outboxes returns a fresh outbox of each implementation.
func outboxes(t *testing.T) map[string]func() client.Outbox {
	return map[string]func() client.Outbox{
		"memory": func() client.Outbox { return client.NewMemoryOutbox() },
		"sqlite": func() client.Outbox {
			o, err := client.OpenSQLiteOutbox(context.Background(), filepath.Join(t.TempDir(), "outbox.db"))
			if err != nil {
				t.Fatal(err)
			}
			return o
		},
	}
}

func entry(metric, day string, local bool) client.Entry {
	return client.Entry{
		Envelope: report.Envelope{ID: report.NewID(), Metric: metric, Suite: report.SuiteX25519ChaCha, Sealed: []byte("sealed " + metric)},
		Day:      day,
		Eps0:     1.5,
		Local:    local,
	}
}

// TestOutbox checks the Outbox contract on every implementation.
func TestOutbox(t *testing.T) {
	ctx := context.Background()
	for name, open := range outboxes(t) {
		t.Run(name, func(t *testing.T) {
			o := open()
			defer o.Close()
			var added []client.Entry
			for i := range 6 {
				e := entry([]string{"a", "b"}[i%2], "2026-01-0"+string(rune('1'+i/3)), i == 4)
				if err := o.Add(ctx, e, 0); err != nil {
					t.Fatal(err)
				}
				added = append(added, e)
			}
			if err := o.Add(ctx, added[0], 0); err == nil {
				t.Error("adding an id twice succeeded")
			}
			// Pending: oldest first, local entries excluded, limit honoured.
			got, err := o.Pending(ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			want := []int{0, 1, 2}
			if len(got) != len(want) {
				t.Fatalf("Pending(3) = %d envelopes, want 3", len(got))
			}
			for i, j := range want {
				if got[i].ID != added[j].Envelope.ID || got[i].Metric != added[j].Envelope.Metric || string(got[i].Sealed) != string(added[j].Envelope.Sealed) || got[i].Suite != report.SuiteX25519ChaCha {
					t.Errorf("Pending[%d] = %+v, want entry %d", i, got[i], j)
				}
			}
			if err := o.Ack(ctx, []report.ID{added[0].Envelope.ID, added[2].Envelope.ID, report.NewID()}); err != nil {
				t.Fatal(err)
			}
			got, _ = o.Pending(ctx, 100)
			for i, j := range []int{1, 3, 5} {
				if i >= len(got) || got[i].ID != added[j].Envelope.ID {
					t.Fatalf("after Ack, Pending = %d envelopes, want entries 1, 3, 5", len(got))
				}
			}
			if len(got) != 3 {
				t.Fatalf("after Ack, Pending = %d envelopes, want 3", len(got))
			}
			// DropLocal removes local entries before the day only.
			if n, err := o.DropLocal(ctx, "2026-01-02"); err != nil || n != 0 {
				t.Errorf("DropLocal(2026-01-02) = %d, %v; want 0 (the local entry is of that day)", n, err)
			}
			if n, err := o.DropLocal(ctx, "2026-01-03"); err != nil || n != 1 {
				t.Errorf("DropLocal(2026-01-03) = %d, %v; want 1", n, err)
			}
			l, err := o.Ledger(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Acks and drops leave the ledger alone. eps0 sums of 1.5 are
			// exact in floating point.
			wantL := []client.LedgerEntry{
				{Day: "2026-01-01", Metric: "a", Reports: 2, Eps0: 3},
				{Day: "2026-01-01", Metric: "b", Reports: 1, Eps0: 1.5},
				{Day: "2026-01-02", Metric: "a", LocalReports: 1}, // entry 4, local: not charged
				{Day: "2026-01-02", Metric: "b", Reports: 2, Eps0: 3},
			}
			if len(l) != len(wantL) {
				t.Fatalf("ledger = %+v, want %+v", l, wantL)
			}
			for i := range wantL {
				if l[i] != wantL[i] {
					t.Errorf("ledger[%d] = %+v, want %+v", i, l[i], wantL[i])
				}
			}
			// The daily limit counts local and uploadable reports, and a
			// refused Add stores nothing.
			if err := o.Add(ctx, entry("a", "2026-01-02", false), 1); !errors.Is(err, client.ErrDailyLimit) {
				t.Errorf("Add over the limit: %v, want ErrDailyLimit", err)
			}
			if err := o.Add(ctx, entry("a", "2026-01-02", false), 2); err != nil {
				t.Errorf("Add at the limit: %v", err)
			}
			if err := o.Add(ctx, entry("c", "2026-01-02", true), 1); err != nil {
				t.Errorf("Add of a new metric with limit 1: %v", err)
			}
			got, _ = o.Pending(ctx, 100)
			if len(got) != 4 {
				t.Errorf("Pending = %d envelopes, want 4", len(got))
			}
		})
	}
}

// TestSQLiteOutboxReopen checks that the SQLite outbox keeps its contents
// across a close and reopen.
func TestSQLiteOutboxReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outbox.db")
	o, err := client.OpenSQLiteOutbox(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	e := entry("a", "2026-01-01", false)
	if err := o.Add(ctx, e, 0); err != nil {
		t.Fatal(err)
	}
	o.Close()
	o, err = client.OpenSQLiteOutbox(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	got, err := o.Pending(ctx, 10)
	if err != nil || len(got) != 1 || got[0].ID != e.Envelope.ID {
		t.Fatalf("after reopen: Pending = %v, %v", got, err)
	}
	if l, _ := o.Ledger(ctx); len(l) != 1 || l[0].Reports != 1 {
		t.Errorf("after reopen: ledger = %+v", l)
	}
}
