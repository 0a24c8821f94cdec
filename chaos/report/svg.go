package report

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
)

// Geometry of the timeline, in SVG user units. From the top: the title, a band of
// marker labels, the throughput and latency panels over a shared time axis, a lane of
// ticks per kind of event, and the numbered listing of every event.
const (
	svgWidth    = 1200
	marginLeft  = 80
	marginRight = 30
	plotWidth   = svgWidth - marginLeft - marginRight
	labelTop    = 54 // the band of marker labels, above the first panel
	labelRow    = 10
	labelRows   = 3
	panelTop    = labelTop + labelRows*labelRow + 22
	panelHeight = 170
	panelGap    = 50
	axisHeight  = 40
)

// latency axis: a log scale from 100 µs to 10 s.
var (
	latMin = 100 * time.Microsecond
	latMax = 10 * time.Second
)

var kindColor = map[string]string{
	KindFault: "#d62728",
	KindLease: "#1f77b4",
	KindState: "#9467bd",
	KindExit:  "#7f7f7f",
	KindStep:  "#2ca02c",
	KindStore: "#ff7f0e",
}

// kinds in the order of their lanes.
var kinds = []string{KindFault, KindLease, KindState, KindExit, KindStep, KindStore}

// WriteSVG draws the run as a standalone SVG: successful calls per second (failed calls
// as red bars) and latency (p50, p99 and max per slice, log scale) over time, the
// cycles of a repeating scenario as bands behind them (red where a check failed),
// every fault and lease change as a vertical marker across both panels, every event as
// a tick in its kind's lane, and the numbered listing of every event below. Markers
// and ticks too close to tell apart are drawn thin; a number labels a marker where it
// fits beside its neighbours'. Each marker and tick carries its event as a tooltip.
func (r *Report) WriteSVG(w io.Writer) error {
	bw := bufio.NewWriter(w)
	total := r.Elapsed
	if total <= 0 {
		total = time.Second
	}
	x := func(d time.Duration) float64 {
		return marginLeft + float64(plotWidth)*math.Min(math.Max(d.Seconds()/total.Seconds(), 0), 1)
	}
	top1 := panelTop
	top2 := top1 + panelHeight + panelGap
	bottom := top2 + panelHeight
	lanesTop := bottom + axisHeight
	lanesBottom := lanesTop + r.lanesHeight()
	list := r.listing()
	height := lanesBottom + list.height() + 20

	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(bw, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	color := "#2ca02c"
	if !r.Passed {
		color = "#d62728"
	}
	fmt.Fprintf(bw, `<text x="%d" y="24" font-size="18" font-weight="bold">chaos %s: <tspan fill="%s">%s</tspan></text>`+"\n",
		marginLeft, esc(r.Scenario), color, verdict(r.Passed))
	fmt.Fprintf(bw, `<text x="%d" y="44" fill="#444">seed %d, lease %s, %s, %d calls (%d failed), %.0f calls/s, %d events: %s</text>`+"\n",
		marginLeft, r.Seed, r.Lease, r.Elapsed.Round(time.Millisecond), r.Traffic.Ops, r.Traffic.Errors, r.Throughput, len(r.Events), esc(r.Command))

	r.cycleBands(bw, top1, bottom, x)
	r.throughputPanel(bw, top1, x)
	r.latencyPanel(bw, top2, x)
	timeAxis(bw, bottom, total, x)
	r.markers(bw, top1, bottom, x)
	r.lanes(bw, lanesTop, x)
	list.write(bw, lanesBottom)
	fmt.Fprintln(bw, "</svg>")
	return bw.Flush()
}

func esc(s string) string { return html.EscapeString(s) }

func (r *Report) throughputPanel(bw *bufio.Writer, top int, x func(time.Duration) float64) {
	width := r.BucketWidth
	if width <= 0 {
		width = time.Second
	}
	peak := 1.0
	for _, b := range r.Series {
		peak = math.Max(peak, float64(b.OK+b.Failed)/width.Seconds())
	}
	peak = niceCeil(peak)
	y := func(v float64) float64 { return float64(top+panelHeight) - float64(panelHeight)*v/peak }
	frame(bw, top, "calls/s")
	for i := 0; i <= 4; i++ {
		v := peak * float64(i) / 4
		fmt.Fprintf(bw, `<text x="%d" y="%.1f" text-anchor="end" font-size="10">%s</text>`+"\n", marginLeft-6, y(v)+3, compact(v))
		gridLine(bw, y(v))
	}
	var ok []string
	for _, b := range r.Series {
		mid := b.Offset + width/2
		ok = append(ok, fmt.Sprintf("%.1f,%.1f", x(mid), y(float64(b.OK)/width.Seconds())))
		if b.Failed > 0 {
			h := float64(panelHeight) * float64(b.Failed) / width.Seconds() / peak
			fmt.Fprintf(bw, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#d62728" opacity="0.7"><title>%d failed</title></rect>`+"\n",
				x(b.Offset), float64(top+panelHeight)-h, math.Max(x(b.Offset+width)-x(b.Offset), 1), h, b.Failed)
		}
	}
	if len(ok) > 0 {
		fmt.Fprintf(bw, `<polyline fill="none" stroke="#2ca02c" stroke-width="1.5" points="%s"/>`+"\n", strings.Join(ok, " "))
	}
	fmt.Fprintf(bw, `<text x="%d" y="%d" fill="#2ca02c">answered</text><text x="%d" y="%d" fill="#d62728">failed</text>`+"\n",
		svgWidth-marginRight-120, top-6, svgWidth-marginRight-50, top-6)
}

func (r *Report) latencyPanel(bw *bufio.Writer, top int, x func(time.Duration) float64) {
	lo, hi := math.Log10(latMin.Seconds()), math.Log10(latMax.Seconds())
	y := func(d time.Duration) float64 {
		v := math.Log10(math.Min(math.Max(d.Seconds(), latMin.Seconds()), latMax.Seconds()))
		return float64(top+panelHeight) - float64(panelHeight)*(v-lo)/(hi-lo)
	}
	frame(bw, top, "latency")
	for _, d := range []time.Duration{100 * time.Microsecond, time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, time.Second, 10 * time.Second} {
		fmt.Fprintf(bw, `<text x="%d" y="%.1f" text-anchor="end" font-size="10">%s</text>`+"\n", marginLeft-6, y(d)+3, d)
		gridLine(bw, y(d))
	}
	width := r.BucketWidth
	series := []struct {
		name, color string
		get         func(Bucket) time.Duration
	}{
		{"max", "#bbbbbb", func(b Bucket) time.Duration { return b.Max }},
		{"p99", "#ff7f0e", func(b Bucket) time.Duration { return b.P99 }},
		{"p50", "#1f77b4", func(b Bucket) time.Duration { return b.P50 }},
	}
	for i, s := range series {
		// A slice without answered calls has no latency: the line breaks there rather
		// than bridging the gap.
		var pts []string
		flush := func() {
			if len(pts) > 0 {
				fmt.Fprintf(bw, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", s.color, strings.Join(pts, " "))
			}
			pts = nil
		}
		for _, b := range r.Series {
			if b.OK == 0 {
				flush()
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(b.Offset+width/2), y(s.get(b))))
		}
		flush()
		fmt.Fprintf(bw, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", svgWidth-marginRight-150+i*50, top-6, s.color, s.name)
	}
}

func frame(bw *bufio.Writer, top int, label string) {
	fmt.Fprintf(bw, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", marginLeft, top, plotWidth, panelHeight)
	fmt.Fprintf(bw, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", marginLeft, top-6, label)
}

func gridLine(bw *bufio.Writer, y float64) {
	fmt.Fprintf(bw, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`+"\n", marginLeft, y, marginLeft+plotWidth, y)
}

func timeAxis(bw *bufio.Writer, y int, total time.Duration, x func(time.Duration) float64) {
	step := niceStep(total.Seconds() / 10)
	for s := 0.0; s <= total.Seconds()+1e-9; s += step {
		xx := x(time.Duration(s * float64(time.Second)))
		fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#888"/>`+"\n", xx, y, xx, y+4)
		fmt.Fprintf(bw, `<text x="%.1f" y="%d" text-anchor="middle" font-size="10">%ss</text>`+"\n", xx, y+16, trimFloat(s))
	}
	fmt.Fprintf(bw, `<text x="%d" y="%d" text-anchor="end" fill="#444">time since the start</text>`+"\n", marginLeft+plotWidth, y+32)
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// niceStep is a tick step of 1, 2 or 5 times a power of ten, at least v.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	return niceCeil(v)
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

func compact(v float64) string {
	switch {
	case v >= 1e6:
		return trimFloat(v/1e6) + "M"
	case v >= 1e3:
		return trimFloat(v/1e3) + "k"
	}
	return trimFloat(v)
}
