package shuffler

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
	"github.com/prometheus/client_golang/prometheus"
)

// floorPlan returns the test plan with n_min nMin and floor m, published
// with a fresh collector key, and that key's private half.
func floorPlan(t *testing.T, nMin, m int) (*plan.Plan, *report.PrivateKey) {
	t.Helper()
	pub, sk := servertest.CollectorKey(t)
	p := testPlan(t, nMin)
	p.Floor = m
	p.CollectorKeys = []plan.CollectorKey{plan.NewCollectorKey(pub, 0)}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p, sk
}

// counting counts a randomizer's SampleBlanket calls.
type counting struct {
	sdk.Randomizer
	calls *atomic.Int64
}

func (c counting) SampleBlanket(ctx context.Context, eps0 float64, n int) ([][]byte, error) {
	c.calls.Add(1)
	return c.Randomizer.(sdk.BlanketSampler).SampleBlanket(ctx, eps0, n)
}

// TestFloorDraws: with floor m, every batch the shuffler releases holds
// its pool's reports and m more, says so (Draws), and all of them open
// under the collector's key and the metric's binding as k-RR reports of
// the plan's eps0; the draws are shuffled among the reports, not appended;
// the draws never count toward n_min (a pool of an open period keeps
// n_min of its own reports); draws made for a release that found nothing
// to take are used by the next.
func TestFloorDraws(t *testing.T) {
	const nMin, m = 10, 25
	p, sk := floorPlan(t, nMin, m)
	col := &sink{}
	colSrv := newServer(t, col)
	reg := prometheus.NewRegistry()
	var calls atomic.Int64
	open := func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
		r, err := servertest.OpenBuiltin(ctx, name, cfg)
		return counting{r, &calls}, err
	}
	f := newShufflerFixture(t, Options{Plan: p, Open: open, Collector: colSrv.URL, Settle: -1, Registerer: reg})
	ctx := context.Background()
	key := report.PeriodPoolKey("ui/screen", p.Epoch(), today)
	cats := p.Metric("ui/screen").Categories
	values := make([]string, 25)
	for i := range values {
		values[i] = cats[i%len(cats)]
	}
	sealed := servertest.SealKRRIn(t, p, "ui/screen", sk.PublicKey(), values, 1, today)
	if resp := post(t, nil, f.url, report.EncodeEnvelopes(envelopes(key, sealed)), nil); resp.StatusCode >= 300 {
		t.Fatalf("upload: %d", resp.StatusCode)
	}
	// The period open: 15 go, n_min = 10 of the apps' reports stay.
	if n, err := f.s.Release(ctx); err != nil || n != 1 {
		t.Fatalf("Release of 25 reports, period open = %d, %v; want 1", n, err)
	}
	// Closed: the last 10 go, with the draws the first look made for a
	// second batch it did not release.
	f.closeAll(t)
	if n, err := f.s.Release(ctx); err != nil || n != 1 {
		t.Fatalf("Release of the closed period = %d, %v; want 1", n, err)
	}
	if c := calls.Load(); c != 3 {
		t.Errorf("SampleBlanket called %d times for 2 batches and 2 releases that found nothing; want 3 (the first look's unused draws used by the second)", c)
	}
	f.run(t)
	waitFor(t, "2 batches delivered", func() bool { return len(col.Got()) == 2 })
	bind := p.Binding("ui/screen")
	bind.Period = today
	r, err := krr.New(krr.Options{Categories: cats, Other: p.Metric("ui/screen").Other})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := r.Describe(ctx)
	var all [][]byte
	for _, b := range col.Got() {
		apps := len(b.Sealed) - m
		if b.Draws != m || (apps != 15 && apps != 10) || b.Metric != key {
			t.Fatalf("batch of %d reports with %d draws for %q; want 15 or 10 reports and %d draws for %q", len(b.Sealed), b.Draws, b.Metric, m, key)
		}
		last := -1
		for i, s := range b.Sealed {
			pt, err := report.Open(sk, bind, s)
			if err != nil {
				t.Fatalf("report %d of the batch does not open under the metric's binding: %v", i, err)
			}
			if len(pt) != d.ReportBytes {
				t.Fatalf("report %d: %d bytes, a k-RR report has %d", i, len(pt), d.ReportBytes)
			}
			if slices.ContainsFunc(sealed, func(x []byte) bool { return bytes.Equal(x, s) }) {
				all = append(all, s)
				last = i
			}
		}
		// After a shuffle the apps' reports sit in the first places with
		// probability 1/C(35, 10) or less, below 1e-8.
		if last == apps-1 {
			t.Errorf("the apps' reports are the batch's first %d: the draws were appended, not shuffled", apps)
		}
	}
	if !slices.EqualFunc(sortedCopy(all), sortedCopy(sealed), bytes.Equal) {
		t.Errorf("the batches hold %d of the apps' reports, not the 25 uploaded", len(all))
	}
	if got := gathered(t, reg, "blanket_shuffler_blanket_draws_total"); got != 2*m {
		t.Errorf("blanket_shuffler_blanket_draws_total = %v, want %d", got, 2*m)
	}
	if got := gathered(t, reg, "blanket_shuffler_floor_failures_total"); got != 0 {
		t.Errorf("blanket_shuffler_floor_failures_total = %v, want 0", got)
	}
}

// noBlanket is a randomizer that does not draw from its blanket: a
// built-in's methods, SampleBlanket hidden.
type noBlanket struct{ sdk.Randomizer }

// TestFloorNeedsASampler: a plan with a floor whose randomizer cannot
// draw from its blanket, or without a way to open randomizers, is refused
// at open with an error naming the metric; a plan without a floor needs
// neither.
func TestFloorNeedsASampler(t *testing.T) {
	p, _ := floorPlan(t, 10, 5)
	hide := func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
		r, err := servertest.OpenBuiltin(ctx, name, cfg)
		return noBlanket{r}, err
	}
	for name, open := range map[string]plan.Opener{"no sampler": hide, "no opener": nil} {
		o := Options{Plan: p, Open: open, Collector: "http://127.0.0.1:1", Dir: t.TempDir(), Logger: testLogger(t)}
		o.Store = servertest.Store(t, o.Dir)
		s, err := Open(context.Background(), o)
		if err == nil {
			s.Close()
			t.Fatalf("%s: Open succeeded", name)
		}
		if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "floor") {
			t.Errorf("%s: %v, want ErrOptions about the floor", name, err)
		}
		if name == "no sampler" && !strings.Contains(err.Error(), `"ui/screen"`) {
			t.Errorf("%s: %v does not name the metric", name, err)
		}
	}
	p.Floor = 0
	newShufflerFixture(t, Options{Plan: p, Open: hide, Collector: "http://127.0.0.1:1"})
}

// TestFloorFailureReleasesWithoutDraws: when drawing fails at a release,
// the batch goes out without draws and says so, and the failure is
// counted: reports are never held back for the floor.
func TestFloorFailureReleasesWithoutDraws(t *testing.T) {
	const nMin = 10
	p, sk := floorPlan(t, nMin, 5)
	var calls atomic.Int64
	flaky := func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
		if calls.Add(1) > int64(len(p.Metrics)) { // the opens at Open succeed
			return nil, errors.New("plugin down")
		}
		return servertest.OpenBuiltin(ctx, name, cfg)
	}
	col := &sink{}
	colSrv := newServer(t, col)
	reg := prometheus.NewRegistry()
	f := newShufflerFixture(t, Options{Plan: p, Open: flaky, Collector: colSrv.URL, Settle: -1, Registerer: reg})
	key := report.PeriodPoolKey("ui/screen", p.Epoch(), today)
	values := []string{"home", "search", "settings", "profile", "home", "home", "search", "profile", "home", "settings"}
	post(t, nil, f.url, report.EncodeEnvelopes(envelopes(key, servertest.SealKRRIn(t, p, "ui/screen", sk.PublicKey(), values, 3, today))), nil)
	f.closeAll(t)
	if n, err := f.s.Release(context.Background()); err != nil || n != 1 {
		t.Fatalf("Release = %d, %v; want 1", n, err)
	}
	f.run(t)
	waitFor(t, "the batch delivered", func() bool { return len(col.Got()) == 1 })
	if b := col.Got()[0]; b.Draws != 0 || len(b.Sealed) != len(values) {
		t.Fatalf("batch of %d reports with %d draws; want the %d reports and no draws", len(b.Sealed), b.Draws, len(values))
	}
	if got := gathered(t, reg, "blanket_shuffler_floor_failures_total"); got != 1 {
		t.Errorf("blanket_shuffler_floor_failures_total = %v, want 1", got)
	}
}
