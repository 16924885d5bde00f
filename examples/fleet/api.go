package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// estimate is one estimated quantity of a period.
type estimate struct {
	Label    string  `json:"label"`
	Value    float64 `json:"value"`
	Variance float64 `json:"variance"`
	Lo       float64 `json:"lo"`
	Hi       float64 `json:"hi"`
}

// periodDetail is one period of GET /v1/metrics/{name}.
type periodDetail struct {
	Start         *time.Time `json:"start"`
	Current       bool       `json:"current"`
	Plugin        string     `json:"plugin"`
	Eps0          float64    `json:"eps0"`
	N             int64      `json:"n"`
	Malformed     int64      `json:"malformed"`
	Batches       int64      `json:"batches"`
	Confidence    float64    `json:"confidence"`
	EstimateError string     `json:"estimate_error"`
	Estimates     []estimate `json:"estimates"`
	Guarantee     *struct {
		Eps      float64 `json:"eps"`
		Delta    float64 `json:"delta"`
		N        int64   `json:"n"`
		Messages int64   `json:"messages"`
	} `json:"guarantee"`
}

// metricDetail is what the fleet reads of GET /v1/metrics/{name}.
type metricDetail struct {
	Name    string         `json:"name"`
	Periods []periodDetail `json:"periods"`
	Horizon *struct {
		Periods int      `json:"periods"`
		Period  string   `json:"period"`
		Eps     *float64 `json:"eps"`
		Delta   float64  `json:"delta"`
		Window  *struct {
			Start time.Time `json:"start"`
			End   time.Time `json:"end"`
		} `json:"window"`
		Reports     int     `json:"reports"`
		TargetEps   float64 `json:"target_eps"`
		TargetDelta float64 `json:"target_delta"`
		Note        string  `json:"note"`
	} `json:"horizon"`
}

// byDay returns the current epoch's periods indexed by simulated day
// (nil where a day has none), given the first day's start and the period.
func (d *metricDetail) byDay(first time.Time, period time.Duration, days int) []*periodDetail {
	out := make([]*periodDetail, days)
	for i := range d.Periods {
		p := &d.Periods[i]
		if !p.Current || p.Start == nil {
			continue
		}
		if k := int(p.Start.Sub(first) / period); k >= 0 && k < days && p.Start.Equal(first.Add(time.Duration(k)*period)) {
			out[k] = p
		}
	}
	return out
}

// total returns the reports of the current epoch, valid and malformed,
// over all its periods.
func (d *metricDetail) total() int64 {
	var n int64
	for _, e := range d.Periods {
		if e.Current {
			n += e.N + e.Malformed
		}
	}
	return n
}

// detail GETs metric name; with horizon false the collector skips the
// guarantee over the horizon (a composition: pollers do not need it).
func (f *fleet) detail(ctx context.Context, name string, horizon bool) (*metricDetail, error) {
	u, err := url.JoinPath(f.cfg.collectorURL(), "/v1/metrics", name)
	if err != nil {
		return nil, err
	}
	if !horizon {
		u += "?horizon=0"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotFound {
		return &metricDetail{Name: name}, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.200s", u, resp.Status, body)
	}
	var d metricDetail
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	return &d, nil
}
