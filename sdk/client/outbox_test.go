package client_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk"
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

// dayPeriod returns the 24 h period starting on the UTC day, "2006-01-02".
func dayPeriod(day string) report.Period {
	d, err := time.Parse(time.DateOnly, day)
	if err != nil {
		panic(err)
	}
	return report.Period{Start: d.Unix(), Length: 86400}
}

// sealedClose returns the closing of metric's period of day with an
// envelope charging eps0 1.5.
func sealedClose(metric, day string, local bool) client.PeriodClose {
	p := dayPeriod(day)
	return client.PeriodClose{
		Pool:     metric,
		Period:   p,
		Envelope: &report.Envelope{ID: report.NewID(), Metric: report.PeriodPoolKey(metric, "e1", p), Suite: report.SuiteX25519ChaCha, Sealed: []byte("sealed " + metric)},
		Local:    local,
		Epoch:    "e1",
		Charges:  []client.Charge{{Metric: metric, Eps0: 1.5}},
	}
}

// TestOutbox checks the envelopes and the ledger of the Outbox contract on
// every implementation.
func TestOutbox(t *testing.T) {
	ctx := context.Background()
	for name, open := range outboxes(t) {
		t.Run(name, func(t *testing.T) {
			o := open()
			defer o.Close()
			var added []client.PeriodClose
			for i := range 6 {
				c := sealedClose([]string{"a", "b", "c"}[i%3], "2026-01-0"+string(rune('1'+i/3)), i == 4)
				if err := o.ClosePeriod(ctx, c); err != nil {
					t.Fatal(err)
				}
				added = append(added, c)
			}
			// A period closes once: a second envelope for it is refused.
			again := sealedClose("a", "2026-01-01", false)
			if err := o.ClosePeriod(ctx, again); !errors.Is(err, client.ErrPeriodClosed) {
				t.Errorf("second envelope for a closed period: %v, want ErrPeriodClosed", err)
			}
			// Pending: oldest first, local entries excluded, limit honoured.
			got, err := o.Pending(ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 3 {
				t.Fatalf("Pending(3) = %d envelopes, want 3", len(got))
			}
			for i := range got {
				want := added[i].Envelope
				if got[i].ID != want.ID || got[i].Metric != want.Metric || string(got[i].Sealed) != string(want.Sealed) || got[i].Suite != report.SuiteX25519ChaCha {
					t.Errorf("Pending[%d] = %+v, want entry %d", i, got[i], i)
				}
			}
			// Sending says which envelopes an upload carried before;
			// an unknown id counts as sent.
			unknownID := report.NewID()
			for i, want := range [][]bool{{false, false, true}, {true, true, true}} {
				if sent, err := o.Sending(ctx, []report.ID{added[0].Envelope.ID, added[1].Envelope.ID, unknownID}); err != nil || !slices.Equal(sent, want) {
					t.Errorf("Sending #%d = %v, %v; want %v", i+1, sent, err, want)
				}
			}
			if err := o.Ack(ctx, []report.ID{added[0].Envelope.ID, added[2].Envelope.ID, report.NewID()}, client.UploadAcknowledged); err != nil {
				t.Fatal(err)
			}
			got, _ = o.Pending(ctx, 100)
			if len(got) != 3 {
				t.Fatalf("after Ack, Pending = %d envelopes, want 3", len(got))
			}
			for i, j := range []int{1, 3, 5} {
				if got[i].ID != added[j].Envelope.ID {
					t.Fatalf("after Ack, Pending[%d] is not entry %d", i, j)
				}
			}
			// Entry 3 is refused by the shuffler, entry 5 dropped after a
			// 400: both leave the outbox. A later Ack of entry 3 changes
			// nothing (its state is set once), and an Ack must say what
			// became of the envelopes.
			if err := o.Ack(ctx, []report.ID{added[3].Envelope.ID}, client.UploadRefused); err != nil {
				t.Fatal(err)
			}
			if err := o.Ack(ctx, []report.ID{added[5].Envelope.ID}, client.UploadDropped); err != nil {
				t.Fatal(err)
			}
			if err := o.Ack(ctx, []report.ID{added[3].Envelope.ID}, client.UploadAcknowledged); err != nil {
				t.Fatal(err)
			}
			if err := o.Ack(ctx, []report.ID{added[1].Envelope.ID}, client.UploadPending); err == nil {
				t.Error("Ack with UploadPending succeeded")
			}
			if got, _ = o.Pending(ctx, 100); len(got) != 1 || got[0].ID != added[1].Envelope.ID {
				t.Fatalf("after the refusal and the drop, Pending = %+v, want entry 1 alone", got)
			}
			// DropLocal removes local entries of periods starting before
			// the day only.
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
			// Acks and drops keep the charges, but for the refusal, and
			// say what became of each report.
			d1, d2 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
			wantL := []client.LedgerEntry{
				{Start: d1, End: d2, Metric: "a", Epoch: "e1", Reports: 1, Eps0: 1.5, Upload: client.UploadAcknowledged},
				{Start: d1, End: d2, Metric: "b", Epoch: "e1", Reports: 1, Eps0: 1.5, Upload: client.UploadPending},
				{Start: d1, End: d2, Metric: "c", Epoch: "e1", Reports: 1, Eps0: 1.5, Upload: client.UploadAcknowledged},
				{Start: d2, End: d2.Add(day), Metric: "a", Epoch: "e1", Upload: client.UploadRefused, RefusedEps0: 1.5},      // entry 3: not charged
				{Start: d2, End: d2.Add(day), Metric: "b", Epoch: "e1", LocalReports: 1, Upload: client.UploadLocal},         // entry 4, local: not charged
				{Start: d2, End: d2.Add(day), Metric: "c", Epoch: "e1", Reports: 1, Eps0: 1.5, Upload: client.UploadDropped}, // entry 5: charged
			}
			if len(l) != len(wantL) {
				t.Fatalf("ledger = %+v, want %+v", l, wantL)
			}
			for i := range wantL {
				if l[i] != wantL[i] {
					t.Errorf("ledger[%d] = %+v, want %+v", i, l[i], wantL[i])
				}
			}
			// An envelope id stored twice is refused.
			dup := sealedClose("d", "2026-01-01", false)
			dup.Envelope.ID = added[1].Envelope.ID
			if err := o.ClosePeriod(ctx, dup); err == nil {
				t.Error("storing an id twice succeeded")
			}
			// A refused message takes back the charge of every metric it
			// carries.
			joint := sealedClose("@joint", "2026-01-03", false)
			joint.Charges = []client.Charge{{Metric: "x", Eps0: 0.5}, {Metric: "y", Eps0: 0.25}}
			if err := o.ClosePeriod(ctx, joint); err != nil {
				t.Fatal(err)
			}
			if err := o.Ack(ctx, []report.ID{joint.Envelope.ID}, client.UploadRefused); err != nil {
				t.Fatal(err)
			}
			l, err = o.Ledger(ctx)
			if err != nil || len(l) != 8 {
				t.Fatalf("ledger = %+v, %v; want 8 entries", l, err)
			}
			d3 := d2.Add(day)
			for i, want := range []client.LedgerEntry{
				{Start: d3, End: d3.Add(day), Metric: "x", Epoch: "e1", Upload: client.UploadRefused, RefusedEps0: 0.5},
				{Start: d3, End: d3.Add(day), Metric: "y", Epoch: "e1", Upload: client.UploadRefused, RefusedEps0: 0.25},
			} {
				if l[6+i] != want {
					t.Errorf("ledger[%d] = %+v, want %+v", 6+i, l[6+i], want)
				}
			}
		})
	}
}

// TestOutboxStaging checks Stage, Draw and ClosePeriod on every outbox: a
// categorical value replaced, a sum added up (saturating), a draw staged
// once per period, a closing that must name exactly what is staged
// (ErrStalePeriod otherwise, changing nothing), and a closed period that
// never reopens (ErrPeriodClosed).
func TestOutboxStaging(t *testing.T) {
	ctx := context.Background()
	p1, p2 := dayPeriod("2026-01-01"), dayPeriod("2026-01-02")
	for name, open := range outboxes(t) {
		t.Run(name, func(t *testing.T) {
			o := open()
			defer o.Close()
			stage := func(v client.Value) client.Value {
				t.Helper()
				got, err := o.Stage(ctx, v)
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			cat := func(c string) client.Value {
				return client.Value{Pool: "@joint", Period: p1, Metric: "screen", Plan: "d1", Kind: sdk.InputCategorical, Category: c}
			}
			sum := func(x float64) client.Value {
				return client.Value{Pool: "@joint", Period: p1, Metric: "bytes", Plan: "d1", Kind: sdk.InputReal, Sum: x}
			}
			stage(cat("home"))
			screen := stage(cat("search"))
			if screen.Category != "search" || screen.Count != 2 {
				t.Errorf("categorical value %q of %d Stages, want the last, search, of 2", screen.Category, screen.Count)
			}
			stage(sum(30))
			bytes := stage(client.Value{Pool: "@joint", Period: p1, Metric: "bytes", Plan: "d1", Kind: sdk.InputReal, Sum: -45.5, Count: 99})
			if bytes.Sum != -15.5 || bytes.Count != 100 {
				t.Errorf("sum %v of %d Records, want the total -15.5 of 100 (a Stage of Count 99 merges 99 Records)", bytes.Sum, bytes.Count)
			}
			// Count <= 0 is one Record; a Count that would overflow saturates.
			if bytes = stage(client.Value{Pool: "@joint", Period: p1, Metric: "bytes", Plan: "d1", Kind: sdk.InputReal, Sum: 0.5, Count: -3}); bytes.Count != 101 {
				t.Errorf("a Stage of Count -3 made the count %d, want 101", bytes.Count)
			}
			if bytes = stage(client.Value{Pool: "@joint", Period: p1, Metric: "bytes", Plan: "d1", Kind: sdk.InputReal, Count: math.MaxInt64}); bytes.Count != math.MaxInt64 || bytes.Sum != -15 {
				t.Errorf("a Stage of Count MaxInt64 made the count %d and the sum %v, want MaxInt64 and -15", bytes.Count, bytes.Sum)
			}
			// Another plan's value of the same metric and period is apart.
			other := stage(client.Value{Pool: "@joint", Period: p1, Metric: "bytes", Plan: "d0", Kind: sdk.InputReal, Sum: 1})
			huge := stage(client.Value{Pool: "bytes", Period: p2, Metric: "bytes", Plan: "d1", Kind: sdk.InputReal, Sum: math.MaxFloat64})
			huge = stage(huge)
			if huge.Sum != math.MaxFloat64 || huge.Count != 2 {
				t.Errorf("sum of two MaxFloat64: %v of %d Stages, want it saturated at MaxFloat64, of 2", huge.Sum, huge.Count)
			}
			got, err := o.Staged(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := []client.Value{other, bytes, screen, huge}
			if len(got) != len(want) {
				t.Fatalf("staged %+v, want %+v", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("staged[%d] = %+v, want %+v", i, got[i], want[i])
				}
			}
			// The first draw of a period stands.
			d := client.Draw{Pool: "@joint", Period: p1, Plan: "d1", Metric: "screen"}
			if got, err := o.Draw(ctx, d); err != nil || got != d {
				t.Fatalf("first draw: %+v, %v", got, err)
			}
			if got, err := o.Draw(ctx, client.Draw{Pool: "@joint", Period: p1, Plan: "d1", Metric: "bytes"}); err != nil || got != d {
				t.Fatalf("second draw: %+v, %v; want the first to stand", got, err)
			}

			// A closing naming a changed value, or not every value, or
			// not the draw, changes nothing.
			env := &report.Envelope{ID: report.NewID(), Metric: "@joint#e#1+1", Suite: report.SuiteX25519ChaCha, Sealed: []byte("x")}
			c := client.PeriodClose{Pool: "@joint", Period: p1, Envelope: env, Epoch: "e", Charges: []client.Charge{{Metric: "screen", Eps0: 1}, {Metric: "bytes", Eps0: 1}},
				Unstage: []client.Value{screen, bytes, other}, Undraw: []client.Draw{d}}
			screen2 := stage(cat("settings"))
			for what, bad := range map[string]client.PeriodClose{
				"changed value": c,
				"missing value": {Pool: c.Pool, Period: c.Period, Envelope: env, Unstage: []client.Value{screen2, bytes}, Undraw: c.Undraw},
				"missing draw":  {Pool: c.Pool, Period: c.Period, Envelope: env, Unstage: []client.Value{screen2, bytes, other}},
			} {
				if err := o.ClosePeriod(ctx, bad); !errors.Is(err, client.ErrStalePeriod) {
					t.Errorf("%s: %v, want ErrStalePeriod", what, err)
				}
			}
			if p, _ := o.Pending(ctx, 10); len(p) != 0 {
				t.Fatalf("the refused closings stored %d reports", len(p))
			}
			if l, _ := o.Ledger(ctx); len(l) != 0 {
				t.Fatalf("the refused closings charged %+v", l)
			}
			if got, _ := o.Staged(ctx); len(got) != 4 {
				t.Fatalf("the refused closings unstaged values: %+v", got)
			}
			c.Unstage[0] = screen2
			if err := o.ClosePeriod(ctx, c); err != nil {
				t.Fatal(err)
			}
			if got, err := o.Staged(ctx); err != nil || len(got) != 1 || got[0] != huge {
				t.Fatalf("after closing: staged %+v, %v; want the other period's value alone", got, err)
			}
			if ds, err := o.Draws(ctx); err != nil || len(ds) != 0 {
				t.Fatalf("after closing: draws %+v, %v; want none", ds, err)
			}
			if l, _ := o.Ledger(ctx); len(l) != 2 || l[0].Metric != "bytes" || l[1].Metric != "screen" || l[0].Reports != 1 {
				t.Fatalf("ledger %+v, want bytes and screen charged once", l)
			}
			// The period is closed for the pool, for good.
			if _, err := o.Stage(ctx, cat("home")); !errors.Is(err, client.ErrPeriodClosed) {
				t.Errorf("Stage into the closed period: %v, want ErrPeriodClosed", err)
			}
			if _, err := o.Draw(ctx, d); !errors.Is(err, client.ErrPeriodClosed) {
				t.Errorf("Draw in the closed period: %v, want ErrPeriodClosed", err)
			}
			// It is closed for the metrics the envelope carried too, in
			// any pool (another plan's travel, another process's).
			if _, err := o.Stage(ctx, client.Value{Pool: "screen", Period: p1, Metric: "screen", Plan: "d2", Kind: sdk.InputCategorical, Category: "x"}); !errors.Is(err, client.ErrPeriodClosed) {
				t.Errorf("Stage of a carried metric into another pool of the period: %v, want ErrPeriodClosed", err)
			}
			if _, err := o.Draw(ctx, client.Draw{Pool: "@parallel", Period: p1, Plan: "d2", Metric: "bytes"}); !errors.Is(err, client.ErrPeriodClosed) {
				t.Errorf("Draw of a carried metric in the period: %v, want ErrPeriodClosed", err)
			}
			// Other metrics' pools of the period are open; closing without
			// an envelope drops values and charges nothing.
			if _, err := o.Stage(ctx, client.Value{Pool: "feature", Period: p1, Metric: "feature", Plan: "d2", Kind: sdk.InputCategorical, Category: "x"}); err != nil {
				t.Fatalf("Stage into another pool of the period: %v", err)
			}
			if err := o.ClosePeriod(ctx, client.PeriodClose{Pool: "bytes", Period: p2, Unstage: []client.Value{huge}}); err != nil {
				t.Fatal(err)
			}
			if l, _ := o.Ledger(ctx); len(l) != 2 {
				t.Errorf("closing without an envelope charged: %+v", l)
			}
		})
	}
}

// TestSQLiteOutboxReopen checks that the SQLite outbox keeps its contents
// across a close and reopen: envelopes, ledger, staged values, draws and
// closed periods.
func TestSQLiteOutboxReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outbox.db")
	o, err := client.OpenSQLiteOutbox(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	c := sealedClose("a", "2026-01-01", false)
	if err := o.ClosePeriod(ctx, c); err != nil {
		t.Fatal(err)
	}
	v, err := o.Stage(ctx, client.Value{Pool: "b", Period: dayPeriod("2026-01-01"), Metric: "b", Plan: "d", Kind: sdk.InputReal, Sum: 2.5})
	if err != nil {
		t.Fatal(err)
	}
	d, err := o.Draw(ctx, client.Draw{Pool: "@parallel", Period: dayPeriod("2026-01-01"), Plan: "d", Metric: "b"})
	if err != nil {
		t.Fatal(err)
	}
	o.Close()
	o, err = client.OpenSQLiteOutbox(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	got, err := o.Pending(ctx, 10)
	if err != nil || len(got) != 1 || got[0].ID != c.Envelope.ID {
		t.Fatalf("after reopen: Pending = %v, %v", got, err)
	}
	if l, _ := o.Ledger(ctx); len(l) != 1 || l[0].Reports != 1 {
		t.Errorf("after reopen: ledger = %+v", l)
	}
	if vs, err := o.Staged(ctx); err != nil || len(vs) != 1 || vs[0] != v {
		t.Errorf("after reopen: staged %+v, %v; want %+v", vs, err, v)
	}
	if ds, err := o.Draws(ctx); err != nil || len(ds) != 1 || ds[0] != d {
		t.Errorf("after reopen: draws %+v, %v; want %+v", ds, err, d)
	}
	if _, err := o.Stage(ctx, client.Value{Pool: "a", Period: dayPeriod("2026-01-01"), Metric: "a", Plan: "d", Kind: sdk.InputReal}); !errors.Is(err, client.ErrPeriodClosed) {
		t.Errorf("after reopen: Stage into the closed period: %v, want ErrPeriodClosed", err)
	}
}

// TestOutboxTokens checks the admission tokens of the Outbox contract on
// every implementation: a stored request until it is settled, a pool key
// in one request at a time, the answer replacing what a pool key held,
// envelopes with a token uploaded apart from those without (which do not
// hold them back), Ack spending the token, and ForgetTokens past the
// deadline.
func TestOutboxTokens(t *testing.T) {
	ctx := context.Background()
	for name, open := range outboxes(t) {
		t.Run(name, func(t *testing.T) {
			o := open()
			defer o.Close()
			// Three envelopes, oldest first: a and c will get a token, b not.
			var cs []client.PeriodClose
			for _, m := range []string{"a", "b", "c"} {
				c := sealedClose(m, "2026-01-01", false)
				if err := o.ClosePeriod(ctx, c); err != nil {
					t.Fatal(err)
				}
				cs = append(cs, c)
			}
			key := func(i int) string { return cs[i].Envelope.Metric }
			id, err := o.AddTokenRequest(ctx, client.TokenRequest{Pools: []string{key(0), key(1), key(2)}, Pending: []byte("blinds"), Deadline: 100})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := o.AddTokenRequest(ctx, client.TokenRequest{Pools: []string{"x", key(1)}, Pending: []byte("other"), Deadline: 100}); err == nil {
				t.Error("a second request of a pool key in a stored request was stored")
			}
			reqs, err := o.TokenRequests(ctx)
			if err != nil || len(reqs) != 1 || reqs[0].ID != id || !slices.Equal(reqs[0].Pools, []string{key(0), key(1), key(2)}) || string(reqs[0].Pending) != "blinds" || reqs[0].Deadline != 100 {
				t.Fatalf("TokenRequests = %+v, %v; want the one stored", reqs, err)
			}
			if tl, err := o.Tokenless(ctx); err != nil || len(tl) != 3 {
				t.Fatalf("Tokenless before the answer = %+v, %v; want the 3 envelopes", tl, err)
			}
			answer := []client.PoolToken{
				{PoolKey: key(0), Token: []byte("token a"), Deadline: 100},
				{PoolKey: key(1), Refused: "pool", Reason: "no", Deadline: 100},
				{PoolKey: key(2), Token: []byte("token c"), Deadline: 200},
			}
			if err := o.SettleTokenRequest(ctx, id, answer); err != nil {
				t.Fatal(err)
			}
			if err := o.SettleTokenRequest(ctx, id, []client.PoolToken{{PoolKey: key(0), Token: []byte("again"), Deadline: 100}}); err != nil {
				t.Fatalf("settling a request settled already: %v", err)
			}
			if reqs, _ := o.TokenRequests(ctx); len(reqs) != 0 {
				t.Errorf("TokenRequests after settling = %+v, want none", reqs)
			}
			if _, err := o.AddTokenRequest(ctx, client.TokenRequest{Pools: []string{key(1)}, Pending: []byte("b again"), Deadline: 100}); err != nil {
				t.Errorf("a pool key of a settled request asked again: %v", err)
			}
			got, err := o.PendingWithToken(ctx, 10)
			if err != nil || len(got) != 2 || got[0].ID != cs[0].Envelope.ID || string(got[0].Token) != "token a" || got[1].ID != cs[2].Envelope.ID || string(got[1].Token) != "token c" {
				t.Fatalf("PendingWithToken = %+v, %v; want a and c with their tokens", got, err)
			}
			if got, _ := o.PendingWithToken(ctx, 1); len(got) != 1 || got[0].ID != cs[0].Envelope.ID {
				t.Errorf("PendingWithToken(1) = %+v, want a", got)
			}
			all, _ := o.Pending(ctx, 10)
			if len(all) != 3 || string(all[0].Token) != "token a" || all[1].Token != nil || string(all[2].Token) != "token c" {
				t.Errorf("Pending = %+v, want a, b, c, with the tokens of a and c", all)
			}
			if tl, err := o.Tokenless(ctx); err != nil || len(tl) != 1 || tl[0].ID != cs[1].Envelope.ID || tl[0].PoolKey != key(1) || tl[0].Sent {
				t.Errorf("Tokenless = %+v, %v; want b, not sent", tl, err)
			}
			if err := o.Ack(ctx, []report.ID{cs[0].Envelope.ID}, client.UploadAcknowledged); err != nil {
				t.Fatal(err)
			}
			if err := o.Ack(ctx, []report.ID{cs[1].Envelope.ID}, client.UploadNoToken); err != nil {
				t.Fatal(err)
			}
			pts, err := o.PoolTokens(ctx)
			if err != nil || len(pts) != 3 {
				t.Fatalf("PoolTokens = %+v, %v", pts, err)
			}
			byKey := map[string]client.PoolToken{}
			for _, pt := range pts {
				byKey[pt.PoolKey] = pt
			}
			if pt := byKey[key(0)]; !pt.Spent() || pt.Deadline != 100 {
				t.Errorf("the token of an acknowledged envelope: %+v, want spent", pt)
			}
			if pt := byKey[key(1)]; pt.Refused != "pool" || pt.Spent() {
				t.Errorf("a refused pool key: %+v, want the refusal", pt)
			}
			if pt := byKey[key(2)]; string(pt.Token) != "token c" {
				t.Errorf("the token of an envelope not acknowledged: %+v", pt)
			}
			l, _ := o.Ledger(ctx)
			for _, e := range l {
				if e.Metric == "b" && (e.Upload != client.UploadNoToken || e.Reports != 0 || e.Eps0 != 0) {
					t.Errorf("ledger of a report dropped for want of a token: %+v, want no_token and uncharged", e)
				}
			}
			if err := o.DiscardToken(ctx, key(2)); err != nil {
				t.Fatal(err)
			}
			if got, _ := o.PendingWithToken(ctx, 10); len(got) != 0 {
				t.Errorf("PendingWithToken after the token was discarded = %+v, want none", got)
			}
			if n, err := o.ForgetTokens(ctx, 100); err != nil || n != 3 {
				t.Errorf("ForgetTokens(100) = %d, %v; want the two pool keys and the request of deadline 100", n, err)
			}
			if pts, _ := o.PoolTokens(ctx); len(pts) != 0 {
				t.Errorf("PoolTokens after ForgetTokens = %+v", pts)
			}
			if reqs, _ := o.TokenRequests(ctx); len(reqs) != 0 {
				t.Errorf("TokenRequests after ForgetTokens = %+v", reqs)
			}
		})
	}
}
