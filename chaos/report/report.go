// Package report is what a chaos scenario leaves behind: the verdict of every checker,
// the events (faults, lease changes, engine states, process exits), the traffic's
// aggregates and its throughput and latency over time. A Report prints as a text table,
// encodes as JSON and draws itself as an SVG timeline a person can open in a browser.
// It is plain data: building it runs nothing.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/chaos/check"
)

// Event kinds.
const (
	KindFault = "fault" // an injected fault
	KindLease = "lease" // the lease changed holder (renewals are left out)
	KindState = "state" // an engine changed state
	KindExit  = "exit"  // an engine process or in-process engine ended
	KindStep  = "step"  // a step of the scenario (an engine started, traffic began)
	KindStore = "store" // the lease stream's leader changed (a cluster)
)

// Event is one thing that happened during a scenario.
type Event struct {
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"`
	Subject string    `json:"subject"`
	Detail  string    `json:"detail"`
}

// Instance is an engine the scenario ran.
type Instance struct {
	Name      string `json:"name"`
	ID        string `json:"instance_id"`
	Process   bool   `json:"process"`
	PID       int    `json:"pid,omitempty"`
	RolloutID string `json:"rollout_id,omitempty"`
	// End says how it ended: "exit 0", "exit 1", "killed (SIGKILL)", "lost: ...",
	// "shut down".
	End string `json:"end,omitempty"`
}

// Bucket is the traffic of one slice of the run's time line.
type Bucket struct {
	// Offset is the slice's start after Report.Start.
	Offset time.Duration `json:"offset_ns"`
	// OK and Failed count the calls that completed within the slice.
	OK     int64 `json:"ok"`
	Failed int64 `json:"failed"`
	// Latency of the successful calls completed within the slice; 0 when none.
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// Report is the outcome of one scenario run.
type Report struct {
	Scenario    string        `json:"scenario"`
	Description string        `json:"description"`
	Seed        int64         `json:"seed"`
	Duration    time.Duration `json:"duration_ns"`
	Lease       time.Duration `json:"lease_ns"`
	// Command reproduces the run.
	Command string        `json:"command"`
	Start   time.Time     `json:"start"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// Passed is true when the scenario ran to its end and every check passed.
	Passed bool `json:"passed"`
	// Error is why the scenario could not run to its end; its checks then judge what
	// was recorded until then.
	Error     string         `json:"error,omitempty"`
	Checks    []check.Result `json:"checks"`
	Instances []Instance     `json:"instances"`
	// Cycles are the fault cycles of the run, each from when it began to when the next
	// one did (the last to the end of the run); a check of a repeating scenario judges
	// each on its own, and its violations name the cycle.
	Cycles []check.Cycle `json:"cycles,omitempty"`
	// Handovers are the deploys of a scenario that hands over under traffic
	// (rolling-deploy, handover), each with the longest time its callers went without
	// a successful reply.
	Handovers []Handover `json:"handovers,omitempty"`
	// StoreOutages are the stretches the lease's store could take no write (a
	// cluster's lease stream without a leader), the broker's own unavailability.
	StoreOutages []StoreOutage `json:"store_outages,omitempty"`
	// Events are everything that happened, in order: every fault, lease change, engine
	// state, exit and step.
	Events []Event `json:"events"`
	// Traffic are the aggregates of the calls the scenario drove.
	Traffic    bench.Summary `json:"traffic"`
	Throughput float64       `json:"ops_per_sec"`
	// Series is the traffic over time, in slices of BucketWidth.
	BucketWidth time.Duration `json:"bucket_width_ns"`
	Series      []Bucket      `json:"series"`
}

// Finish computes Passed from Error and the checks.
func (r *Report) Finish() {
	r.Passed = r.Error == "" && len(r.Checks) > 0
	for _, c := range r.Checks {
		if !c.Passed {
			r.Passed = false
		}
	}
}

// Failed lists the checks that failed.
func (r *Report) Failed() []check.Result {
	var out []check.Result
	for _, c := range r.Checks {
		if !c.Passed {
			out = append(out, c)
		}
	}
	return out
}

// targetBuckets is how many slices the time line is cut into, about.
const targetBuckets = 120

// Series cuts the measured calls of h into slices of about elapsed/120 (at least
// 50 ms) from start and computes each slice's counts and latency.
func Series(h []bench.Op, start time.Time, elapsed time.Duration) (time.Duration, []Bucket) {
	width := max((elapsed / targetBuckets).Round(10*time.Millisecond), 50*time.Millisecond)
	n := max(int((elapsed+width-1)/width), 1)
	buckets := make([]Bucket, n)
	lat := make([][]time.Duration, n)
	for i := range buckets {
		buckets[i].Offset = time.Duration(i) * width
	}
	for _, op := range h {
		if op.Setup || op.Interrupted {
			continue
		}
		i := int(op.Complete.Sub(start) / width)
		if i < 0 || i >= n {
			continue
		}
		if op.Failed() {
			buckets[i].Failed++
			continue
		}
		buckets[i].OK++
		lat[i] = append(lat[i], op.Latency())
	}
	for i, l := range lat {
		if len(l) == 0 {
			continue
		}
		slices.Sort(l)
		buckets[i].P50 = l[(len(l)-1)/2]
		buckets[i].P99 = l[(len(l)-1)*99/100]
		buckets[i].Max = l[len(l)-1]
	}
	return width, buckets
}

// failedCycles are the cycles in which a check failed, with the checks' names.
func (r *Report) failedCycles() map[int][]string {
	out := map[int][]string{}
	for _, c := range r.Checks {
		for _, n := range check.FailedCycles([]check.Result{c}) {
			out[n] = append(out[n], c.Name)
		}
	}
	return out
}

// verdict is PASS or FAIL.
func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// Table writes the report as text: the run, the traffic, every check (with the
// violations of those that failed), the cycles, the instances and every event.
func (r *Report) Table(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s: %s\n", r.Scenario, verdict(r.Passed))
	fmt.Fprintf(&b, "  %s\n", r.Description)
	fmt.Fprintf(&b, "  seed %d, lease %s, ran %s\n", r.Seed, r.Lease, r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(&b, "  reproduce: %s\n", r.Command)
	if r.Error != "" {
		fmt.Fprintf(&b, "  error: %s\n", r.Error)
	}
	t := r.Traffic
	fmt.Fprintf(&b, "\ntraffic: %d calls, %d failed, %.0f calls/s, p50 %s, p99 %s, max %s\n",
		t.Ops, t.Errors, r.Throughput, t.Latency.P50, t.Latency.P99, t.Latency.Max)
	if len(t.ErrorsByCode) > 0 {
		codes := make([]string, 0, len(t.ErrorsByCode))
		for c, n := range t.ErrorsByCode {
			codes = append(codes, fmt.Sprintf("%s %d", c, n))
		}
		slices.Sort(codes)
		fmt.Fprintf(&b, "  failures: %s\n", strings.Join(codes, ", "))
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if err := r.writeHandovers(w); err != nil {
		return err
	}
	if err := r.writeStoreOutages(w); err != nil {
		return err
	}
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT\tSUMMARY")
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, verdict(c.Passed), c.Summary)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range r.Failed() {
		fmt.Fprintf(w, "\n%s: %d violation(s)\n", c.Name, c.Count)
		for _, cy := range c.Cycles {
			if !cy.Passed {
				fmt.Fprintf(w, "  %s\n", cy.Summary)
			}
		}
		for _, d := range c.Details {
			fmt.Fprintf(w, "  - %s\n", d)
		}
		switch more := c.Count - len(c.Details); {
		case more > 0 && len(c.Cycles) > 0:
			fmt.Fprintf(w, "  (%d more: report.json lists up to %d per cycle)\n", more, check.MaxViolations)
		case more > 0:
			fmt.Fprintf(w, "  (%d more not listed)\n", more)
		}
	}

	if len(r.Cycles) > 0 {
		failed := r.failedCycles()
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CYCLE\tFROM\tTO\tRESULT")
		for _, c := range r.Cycles {
			res := "PASS"
			if f := failed[c.N]; len(f) > 0 {
				res = "FAIL " + strings.Join(f, ", ")
			}
			fmt.Fprintf(tw, "%d\t+%s\t+%s\t%s\n", c.N, offset(c.From.Sub(r.Start)), offset(c.To.Sub(r.Start)), res)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENGINE\tINSTANCE\tKIND\tROLLOUT\tCALLS\tEND")
	for _, in := range r.Instances {
		kind := "in-process"
		if in.Process {
			kind = fmt.Sprintf("process %d", in.PID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", in.Name, Short(in.ID), kind, orDash(in.RolloutID), t.Instances[in.ID], orDash(in.End))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tKIND\tSUBJECT\tEVENT")
	for _, e := range r.Events {
		fmt.Fprintf(tw, "+%s\t%s\t%s\t%s\n", offset(e.At.Sub(r.Start)), e.Kind, e.Subject, e.Detail)
	}
	return tw.Flush()
}

func offset(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Short abbreviates a 32-hex instance id to its first 8 digits.
func Short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// WriteJSON writes the report as indented JSON (durations in nanoseconds).
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
