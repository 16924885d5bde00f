package collector

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/blanket-dp/blanket/collector/shuffler"
	"github.com/blanket-dp/blanket/sdk/report"
)

// sealedPool is the number of distinct sealed reports the benchmarks
// cycle through: sealing is the apps' cost, not the servers', and ids, not
// contents, make reports distinct for the shuffler.
const sealedPool = 4096

// peakHeap samples the heap in use every 5 ms until stop is called and
// returns the peak in bytes.
func peakHeap() (stop func() uint64) {
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(samples)
			if v := samples[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}

// peakRSS returns the process's resident-set high-water mark (Linux
// VmHWM): the whole test process since it started, clients included.
func peakRSS() (uint64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// BenchmarkPipeline measures the shuffler and the collector together, as
// blanket serve runs them (one loopback server; the shuffler forwards over
// HTTP): concurrent clients upload b.N sealed k-RR reports in uploads of
// 100, and the clock stops when the collector has counted them all. It
// reports the end-to-end rate (reports/s), the upload rate alone
// (upload-reports/s) and the peak heap in use (peak-heap-MB; the clients'
// share is small: they build each upload when they send it).
//
//	go test -run '^$' -bench Pipeline -benchtime 1000000x ./collector/
//
// The sub-benchmarks with n_min=1000 stream batches of about 1000 reports
// (one every release interval); one_batch sets n_min = b.N, so that every
// report is pooled and then released, forwarded and ingested as one
// batch: the peak memory of a batch of b.N reports.
func BenchmarkPipeline(b *testing.B) {
	for _, clients := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			benchPipeline(b, clients, 100, 1000)
		})
	}
	b.Run("one_batch/clients=4", func(b *testing.B) {
		benchPipeline(b, 4, 100, max(2, b.N))
	})
}

func benchPipeline(b *testing.B, clients, per, nMin int) {
	ctx := context.Background()
	p := testPlan(b, nMin)
	dir := b.TempDir()
	c := openCollector(b, dir, p)
	defer c.Close()
	mux := http.NewServeMux()
	c.Register(mux)
	srv := newServer(b, mux)
	s, err := shuffler.Open(ctx, shuffler.Options{Plan: p, Dir: dir, Collector: srv.URL, Token: testToken, ReleaseInterval: 50 * time.Millisecond, ConnRate: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	s.Register(mux)
	sealed := sealKRRIn(b, c.Plan(), metric, c.PublicKey(), krrValues(sealedPool, 1), 1, today)
	key := periodKey(metric, c.Epoch())
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Run(runCtx); close(done) }()
	defer func() { cancel(); <-done }()

	total := b.N
	var next atomic.Int64
	runtime.GC()
	stop := peakHeap()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			envs := make([]report.Envelope, 0, per)
			for {
				lo := int(next.Add(int64(per))) - per
				if lo >= total {
					return
				}
				hi := min(lo+per, total)
				envs = envs[:0]
				for i := lo; i < hi; i++ {
					envs = append(envs, report.Envelope{ID: report.NewID(), Metric: key, Suite: report.SuiteX25519ChaCha, Sealed: sealed[i%sealedPool]})
				}
				resp, err := hc.Post(srv.URL+"/v1/reports", "application/octet-stream", bytes.NewReader(report.EncodeEnvelopes(envs)))
				if err != nil {
					b.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					b.Errorf("upload: %s", resp.Status)
					return
				}
			}
		})
	}
	wg.Wait()
	uploaded := time.Since(start)
	// Reports below n_min at the end stay pooled, as they should: wait
	// until everything else is counted.
	var want int64
	for {
		st, err := s.Stats(ctx)
		if err != nil {
			b.Fatal(err)
		}
		want = int64(total) - st.Pools[key]
		if st.Pools[key] < int64(p.NMin) && c.Stats().Reports >= want {
			break
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	peak := stop()
	b.ReportMetric(float64(want)/elapsed.Seconds(), "reports/s")
	b.ReportMetric(float64(total)/uploaded.Seconds(), "upload-reports/s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	if hwm, ok := peakRSS(); ok {
		b.ReportMetric(float64(hwm)/(1<<20), "process-peak-rss-MB")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkIngest measures the collector alone on one batch of n reports:
// decode, open (HPKE, in parallel), accumulate, guarantee (cached after
// the first size) and store.
func BenchmarkIngest(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			c := openCollector(b, b.TempDir(), testPlan(b, 1000))
			defer c.Close()
			pool := sealKRRIn(b, c.Plan(), metric, c.PublicKey(), krrValues(sealedPool, 2), 2, today)
			key := periodKey(metric, c.Epoch())
			sealed := make([][]byte, n)
			for i := range sealed {
				sealed[i] = pool[i%sealedPool]
			}
			bodies := make([][]byte, b.N)
			for i := range bodies {
				bodies[i] = batchBody(key, sealed)
			}
			// Warm the guarantee cache: the accountant's time is per
			// batch size, not per report.
			if _, err := c.Ingest(context.Background(), batchBody(key, sealed)); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				if _, err := c.Ingest(context.Background(), bodies[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "reports/s")
		})
	}
}

// BenchmarkIngestJoint measures the collector alone on one joint batch of
// n messages, each carrying a k-RR and a summation report: one HPKE open
// per message, then both plugins' Accumulate.
func BenchmarkIngestJoint(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			f := newPooledFixture(b, "joint", 1000)
			pool := make([][]byte, sealedPool)
			screens := krrValues(sealedPool, 3)
			for i := range pool {
				a, s := f.randomize(b, screens[i], float64(i%1000))
				pool[i] = f.seal(b, []report.Part{{Metric: 0, Report: a}, {Metric: 1, Report: s}})
			}
			sealed := make([][]byte, n)
			for i := range sealed {
				sealed[i] = pool[i%sealedPool]
			}
			bodies := make([][]byte, b.N)
			for i := range bodies {
				bodies[i] = todayBody(f.pub, f.pub.Pool(""), sealed)
			}
			if _, err := f.c.Ingest(context.Background(), todayBody(f.pub, f.pub.Pool(""), sealed)); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				if _, err := f.c.Ingest(context.Background(), bodies[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "messages/s")
		})
	}
}

// BenchmarkScrape measures one Prometheus scrape of a shuffler and a
// collector registered together, with reports waiting in the pools: the
// counters are read from atomics and the pool sizes from one GROUP BY over
// the pool table, so the cost grows with the reports waiting.
func BenchmarkScrape(b *testing.B) {
	for _, waiting := range []int{0, 10000, 100000} {
		b.Run(fmt.Sprintf("waiting=%d", waiting), func(b *testing.B) {
			ctx := context.Background()
			reg := prometheus.NewRegistry()
			p := testPlan(b, 1<<20) // nothing is released
			c, err := OpenCollector(ctx, CollectorOptions{Plan: p, Dir: b.TempDir(), Open: openBuiltin, Registerer: reg})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			f := newShufflerFixture(b, shuffler.Options{Plan: p, Collector: "http://127.0.0.1:1", Registerer: reg, ConnRate: -1})
			for i := 0; i < waiting; i += shuffler.DefaultMaxEnvelopes {
				n := min(shuffler.DefaultMaxEnvelopes, waiting-i)
				if resp := post(b, nil, f.url, report.EncodeEnvelopes(envelopes(todayKey, fakeSealed(n))), nil); resp.StatusCode != http.StatusAccepted {
					b.Fatalf("upload: %d", resp.StatusCode)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				mfs, err := reg.Gather()
				if err != nil || len(mfs) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}
