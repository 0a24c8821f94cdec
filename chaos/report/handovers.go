package report

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/abi-engine/engine/bench"
)

// Handover is one deploy of a scenario that hands the lease over under traffic, and
// how long the callers went without an answer around it, read from the calls' own
// timestamps rather than from the engines' states: what a caller saw.
type Handover struct {
	// At is when the handover began: the serving engine was told to stop.
	At time.Time `json:"at"`
	// Until is when the scenario saw it over: the old engine gone, the new one
	// serving (seen by polling, so a little late).
	Until time.Time `json:"until"`
	// Gap is the longest time without a successful reply over the handover: between
	// two successive successful replies (any worker's), the later one in [At, Until],
	// the earlier one possibly before At. 0 when no reply came in that window.
	Gap time.Duration `json:"gap_ns"`
	// GapFrom is when that stretch began: the successful reply before it.
	GapFrom time.Time `json:"gap_from,omitzero"`
	// Replies counts the successful replies in the window.
	Replies int `json:"replies"`
}

// Handovers measures the gap of each handover of hvs (At and Until set) in the calls
// of h. A stretch with no reply after it (the traffic stopped) is not a gap: the
// checks of the scenario judge calls that were never answered.
func Handovers(h []bench.Op, hvs []Handover) []Handover {
	var oks []time.Time
	for _, o := range h {
		if !o.Setup && !o.Failed() && !o.Interrupted && o.Instance != "" {
			oks = append(oks, o.Complete)
		}
	}
	slices.SortFunc(oks, func(a, b time.Time) int { return a.Compare(b) })
	out := make([]Handover, len(hvs))
	for i, hv := range hvs {
		hv.Gap, hv.GapFrom, hv.Replies = 0, time.Time{}, 0
		j, _ := slices.BinarySearchFunc(oks, hv.At, func(ok, t time.Time) int { return ok.Compare(t) })
		for ; j < len(oks) && !oks[j].After(hv.Until); j++ {
			// A reply exactly at At is after the handover began: the stretch before it
			// counts.
			hv.Replies++
			if j == 0 {
				continue
			}
			if d := oks[j].Sub(oks[j-1]); d > hv.Gap {
				hv.Gap, hv.GapFrom = d, oks[j-1]
			}
		}
		out[i] = hv
	}
	return out
}

// writeHandovers prints the handovers' gaps: a summary line, then one line each.
func (r *Report) writeHandovers(w io.Writer) error {
	if len(r.Handovers) == 0 {
		return nil
	}
	gaps := make([]time.Duration, len(r.Handovers))
	for i, hv := range r.Handovers {
		gaps[i] = hv.Gap
	}
	slices.Sort(gaps)
	fmt.Fprintf(w, "\nhandovers: %d; longest time without a successful reply per handover: median %s, max %s\n",
		len(gaps), ms(gaps[(len(gaps)-1)/2]), ms(gaps[len(gaps)-1]))
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HANDOVER\tAT\tOVER AT\tNO REPLY FOR\tFROM\tREPLIES")
	for i, hv := range r.Handovers {
		from := "-"
		if !hv.GapFrom.IsZero() {
			from = "+" + offset(hv.GapFrom.Sub(r.Start))
		}
		fmt.Fprintf(tw, "%d\t+%s\t+%s\t%s\t%s\t%d\n", i+1, offset(hv.At.Sub(r.Start)), offset(hv.Until.Sub(r.Start)), ms(hv.Gap), from, hv.Replies)
	}
	return tw.Flush()
}

// ms prints d in milliseconds to a tenth.
func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }
