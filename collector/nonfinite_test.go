package collector

import (
	"context"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/sdk"
)

// nanEstimates wraps a randomizer whose Estimate returns a non-finite
// variance, as a faulty plugin might.
type nanEstimates struct{ sdk.Randomizer }

func (n nanEstimates) Estimate(ctx context.Context, st *sdk.Statistic) (*sdk.Estimate, error) {
	est, err := n.Randomizer.Estimate(ctx, st)
	if err != nil {
		return nil, err
	}
	est.Items[0].Variance = math.NaN()
	est.Items[len(est.Items)-1].Hi = math.Inf(1)
	return est, nil
}

// TestNonFiniteEstimate: a plugin's NaN or infinite estimate (JSON has
// neither) is answered as an estimate error naming the category, not as
// an empty 200 body, and the period's other fields are served.
func TestNonFiniteEstimate(t *testing.T) {
	p := testPlan(t, 10)
	open := func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
		r, err := openBuiltin(ctx, name, cfg)
		return nanEstimates{r}, err
	}
	c, err := OpenCollector(context.Background(), CollectorOptions{Plan: p, Dir: t.TempDir(), Open: open, Token: testToken, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f := &collectorFixture{c: c, p: p, swap: &swapHandler{}}
	f.install()
	f.srv = newServer(t, f.swap)
	sealed := sealKRR(t, c.Plan(), metric, c.PublicKey(), krrValues(10, 9), 9)
	if code, _ := f.postBatch(t, todayBody(c.Plan(), metric, sealed)); code != http.StatusOK {
		t.Fatalf("batch: %d", code)
	}
	var d MetricDetail
	if code := getJSON(t, f.srv.URL+"/v1/metrics/"+metric+"?horizon=0", &d); code != http.StatusOK {
		t.Fatalf("GET metric: %d", code)
	}
	if len(d.Periods) != 1 || d.Periods[0].N != 10 {
		t.Fatalf("periods %+v", d.Periods)
	}
	pe := d.Periods[0]
	if pe.Estimates != nil || !strings.Contains(pe.EstimateError, "not a finite number") {
		t.Errorf("estimates %+v, error %q", pe.Estimates, pe.EstimateError)
	}
}
