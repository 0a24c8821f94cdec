package report

import (
	"bufio"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// How the timeline tells dense events apart.
const (
	// denseGap is how close (in user units) two markers or ticks may come before they
	// are drawn thin: at 1 unit wide they would merge into a bar.
	denseGap = 3.0
	// digitWidth is the width of a digit of the 9-unit label font, about.
	digitWidth = 5.5
	laneHeight = 14
	listRow    = 13
	// charWidth is the average width of a character of the listing's 10-unit font,
	// generously: a line cut to its column's width at this rate does not overflow.
	charWidth = 6.0
)

// markerKind reports whether events of kind are drawn as markers across the panels:
// faults and lease changes. Every event has a tick in its lane.
func markerKind(kind string) bool { return kind == KindFault || kind == KindLease }

// placed is an event with its position on the time axis and its number in the listing.
type placed struct {
	n int // 1-based, as listed
	x float64
	e Event
}

// thin marks the items too close to a neighbour to be drawn at full width.
func thin(items []placed) []bool {
	out := make([]bool, len(items))
	for i := range items {
		if i > 0 && items[i].x-items[i-1].x < denseGap {
			out[i], out[i-1] = true, true
		}
	}
	return out
}

// labeller places number labels in rows, left to right, each only where it does not
// overlap the label before it in its row.
type labeller struct{ ends []float64 }

func newLabeller(rows int) *labeller {
	l := &labeller{ends: make([]float64, rows)}
	for i := range l.ends {
		l.ends[i] = math.Inf(-1)
	}
	return l
}

// place returns the row for a label of width w at x, or -1 when it fits in none.
func (l *labeller) place(x, w float64) int {
	for i, end := range l.ends {
		if x >= end+2 {
			l.ends[i] = x + w
			return i
		}
	}
	return -1
}

func labelWidth(n int) float64 { return float64(len(fmt.Sprint(n)))*digitWidth + 2 }

// events places every event, numbered in order.
func (r *Report) placedEvents(x func(time.Duration) float64) []placed {
	out := make([]placed, len(r.Events))
	for i, e := range r.Events {
		out[i] = placed{n: i + 1, x: x(e.At.Sub(r.Start)), e: e}
	}
	return out
}

// markers draws every fault and lease change as a vertical line across both panels,
// from the label band down, numbered where the number fits.
func (r *Report) markers(bw *bufio.Writer, top, bottom int, x func(time.Duration) float64) {
	var ms []placed
	for _, p := range r.placedEvents(x) {
		if markerKind(p.e.Kind) {
			ms = append(ms, p)
		}
	}
	dense := thin(ms)
	labels := newLabeller(labelRows)
	// Faults are drawn over the lease changes they cause, a few ms later: on a long run
	// both fall on one line, and the fault's colour is the one to see.
	var lines [2][]string
	for i, m := range ms {
		c := kindColor[m.e.Kind]
		style := `stroke-width="1"`
		if m.e.Kind == KindLease {
			style += ` stroke-dasharray="4 3"`
		}
		if dense[i] {
			style = `stroke-width="0.5" stroke-opacity="0.6"`
			if m.e.Kind == KindFault {
				style = `stroke-width="0.6" stroke-opacity="0.9"`
			}
		}
		y1 := top
		if row := labels.place(m.x+1, labelWidth(m.n)); row >= 0 {
			ly := labelTop + (row+1)*labelRow
			y1 = ly + 2
			fmt.Fprintf(bw, `<text class="marker-label" x="%.1f" y="%d" font-size="9" fill="%s">%d</text>`+"\n", m.x+1, ly, c, m.n)
		}
		layer := 0
		if m.e.Kind == KindFault {
			layer = 1
		}
		lines[layer] = append(lines[layer], fmt.Sprintf(`<line class="marker" data-event="%d" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" %s><title>%s</title></line>`+"\n",
			m.n, m.x, y1, m.x, bottom, c, style, esc(eventLine(r.Start, m.n, m.e))))
	}
	for _, layer := range lines {
		for _, l := range layer {
			bw.WriteString(l)
		}
	}
}

// lanesHeight is the height of the lanes: one for the cycles when there are any, one
// per kind of event.
func (r *Report) lanesHeight() int {
	n := len(kinds)
	if len(r.Cycles) > 0 {
		n++
	}
	return n * laneHeight
}

// lanes draws a lane per kind of event with a tick for each event of that kind, and
// above them the cycles, numbered where the number fits.
func (r *Report) lanes(bw *bufio.Writer, top int, x func(time.Duration) float64) {
	y := top
	if len(r.Cycles) > 0 {
		r.cycleLane(bw, y, x)
		y += laneHeight
	}
	all := r.placedEvents(x)
	for _, k := range kinds {
		fmt.Fprintf(bw, `<text x="%d" y="%d" text-anchor="end" font-size="10" fill="%s">%s</text>`+"\n", marginLeft-6, y+laneHeight-4, kindColor[k], k)
		fmt.Fprintf(bw, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#eee"/>`+"\n", marginLeft, y+laneHeight-1, marginLeft+plotWidth, y+laneHeight-1)
		var ts []placed
		for _, p := range all {
			if p.e.Kind == k {
				ts = append(ts, p)
			}
		}
		dense := thin(ts)
		for i, t := range ts {
			width := "1"
			if dense[i] {
				width = "0.5"
			}
			fmt.Fprintf(bw, `<line class="tick" data-event="%d" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="%s"><title>%s</title></line>`+"\n",
				t.n, t.x, y+2, t.x, y+laneHeight-2, kindColor[k], width, esc(eventLine(r.Start, t.n, t.e)))
		}
		y += laneHeight
	}
}

// cycleBands shades every other cycle behind the panels, and a cycle in which a
// check failed in red, so that a violation naming a cycle can be found on the plot.
func (r *Report) cycleBands(bw *bufio.Writer, top, bottom int, x func(time.Duration) float64) {
	failed := r.failedCycles()
	for _, c := range r.Cycles {
		fill := ""
		switch {
		case len(failed[c.N]) > 0:
			fill = "#fde3e3"
		case c.N%2 == 0:
			fill = "#f4f4f4"
		default:
			continue
		}
		x1, x2 := x(c.From.Sub(r.Start)), x(c.To.Sub(r.Start))
		fmt.Fprintf(bw, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x1, top, math.Max(x2-x1, 0.5), bottom-top, fill)
	}
}

// cycleLane draws each cycle as a box in a lane of its own, numbered where it fits.
func (r *Report) cycleLane(bw *bufio.Writer, y int, x func(time.Duration) float64) {
	failed := r.failedCycles()
	fmt.Fprintf(bw, `<text x="%d" y="%d" text-anchor="end" font-size="10" fill="#444">cycles</text>`+"\n", marginLeft-6, y+laneHeight-4)
	for _, c := range r.Cycles {
		x1, x2 := x(c.From.Sub(r.Start)), x(c.To.Sub(r.Start))
		fill, what := "#f4f4f4", "passed"
		if c.N%2 == 1 {
			fill = "#e4e4e4"
		}
		if f := failed[c.N]; len(f) > 0 {
			fill, what = "#f4a5a5", "failed "+strings.Join(f, ", ")
		}
		fmt.Fprintf(bw, `<rect class="cycle" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>cycle %d: +%s to +%s, %s</title></rect>`+"\n",
			x1, y+1, math.Max(x2-x1, 0.5), laneHeight-2, fill, c.N, offset(c.From.Sub(r.Start)), offset(c.To.Sub(r.Start)), esc(what))
		if x2-x1 >= labelWidth(c.N)+2 {
			fmt.Fprintf(bw, `<text x="%.1f" y="%d" font-size="9" text-anchor="middle" fill="#333">%d</text>`+"\n", (x1+x2)/2, y+laneHeight-4, c.N)
		}
	}
}

// eventLine is an event as the tooltips and the listing show it.
func eventLine(start time.Time, n int, e Event) string {
	return fmt.Sprintf("%d  +%s %s %s: %s", n, offset(e.At.Sub(start)), e.Kind, e.Subject, e.Detail)
}

// listing is the numbered list of every event, in as many columns as keep it short.
type listing struct {
	lines []string
	kinds []string
	cols  int
}

func (r *Report) listing() listing {
	l := listing{cols: 1}
	switch n := len(r.Events); {
	case n > 150:
		l.cols = 3
	case n > 40:
		l.cols = 2
	}
	for i, e := range r.Events {
		// The colour says the kind; the tooltip and the table say it in words.
		l.lines = append(l.lines, fmt.Sprintf("%d  +%s %s: %s", i+1, offset(e.At.Sub(r.Start)), e.Subject, e.Detail))
		l.kinds = append(l.kinds, e.Kind)
	}
	return l
}

func (l listing) rows() int { return (len(l.lines) + l.cols - 1) / l.cols }

// height is the listing's height: its heading and its rows.
func (l listing) height() int { return 40 + l.rows()*listRow }

// write draws the heading (with the colour of each kind) and the events, column by
// column. A line too long for its column is cut, and whole in its tooltip.
func (l listing) write(bw *bufio.Writer, top int) {
	y := top + 26
	fmt.Fprintf(bw, `<text x="%d" y="%d" font-weight="bold">events</text>`+"\n", marginLeft, y)
	kx := marginLeft + 60
	for _, k := range kinds {
		fmt.Fprintf(bw, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			kx, y-9, kindColor[k], kx+14, y, k)
		kx += 70
	}
	fmt.Fprintf(bw, `<text x="%d" y="%d" fill="#444" font-size="10">markers and ticks are numbered as listed here; hover one for its event</text>`+"\n", kx+10, y)
	colWidth := float64(plotWidth) / float64(l.cols)
	fit := int((colWidth - 8) / charWidth)
	rows := l.rows()
	for i, line := range l.lines {
		col, row := i/rows, i%rows
		shown := line
		if utf8.RuneCountInString(line) > fit {
			shown = string([]rune(line)[:fit-1]) + "…"
		}
		fmt.Fprintf(bw, `<text class="listing" data-event="%d" x="%.1f" y="%d" font-size="10" fill="%s">%s<title>%s: %s</title></text>`+"\n",
			i+1, marginLeft+float64(col)*colWidth, y+8+(row+1)*listRow, kindColor[l.kinds[i]], esc(shown), l.kinds[i], esc(line))
	}
}
