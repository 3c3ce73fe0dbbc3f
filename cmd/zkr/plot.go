package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// chart is one of the demo's plots: lines and points on a grid, with a
// legend, saved as SVG or PNG by the file name's extension.
type chart struct{ p *plot.Plot }

// series is how one line or set of points is drawn.
type series struct {
	color color.Color
	shape draw.GlyphDrawer
}

func newChart(title, x, y string) *chart {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	return &chart{p: p}
}

// line draws the points (xs[i], ys[i]) joined by a line; nothing if there
// are none.
func (c *chart) line(name string, s series, xs, ys []float64) error {
	if len(xs) == 0 {
		return nil
	}
	line, points, err := plotter.NewLinePoints(xys(xs, ys))
	if err != nil {
		return fmt.Errorf("plotting %s: %w", name, err)
	}
	line.Color = s.color
	line.Width = vg.Points(1.5)
	points.Color = s.color
	points.Shape = s.shape
	points.Radius = vg.Points(3)
	c.p.Add(line, points)
	c.p.Legend.Add(name, line, points)
	return nil
}

// steps draws ys against xs as a staircase without points (a count or a
// value over time).
func (c *chart) steps(name string, s series, xs, ys []float64) error {
	if len(xs) == 0 {
		return nil
	}
	line, err := plotter.NewLine(xys(xs, ys))
	if err != nil {
		return fmt.Errorf("plotting %s: %w", name, err)
	}
	line.StepStyle = plotter.PostStep
	line.Color = s.color
	line.Width = vg.Points(1.5)
	c.p.Add(line)
	c.p.Legend.Add(name, line)
	return nil
}

// points draws unjoined points.
func (c *chart) points(name string, s series, xs, ys []float64) error {
	if len(xs) == 0 {
		return nil
	}
	sc, err := plotter.NewScatter(xys(xs, ys))
	if err != nil {
		return fmt.Errorf("plotting %s: %w", name, err)
	}
	sc.Color = s.color
	sc.Shape = s.shape
	sc.Radius = vg.Points(3)
	c.p.Add(sc)
	c.p.Legend.Add(name, sc)
	return nil
}

// dashed draws a dashed line through the points, a reference rather than
// a measurement.
func (c *chart) dashed(name string, col color.Color, xs, ys []float64) error {
	line, err := plotter.NewLine(xys(xs, ys))
	if err != nil {
		return fmt.Errorf("plotting %s: %w", name, err)
	}
	line.Color = col
	line.Width = vg.Points(1)
	line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	c.p.Add(line)
	c.p.Legend.Add(name, line)
	return nil
}

func (c *chart) save(file string) error {
	if err := c.p.Save(16*vg.Centimeter, 10*vg.Centimeter, file); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return nil
}

func xys(xs, ys []float64) plotter.XYs {
	pts := make(plotter.XYs, len(xs))
	for i := range xs {
		pts[i] = plotter.XY{X: xs[i], Y: ys[i]}
	}
	return pts
}
