//go:build audit

package collector

import (
	"context"
	"testing"
	"time"
)

// TestKeyRotationMidStreamDeep is TestKeyRotationMidStream's deep twin
// (make audit): 24 apps over 21 days, the key rotating as often as the
// plan allows (every period; a new key starts every other day, a period
// ahead of its publication), no outage. Every report the shuffler
// acknowledged is counted and opens (none malformed), in one epoch; at
// every step the plan lists a pending key, no more keys than the grace
// and the slack keep alive, and every key past its erasure time has lost
// its private half.
func TestKeyRotationMidStreamDeep(t *testing.T) {
	const nMin, apps, days = 8, 24, 21
	ctx := context.Background()
	r := newRotationRig(t, nMin, apps, 24*time.Hour)
	epoch := r.c.Epoch()
	for d := range days + 1 {
		if d < days {
			r.record(d)
		}
		r.nextDay(d)
		r.settle(d)
		// Keys alive: the pending one, the active one, and the retired
		// ones of the last grace plus slack (a key every other day).
		if ks := r.c.Plan().CollectorKeys; len(ks) > 4 {
			t.Fatalf("day %d: the plan lists %d keys: %+v", d, len(ks), ks)
		}
		ks, err := r.c.ReportKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range ks {
			if kept := privateKeyKept(t, r.c, k.ID); kept == (k.State == KeyDeleted) {
				t.Fatalf("day %d: key %s is %s, private half kept = %v", d, k.ID, k.State, kept)
			}
		}
	}
	var acked int64
	for _, pr := range r.apps {
		acked += pr.Stats().Accepted
	}
	if acked != apps*days {
		t.Fatalf("the shuffler acknowledged %d reports, want %d", acked, apps*days)
	}
	for d := range days {
		batches, err := r.c.st.batchList(ctx, metric, epoch, day(d))
		if err != nil {
			t.Fatal(err)
		}
		var n, malformed int64
		for _, b := range batches {
			n, malformed = n+b.n, malformed+b.malformed
		}
		if n != apps || malformed != 0 {
			t.Errorf("day %d: %d valid, %d malformed; want %d, 0", d, n, malformed, apps)
		}
	}
	if st := r.c.Stats(); st.KeyDeleted != 0 || st.Malformed != 0 || r.c.Epoch() != epoch {
		t.Errorf("stats %+v, epoch %s (was %s)", st, r.c.Epoch(), epoch)
	}
	if ks, _ := r.c.ReportKeys(ctx); len(ks) < days/2 {
		t.Errorf("%d keys over %d days, want one every other day", len(ks), days)
	}
}
