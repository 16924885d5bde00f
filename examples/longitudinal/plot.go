package main

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// plotSeries draws the truth and each method's estimates with a band of
// two standard errors, one point per period.
func plotSeries(path string, truth []float64, methods ...series) error {
	p := plot.New()
	p.Title.Text = "Users in state on, per period: truth and estimates (band: ±2 se)"
	p.X.Label.Text = "period"
	p.Y.Label.Text = "users"
	colours := []color.RGBA{{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, {R: 0xd6, G: 0x27, B: 0x28, A: 0xff}}
	for k, s := range methods {
		col := colours[k%len(colours)]
		band := make(plotter.XYs, 0, 2*len(s.value))
		for t := range s.value {
			band = append(band, plotter.XY{X: float64(t + 1), Y: s.value[t] + 2*s.se[t]})
		}
		for t := len(s.value) - 1; t >= 0; t-- {
			band = append(band, plotter.XY{X: float64(t + 1), Y: s.value[t] - 2*s.se[t]})
		}
		poly, err := plotter.NewPolygon(band)
		if err != nil {
			return err
		}
		poly.Color = color.NRGBA{R: col.R, G: col.G, B: col.B, A: 0x40}
		poly.LineStyle.Width = 0
		line, err := plotter.NewLine(xy(s.value))
		if err != nil {
			return err
		}
		line.Color = col
		line.Width = vg.Points(1.2)
		p.Add(poly, line)
		p.Legend.Add(s.name, line)
	}
	tl, err := plotter.NewLine(xy(truth))
	if err != nil {
		return err
	}
	tl.Width = vg.Points(2)
	tl.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(tl)
	p.Legend.Add("truth", tl)
	p.Legend.Top = true
	p.Legend.Left = true
	return p.Save(9*vg.Inch, 5*vg.Inch, path)
}

func xy(v []float64) plotter.XYs {
	out := make(plotter.XYs, len(v))
	for i, y := range v {
		out[i] = plotter.XY{X: float64(i + 1), Y: y}
	}
	return out
}
