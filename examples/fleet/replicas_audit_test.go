//go:build audit

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/collector"
	"github.com/blanket-dp/blanket/collector/shuffler"
	"github.com/blanket-dp/blanket/internal/pgtest"
	"github.com/blanket-dp/blanket/internal/secrets"
	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// TestReplicas runs two replicas of each role as real processes on one
// PostgreSQL server (a database per role: separate trust domains), the
// collectors behind one round-robin address (collectorBalancer), and a
// fleet of apps (the SDK: a Provider each, sealing under the published
// plan and uploading with its outbox's retries) alternating between the
// shufflers. Mid-stream it SIGKILLs one shuffler and one collector, and
// restarts both on their stores at new addresses while the fleet goes on.
// Acknowledgements are lost on the way back both to apps (appTransport)
// and to shufflers (collectorBalancer), so uploads and batches are
// delivered twice, to the other replica, and some batches are sent to
// both collectors at once. The shufflers release each pool down to its
// last n_min as reports arrive (--settle 1ms); then the period is closed
// (POST /v1/pools/close, as its deadline would), every pool released and
// forwarded, and the collectors must have counted each acknowledged
// report exactly once, in batches of at least n_min, with estimates near
// the truth, and answer the same numbers.
//
// One shortcut: the leases of outgoing batches are ended by hand before
// the killed shuffler restarts (expireLeases), as a minute passing would.
//
// BLANKET_BIN=path runs a prebuilt blanket instead of building one (e.g.
// one built with go build -overlay to check that a fault is caught).
func TestReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("builds blanket and runs four servers on PostgreSQL; skipped in -short mode")
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	lb := newCollectorBalancer(replicasLoseBatch, replicasHedgeBatch)
	var procs []*replica
	// Registered first, so it runs last: after every process is killed.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, p := range procs {
			p.dumpLog(t)
		}
		t.Logf("collector balancer:\n%s", strings.Join(lb.tally().events, "\n"))
	})

	bin := blanketBin(t)
	planFile := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(planFile, []byte(replicasPlanYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(dir, "batch.token")
	if _, _, err := secrets.LoadOrCreateToken(token); err != nil {
		t.Fatal(err)
	}
	shufflerDB, collectorDB := pgtest.URL(t), pgtest.URL(t)
	front := httptest.NewServer(lb)
	t.Cleanup(front.Close)

	startCollector := func(slot int, name string) *replica {
		r := startReplica(ctx, t, &procs, bin, dir, name, "collector", "--shuffler-admission", "open", "--data", filepath.Join(dir, fmt.Sprintf("collector-%d", slot+1)),
			"--plan", planFile, "--store", collectorDB, "--token-file", token, "--addr", "127.0.0.1:0")
		lb.setBackend(slot, r.url)
		return r
	}
	startShuffler := func(slot int, name string) *replica {
		return startReplica(ctx, t, &procs, bin, dir, name, "shuffler", "--admission", "open", "--data", filepath.Join(dir, fmt.Sprintf("shuffler-%d", slot+1)),
			"--plan", planFile, "--store", shufflerDB, "--token-file", token, "--collector", front.URL,
			"--addr", "127.0.0.1:0", "--release-interval", "100ms", "--settle", "1ms")
	}
	// The first collector generates the key and calibrates the plan; the
	// second must serve the same.
	col := []*replica{startCollector(0, "collector-1"), nil}
	col[1] = startCollector(1, "collector-2")
	planJSON := samePlan(ctx, t, col[0], col[1])
	shf := []*replica{startShuffler(0, "shuffler-1"), startShuffler(1, "shuffler-2")}
	// Apps fetch the plan from a shuffler, which relays the collectors'.
	var relayed []byte
	if err := servertest.FetchBody(ctx, shf[1].url+"/v1/plan", &relayed); err != nil {
		t.Fatal(err)
	}
	pl, err := plan.Parse(relayed)
	if err != nil {
		t.Fatal(err)
	}
	served, err := plan.Parse(planJSON)
	if err != nil {
		t.Fatal(err)
	}
	if pl.Epoch() != served.Epoch() || pl.Digest() != served.Digest() {
		t.Fatalf("the shuffler relays epoch %s, keys %+v; the collectors serve epoch %s, keys %+v", pl.Epoch(), pl.CollectorKeys, served.Epoch(), served.CollectorKeys)
	}
	t.Logf("%v: 2 collectors and 2 shufflers up, plan epoch %s", time.Since(began).Round(time.Millisecond), pl.Epoch())

	// The apps and the truth. Each app records one value of each metric
	// in the current period and reports it once the period closed (its
	// clock jumps past the period's end).
	rng := rand.New(rand.NewPCG(7, 13))
	apps := make([][]appValue, replicasApps)
	truth := map[string]map[string]int64{}
	for _, m := range pl.Metrics {
		truth[m.Name] = map[string]int64{}
	}
	for i := range apps {
		for _, m := range pl.Metrics {
			c := m.Categories[weighted(rng, replicasWeights[m.Name])]
			apps[i] = append(apps[i], appValue{metric: m.Name, category: c})
			truth[m.Name][c]++
		}
	}
	period := pl.PeriodOf(time.Now())
	recordAt, closeAt := time.Now(), pl.PeriodStart(period+1).Add(time.Minute)
	cache := client.NewRandomizerCache(nil)
	defer cache.Close()
	up := newAppTransport([]string{shf[0].url, shf[1].url}, replicasLoseAck)

	// The fleet: apps [0, gate) run while the replicas are killed and
	// restarted; apps from gate on wait for the restart.
	killAt, restartAt, gate := int64(replicasApps*3/10), int64(replicasApps*5/10), replicasApps*6/10
	fctx, fcancel := context.WithCancelCause(ctx)
	restarted := make(chan struct{})
	var next, done, sdkRetries atomic.Int64
	var wg sync.WaitGroup
	defer func() {
		fcancel(nil)
		wg.Wait()
	}()
	for range replicasWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= replicasApps || fctx.Err() != nil {
					return
				}
				if i >= gate {
					select {
					case <-restarted:
					case <-fctx.Done():
						return
					}
				}
				st, err := runApp(fctx, pl, cache, up, apps[i], recordAt, closeAt)
				if err != nil {
					fcancel(fmt.Errorf("app %d: %w", i, err))
					return
				}
				sdkRetries.Add(st.Retries)
				done.Add(1)
			}
		})
	}
	waitDone := func(n int64) {
		for done.Load() < n {
			if fctx.Err() != nil {
				t.Fatalf("the fleet stopped: %v", context.Cause(fctx))
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	waitDone(killAt)
	up.setOutage(true)
	col[0].kill()
	shf[0].kill()
	t.Logf("%v: SIGKILLed %s and %s after %d apps", time.Since(began).Round(time.Millisecond), col[0].name, shf[0].name, done.Load())
	waitDone(restartAt)
	// A batch the killed shuffler was sending stays leased to it for a
	// minute (leaseSeconds in collector/shuffler/forward.go), and the
	// other replica looks at a leased batch again only a minute later:
	// the test cannot wait that long, so it ends the leases as the clock
	// would. A live replica's send that loses its lease so may be
	// repeated by the restarted one; the collector counts it once.
	expired, err := servertest.ExpireLeases(ctx, shufflerDB)
	if err != nil {
		t.Fatal(err)
	}
	col[0] = startCollector(0, "collector-1-restarted")
	shf[0] = startShuffler(0, "shuffler-1-restarted")
	up.setShuffler(0, shf[0].url)
	up.setOutage(false)
	close(restarted)
	t.Logf("%v: restarted both after %d apps (%d leases of outgoing batches ended)", time.Since(began).Round(time.Millisecond), done.Load(), expired)
	wg.Wait()
	if err := context.Cause(fctx); err != nil {
		t.Fatalf("the fleet stopped: %v", err)
	}
	t.Logf("%v: %d apps acknowledged (%d SDK upload retries)", time.Since(began).Round(time.Millisecond), done.Load(), sdkRetries.Load())

	// Close the period on one shuffler, as its deadline would: every
	// pool goes out whole (force: the period has not ended).
	through := pl.PeriodStart(period + 1).UTC().Format(time.RFC3339)
	var closed shuffler.ClosedPeriods
	if err := postJSONCtx(ctx, shf[1].admin+"/v1/pools/close?force=true&through="+through, &closed); err != nil || len(closed.Closed) != 1 {
		t.Fatalf("closing the period: %+v, %v", closed, err)
	}

	// Drain: every pool released, every batch acknowledged, every
	// acknowledged report counted.
	acked := up.ackedByMetric()
	servertest.Poll(ctx, t, 60*time.Second, "every pool released and forwarded", func() (bool, string) {
		var st shuffler.PoolsStatus
		if err := servertest.FetchJSON(ctx, shf[1].admin+"/v1/pools", &st); err != nil {
			return false, err.Error()
		}
		var list collector.MetricList
		if err := servertest.FetchJSON(ctx, col[1].url+"/v1/metrics", &list); err != nil {
			return false, err.Error()
		}
		counted := true
		for _, m := range list.Metrics {
			counted = counted && m.N >= acked[m.Name]
		}
		return len(st.Pools) == 0 && st.Outgoing == 0 && counted, fmt.Sprintf("pools %+v; collector %+v; acknowledged %v; batches answered other than 200, by status: %v", st, list.Metrics, acked, lb.tally().refused)
	})
	// A redundant send still in flight (a replica whose lease was ended)
	// lands before the counts are read.
	time.Sleep(500 * time.Millisecond)
	t.Logf("%v: drained", time.Since(began).Round(time.Millisecond))

	checkUploads(t, up)
	batchIDs := checkBalancer(t, lb)
	// The restarted collector serves the same plan.
	samePlan(ctx, t, col[0], col[1])
	checkCollectors(ctx, t, pl, col, acked, truth, period, batchIDs)
	t.Logf("%v: done", time.Since(began).Round(time.Millisecond))
}
