package shuffler

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Several collectors. A shuffler may be given several base URLs of the
// collector (Options.Collector and Options.Collectors): replicas of one
// collector, on one shared database (package collector, Replicas), or
// load balancers in front of them. They must be replicas of the same
// collector: a batch is delivered once to any one of them, and the
// collectors' shared store counts a batch sent to two of them once (a
// batch id is counted once, whichever replica took it). The shuffler
// probes each URL's GET /readyz every ProbeInterval and sends each batch
// to a ready one, in turn, so that the replicas share the work; a send
// that gets no answer, or a 5xx, 408 or 429, marks its URL not ready and
// goes on at once to the next URL, ready ones first, then the others. A
// refusal (another 4xx: a plan or token mismatch) is the collector's
// answer and is not tried elsewhere. With one URL this is the single
// collector's retry and backoff as before.

// DefaultProbeInterval is the default of Options.ProbeInterval.
const DefaultProbeInterval = 5 * time.Second

// probeTimeout bounds one GET /readyz.
const probeTimeout = 2 * time.Second

// collectorSet is the collector URLs with their readiness.
type collectorSet struct {
	urls   []string
	client *http.Client
	// ready is each URL's last probe or send: true when it answered.
	ready []atomic.Bool
	// turn rotates among the ready URLs.
	turn atomic.Uint64
}

// newCollectorSet returns the set of urls (at least one), each taken as
// ready until a probe or a send says otherwise.
func newCollectorSet(urls []string, client *http.Client) *collectorSet {
	c := &collectorSet{client: client, ready: make([]atomic.Bool, len(urls))}
	for i, u := range urls {
		c.urls = append(c.urls, strings.TrimSuffix(u, "/"))
		c.ready[i].Store(true)
	}
	return c
}

// order returns the indices of the URLs to try for one send: the ready
// ones first, starting at the next in turn, then the others in order.
func (c *collectorSet) order() []int {
	n := len(c.urls)
	start := int(c.turn.Add(1) % uint64(n))
	out := make([]int, 0, n)
	for k := range n {
		if i := (start + k) % n; c.ready[i].Load() {
			out = append(out, i)
		}
	}
	for i := range n {
		if !c.ready[i].Load() {
			out = append(out, i)
		}
	}
	return out
}

// mark records whether URL i answered.
func (c *collectorSet) mark(i int, ok bool) { c.ready[i].Store(ok) }

// failover reports whether a send that got status (0: no answer) should
// go on to the next URL: no answer, a server error, 408 or 429.
func failover(status int) bool {
	return status == 0 || status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests
}

// probe asks every URL's GET /readyz once, at the same time, and marks
// each ready when it answers 200.
func (c *collectorSet) probe(ctx context.Context) {
	var wg sync.WaitGroup
	for i, u := range c.urls {
		wg.Go(func() { c.mark(i, c.probeOne(ctx, u) == nil) })
	}
	wg.Wait()
}

func (c *collectorSet) probeOne(ctx context.Context, u string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s/readyz answered %s", u, resp.Status)
	}
	return nil
}

// probeLoop probes every interval until ctx is done. With one URL there
// is nothing to choose, and it does not probe.
func (c *collectorSet) probeLoop(ctx context.Context, interval time.Duration) {
	if len(c.urls) < 2 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		c.probe(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
