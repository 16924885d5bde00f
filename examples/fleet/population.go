package main

import (
	"math"
	"math/rand/v2"
	"sort"

	"github.com/blanket-dp/blanket/sdk/plan"
)

// population draws what simulated instances record, day by day, from a
// seeded generator: the ground truth has a trend, so that per-day
// estimates have something to show.
//
//   - The screen (categorical metric) is Zipf-distributed, except that a
//     growing share of users (5% on day 0, 4 points more each day) settle
//     on the trending screen, the plan's second category.
//   - The favourite feature (RAPPOR metric) follows fixed popularity
//     weights, except that a growing share (3% more each day) picks the
//     plan's last category.
//   - Bytes synced (summed metric) are log-normal per sync, with a mean
//     that grows 15% a day; an instance syncs one to maxRecords times a
//     day and the day's report is the clamped total.
//
// On an active day an instance records every metric one to maxRecords
// times: the categorical metrics report the day's last value.
type population struct {
	seed    uint64
	zipfS   float64
	screens []string
	feats   []string
	featCDF []float64
	lo, hi  float64
	active  float64
	records int
	days    int
}

// featureWeights is the popularity of the RAPPOR metric's categories, in
// plan order (cycled when the plan has more).
var featureWeights = []float64{30, 22, 15, 10, 8, 5, 4, 2, 1.5, 1, 0.8, 0.7, 0.5, 0.3, 0.2, 0.1}

func newPopulation(cfg config, zipf, feat, sum *plan.Metric) *population {
	p := &population{
		seed: cfg.seed, zipfS: cfg.zipfS, screens: zipf.Categories, feats: feat.Categories,
		lo: sum.Lo, hi: sum.Hi, active: cfg.active, records: cfg.records, days: cfg.days,
	}
	var c float64
	for i := range feat.Categories {
		c += featureWeights[i%len(featureWeights)]
		p.featCDF = append(p.featCDF, c)
	}
	for i := range p.featCDF {
		p.featCDF[i] /= c
	}
	return p
}

// day is what one instance records on one day: per role the values of its
// Records in order (cats for the categorical roles, amounts for the sum).
type day struct {
	active  bool
	cats    [numRoles][]string
	amounts []float64
}

// value returns the day's report value of role r: the last category, or
// the total amount clamped to the metric's range (what the SDK sends).
func (d *day) value(r int, lo, hi float64) (string, float64) {
	if r == roleSum {
		var s float64
		for _, a := range d.amounts {
			s += a
		}
		return "", min(max(s, lo), hi)
	}
	return d.cats[r][len(d.cats[r])-1], 0
}

// instance returns the days of instance i (deterministic in the seed and
// i). With only >= 0 it is a top-up instance: active on that day alone.
func (p *population) instance(i uint64, only int) []day {
	rng := rand.New(rand.NewPCG(p.seed, i))
	zipf := rand.NewZipf(rng, p.zipfS, 1, uint64(len(p.screens)-1))
	days := make([]day, p.days)
	for d := range days {
		if only >= 0 {
			if d != only {
				continue
			}
		} else if rng.Float64() >= p.active {
			continue
		}
		v := &days[d]
		v.active = true
		for range 1 + rng.IntN(p.records) {
			screen := p.screens[zipf.Uint64()]
			if rng.Float64() < 0.05+0.04*float64(d) {
				screen = p.screens[min(1, len(p.screens)-1)]
			}
			v.cats[roleZipf] = append(v.cats[roleZipf], screen)
			feat := p.feats[min(sort.SearchFloat64s(p.featCDF, rng.Float64()), len(p.feats)-1)]
			if rng.Float64() < 0.03*float64(d) {
				feat = p.feats[len(p.feats)-1]
			}
			v.cats[roleFeature] = append(v.cats[roleFeature], feat)
			mean := (p.hi - p.lo) / 24 * (1 + 0.15*float64(d))
			v.amounts = append(v.amounts, mean*math.Exp(rng.NormFloat64()-0.5))
		}
	}
	return days
}

// truth is the exact aggregate of what the fleet sent for one metric on
// one day.
type truth struct {
	n      int64
	index  map[string]int
	labels []string
	counts []float64
	sum    float64
}

func newTruth(m *plan.Metric) *truth {
	t := &truth{index: map[string]int{}}
	for i, c := range m.Categories {
		t.index[c] = i
		t.labels = append(t.labels, c)
	}
	t.counts = make([]float64, len(t.labels))
	return t
}

// add counts one report: a category, or an amount for the summed metric.
func (t *truth) add(cat string, amount float64, sum bool) {
	t.n++
	if sum {
		t.sum += amount
		return
	}
	t.counts[t.index[cat]]++
}
