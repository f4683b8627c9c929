package testnet

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// The report plots are hand-written SVG: three line and bar charts do not
// justify a plotting library (gonum/plot would pull in a font and image
// stack), and SVG opens in any browser and diffs as text.

// series is one named line of a chart.
type series struct {
	Name string
	X, Y []float64
}

// chart is a line or bar chart in data coordinates.
type chart struct {
	Title, XLabel, YLabel string
	Series                []series
	// Bars draws the first series as bars of width BarWidth (a histogram).
	Bars     bool
	BarWidth float64
}

const (
	plotW, plotH             = 760, 420
	marginL, marginR         = 70, 170
	marginT, marginB         = 40, 55
	innerW                   = plotW - marginL - marginR
	innerH                   = plotH - marginT - marginB
	svgFont                  = `font-family="sans-serif" font-size="12"`
	ticksWanted              = 6
	legendLineHeight float64 = 16
)

// palette is Tableau 10: distinguishable and readable when printed.
var palette = [...]string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

// SVG renders the chart. Empty series give an empty frame with the title,
// never an error: a report of a run that fetched nothing still renders.
func (c chart) SVG() string {
	x0, x1, y0, y1 := math.Inf(1), math.Inf(-1), 0.0, math.Inf(-1)
	for _, s := range c.Series {
		for i := range s.X {
			x0, x1 = math.Min(x0, s.X[i]), math.Max(x1, s.X[i])
			y1 = math.Max(y1, s.Y[i])
		}
	}
	if c.Bars {
		x1 += c.BarWidth
	}
	if math.IsInf(x0, 0) {
		x0, x1, y1 = 0, 1, 1
	}
	if x1 <= x0 {
		x1 = x0 + 1
	}
	if y1 <= y0 {
		y1 = y0 + 1
	}
	xt, yt := niceTicks(x0, x1), niceTicks(y0, y1)
	x0, x1 = math.Min(x0, xt[0]), math.Max(x1, xt[len(xt)-1])
	y1 = math.Max(y1, yt[len(yt)-1])
	px := func(x float64) float64 { return marginL + (x-x0)/(x1-x0)*innerW }
	py := func(y float64) float64 { return marginT + innerH - (y-y0)/(y1-y0)*innerH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" %s>`+"\n", plotW, plotH, plotW, plotH, svgFont)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", marginL, html.EscapeString(c.Title))
	for _, t := range xt {
		x := px(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e5e5e5"/>`, x, marginT, x, marginT+innerH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, marginT+innerH+16, fmtTick(t))
	}
	for _, t := range yt {
		y := py(t)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`, marginL, y, marginL+innerW, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginL-6, y+4, fmtTick(t))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", marginL, marginT, innerW, innerH)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", marginL+innerW/2, plotH-12, html.EscapeString(c.XLabel))
	fmt.Fprintf(&b, `<text transform="translate(16 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", marginT+innerH/2, html.EscapeString(c.YLabel))

	for i, s := range c.Series {
		color := palette[i%len(palette)]
		if c.Bars && i == 0 {
			w := px(x0+c.BarWidth) - px(x0)
			for j := range s.X {
				top := py(s.Y[j])
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", px(s.X[j]), top, math.Max(w-1, 1), py(0)-top, color)
			}
		} else if len(s.X) > 0 {
			var pts strings.Builder
			for j := range s.X {
				fmt.Fprintf(&pts, "%.1f,%.1f ", px(s.X[j]), py(s.Y[j]))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`+"\n", color, strings.TrimSpace(pts.String()))
		}
		ly := float64(marginT) + 8 + float64(i)*legendLineHeight
		fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="12" height="10" fill="%s"/>`, marginL+innerW+12, ly-9, color)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f">%s</text>`+"\n", marginL+innerW+30, ly, html.EscapeString(s.Name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceTicks returns about ticksWanted round values covering [lo, hi].
func niceTicks(lo, hi float64) []float64 {
	span := hi - lo
	raw := span / ticksWanted
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ticks []float64
	for t := math.Floor(lo/step) * step; t <= hi+step*1e-9; t += step {
		ticks = append(ticks, t)
	}
	if ticks[len(ticks)-1] < hi {
		ticks = append(ticks, ticks[len(ticks)-1]+step)
	}
	return ticks
}

func fmtTick(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e9 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}
