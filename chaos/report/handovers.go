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
	// Steady is the same measure over a window as long as [At, Until] with no handover
	// in it, halfway between Until and the next handover (or the last reply): what the
	// machine's own noise gives, to read Gap against. 0 when there was no room.
	Steady time.Duration `json:"steady_gap_ns"`
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
		hv.Gap, hv.GapFrom, hv.Replies = longestGap(oks, hv.At, hv.Until)
		hv.Steady = 0
		limit := time.Time{}
		switch {
		case i+1 < len(hvs):
			limit = hvs[i+1].At
		case len(oks) > 0:
			limit = oks[len(oks)-1]
		}
		span := hv.Until.Sub(hv.At)
		if from := hv.Until.Add(limit.Sub(hv.Until) / 2); !limit.IsZero() && !from.Add(span).After(limit) {
			hv.Steady, _, _ = longestGap(oks, from, from.Add(span))
		}
		out[i] = hv
	}
	return out
}

// longestGap is the longest stretch between successive replies of oks (sorted) whose
// later reply falls in [from, to], when it began, and how many replies fell there.
func longestGap(oks []time.Time, from, to time.Time) (gap time.Duration, began time.Time, replies int) {
	j, _ := slices.BinarySearchFunc(oks, from, func(ok, t time.Time) int { return ok.Compare(t) })
	for ; j < len(oks) && !oks[j].After(to); j++ {
		// A reply exactly at from is in the window: the stretch before it counts.
		replies++
		if j == 0 {
			continue
		}
		if d := oks[j].Sub(oks[j-1]); d > gap {
			gap, began = d, oks[j-1]
		}
	}
	return gap, began, replies
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
	steady := make([]time.Duration, 0, len(r.Handovers))
	for _, hv := range r.Handovers {
		if hv.Steady > 0 {
			steady = append(steady, hv.Steady)
		}
	}
	fmt.Fprintf(w, "\nhandovers: %d; longest time without a successful reply per handover: %s", len(gaps), medianMax(gaps))
	if len(steady) > 0 {
		fmt.Fprintf(w, "; in as long a window without one: %s", medianMax(steady))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HANDOVER\tAT\tOVER AT\tNO REPLY FOR\tFROM\tREPLIES\tWITHOUT ONE")
	for i, hv := range r.Handovers {
		from := "-"
		if !hv.GapFrom.IsZero() {
			from = "+" + offset(hv.GapFrom.Sub(r.Start))
		}
		steady := "-"
		if hv.Steady > 0 {
			steady = ms(hv.Steady)
		}
		fmt.Fprintf(tw, "%d\t+%s\t+%s\t%s\t%s\t%d\t%s\n", i+1, offset(hv.At.Sub(r.Start)), offset(hv.Until.Sub(r.Start)), ms(hv.Gap), from, hv.Replies, steady)
	}
	return tw.Flush()
}

// medianMax prints the median and the largest of ds.
func medianMax(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("median %s, max %s", ms(s[(len(s)-1)/2]), ms(s[len(s)-1]))
}

// ms prints d in milliseconds to a tenth.
func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }
