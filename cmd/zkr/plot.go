package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/zkrecipes/zkrecipes/internal/bench"
)

// plotHerd draws watch events per release against the number of clients,
// one line per recipe, into file (.svg or .png).
func plotHerd(file string, results []bench.Result) error {
	p := plot.New()
	p.Title.Text = "The herd effect: watch events per lock release"
	p.X.Label.Text = "clients queued on one lock"
	p.Y.Label.Text = "watch events delivered per release"
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true

	styles := []struct {
		recipe string
		color  color.Color
		shape  draw.GlyphDrawer
	}{
		{"naive", color.RGBA{R: 200, G: 40, B: 40, A: 255}, draw.CircleGlyph{}},
		{"zkrecipes", color.RGBA{R: 30, G: 100, B: 200, A: 255}, draw.SquareGlyph{}},
	}
	for _, s := range styles {
		var xys plotter.XYs
		for _, r := range results {
			if r.Recipe == s.recipe {
				xys = append(xys, plotter.XY{X: float64(r.Contenders), Y: r.EventsPerRelease})
			}
		}
		if len(xys) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("plotting %s: %w", s.recipe, err)
		}
		line.Color = s.color
		line.Width = vg.Points(1.5)
		points.Color = s.color
		points.Shape = s.shape
		points.Radius = vg.Points(3)
		p.Add(line, points)
		p.Legend.Add(demoLabel(s.recipe), line, points)
	}
	if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, file); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return nil
}
