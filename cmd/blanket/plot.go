package main

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plotFormats are the --plot extensions.
var plotFormats = []string{".svg", ".png", ".pdf"}

// checkPlotPath validates the --plot file name before the sweep runs.
func checkPlotPath(path string) error {
	ext := strings.ToLower(filepath.Ext(path))
	for _, f := range plotFormats {
		if ext == f {
			return nil
		}
	}
	return usageErrorf("--plot must name a %s file, got %q", strings.Join(plotFormats, ", "), path)
}

// series is one curve of the plot: a name and a value per point (nil where
// missing).
type series struct {
	name string
	ys   []*float64
}

// curveSeries returns eps upper, eps lower and the named baselines of
// rows.
func curveSeries(rows []epsReport, names []string) []series {
	up := series{name: "eps upper (this work)"}
	low := series{name: "eps lower (this work)"}
	bls := make([]series, len(names))
	for i, n := range names {
		bls[i].name = n
	}
	with := series{name: "with the floor (this work)"}
	alone := series{name: "floor alone (this work)"}
	floor := false
	for _, r := range rows {
		up.ys = append(up.ys, r.EpsUpper)
		low.ys = append(low.ys, r.EpsLower)
		for i, n := range names {
			bls[i].ys = append(bls[i].ys, r.Baselines[n])
		}
		var w, a *float64
		if r.Floor != nil {
			floor = true
			w, a = r.Floor.Upper, r.Floor.Alone
		}
		with.ys, alone.ys = append(with.ys, w), append(alone.ys, a)
	}
	out := []series{up, low}
	if floor {
		out = append(out, with, alone)
	}
	return append(out, bls...)
}

// segments splits a series into runs of consecutive points that can be
// drawn on log axes (present and > 0).
func segments(xs []float64, ys []*float64) []plotter.XYs {
	var out []plotter.XYs
	var cur plotter.XYs
	for i, y := range ys {
		if y == nil || !(*y > 0) || !(xs[i] > 0) {
			if len(cur) > 0 {
				out = append(out, cur)
				cur = nil
			}
			continue
		}
		cur = append(cur, plotter.XY{X: xs[i], Y: *y})
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// plotCurve draws eps upper, eps lower and the named baselines of rows
// against xs on log axes and saves the plot to path (its extension picks
// the format). Series without values get no legend entry.
func plotCurve(path, title, xLabel, yLabel string, xs []float64, rows []epsReport, baselines []string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker = denseLogTicks{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	// eps falls with n and rises with eps0 and rounds: put the legend in
	// the corner the curves leave empty (bottom left, or top left for eps0
	// and rounds sweeps).
	p.Legend.Left = true
	p.Legend.Top = len(xs) > 1 && len(rows) > 1 && xs[0] < xs[len(xs)-1] && increasing(rows)
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), vg.Points(8)
	if p.Legend.Top {
		p.Legend.YOffs = -vg.Points(8)
	}
	p.Add(plotter.NewGrid())
	drawn := 0
	for i, s := range curveSeries(rows, baselines) {
		segs := segments(xs, s.ys)
		for j, seg := range segs {
			line, points, err := plotter.NewLinePoints(seg)
			if err != nil {
				return fmt.Errorf("plot %s: %w", s.name, err)
			}
			line.Color = plotutil.Color(i)
			line.Dashes = plotutil.Dashes(i)
			line.Width = vg.Points(1.5)
			points.Color = plotutil.Color(i)
			points.Shape = plotutil.Shape(i)
			points.Radius = vg.Points(2.5)
			p.Add(line, points)
			if j == 0 {
				p.Legend.Add(s.name, line, points)
			}
			drawn++
		}
	}
	if drawn == 0 {
		return fmt.Errorf("plot: no positive values to draw on log axes")
	}
	// A log axis needs min < max; widen a degenerate range (a flat curve).
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		if ax.Min >= ax.Max {
			ax.Min, ax.Max = ax.Min/2, ax.Max*2
		}
	}
	if err := p.Save(8*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

// shorten cuts s to at most n runes for a title.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}

// increasing reports whether the upper bound grows along the sweep.
func increasing(rows []epsReport) bool {
	first, last := rows[0].EpsUpper, rows[len(rows)-1].EpsUpper
	return first != nil && last != nil && *last > *first
}

// denseLogTicks labels 1, 2 and 5 times each power of ten when the axis
// spans less than three decades (plot.LogTicks labels only the powers).
type denseLogTicks struct{}

// Ticks implements plot.Ticker.
func (denseLogTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || hi/lo >= 1000 {
		return plot.LogTicks{Prec: -1}.Ticks(lo, hi)
	}
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		for _, m := range []float64{1, 2, 3, 4, 5, 6, 7, 8, 9} {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
