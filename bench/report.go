package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what a run did. Its JSON (WriteJSON) carries durations in nanoseconds.
type Report struct {
	// Config is the run's configuration, with the KeyPrefix it used. RawNATS reports
	// Service "nats" and Workload "echo".
	Config Config `json:"config"`
	// Start is when the measured run began (after any seeding).
	Start time.Time `json:"start"`
	// Elapsed runs from Start until the last worker ended (the calls in flight at the
	// stop included).
	Elapsed time.Duration `json:"elapsed_ns"`
	// StoppedBy is why the run ended: StoppedByCount, StoppedByDuration, StoppedByStop or
	// StoppedByContext.
	StoppedBy string `json:"stopped_by"`
	// Throughput is successful operations per second of Elapsed.
	Throughput float64 `json:"ops_per_sec"`
	Summary
	// History is every Op, seeding and cleanup included, in the order they completed;
	// empty WithoutHistory.
	History []Op `json:"history,omitempty"`
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("bench: write report: %w", err)
	}
	return nil
}

// Table writes the report as aligned text: the run, its totals, errors by code,
// operations per instance, and latency percentiles per kind and over all kinds.
func (r *Report) Table(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	c := r.Config
	fmt.Fprintf(tw, "service\t%s\n", c.Service)
	fmt.Fprintf(tw, "workload\t%s\n", c.Workload)
	fmt.Fprintf(tw, "concurrency\t%d\n", c.Concurrency)
	fmt.Fprintf(tw, "payload\t%d B\n", c.PayloadBytes)
	fmt.Fprintf(tw, "elapsed\t%s (stopped by %s)\n", fmtDuration(r.Elapsed), r.StoppedBy)
	fmt.Fprintf(tw, "ops\t%d\n", r.Ops)
	fmt.Fprintf(tw, "throughput\t%.1f ops/s\n", r.Throughput)
	fmt.Fprintf(tw, "errors\t%d\n", r.Errors)
	for _, code := range slices.Sorted(maps.Keys(r.ErrorsByCode)) {
		fmt.Fprintf(tw, "  %s\t%d\n", code, r.ErrorsByCode[code])
	}
	fmt.Fprintf(tw, "mismatches\t%d\n", r.Mismatches)
	if r.Interrupted > 0 {
		fmt.Fprintf(tw, "interrupted\t%d\n", r.Interrupted)
	}
	fmt.Fprintf(tw, "instances\t%d\n", len(r.Instances))
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("bench: write table: %w", err)
	}
	// Instance ids are long; a block of their own keeps the lines above narrow.
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, id := range slices.Sorted(maps.Keys(r.Instances)) {
		fmt.Fprintf(tw, "  %s\t%d ops\n", id, r.Instances[id])
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("bench: write table: %w", err)
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\nkind\tops\terrors\tmin\tp50\tp90\tp99\tp99.9\tmax\t")
	row := func(name string, ops, errs int64, l Latency) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, ops, errs,
			fmtDuration(l.Min), fmtDuration(l.P50), fmtDuration(l.P90), fmtDuration(l.P99), fmtDuration(l.P999), fmtDuration(l.Max))
	}
	for _, k := range slices.Sorted(maps.Keys(r.Kinds)) {
		s := r.Kinds[k]
		row(k, s.Ops, s.Errors, s.Latency)
	}
	row("all", r.Ops, r.Errors, r.Latency)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("bench: write table: %w", err)
	}
	return nil
}

// Comparison sets an engine run against raw NATS measured the same way: the ratios are
// engine over raw (throughput below 1 and latency above 1 are the engine's cost), 0
// where the raw figure is 0.
type Comparison struct {
	// Of names the measured run: "" is the engine; "KV put proxy" sets RawProxy
	// against the store's own write, the least a responder that writes costs.
	Of string `json:"of,omitempty"`
	// Against names the raw run: "raw NATS" (the plain echo), "header echo" (the
	// echo stamping the instance header), "direct KV put", "direct object put"
	// (RawStore) or "KV put proxy" (RawProxy).
	Against    string  `json:"against"`
	Throughput float64 `json:"throughput_ratio"`
	P50        float64 `json:"p50_ratio"`
	P99        float64 `json:"p99_ratio"`

	RawThroughput    float64       `json:"raw_ops_per_sec"`
	EngineThroughput float64       `json:"engine_ops_per_sec"`
	RawP50           time.Duration `json:"raw_p50_ns"`
	EngineP50        time.Duration `json:"engine_p50_ns"`
	RawP99           time.Duration `json:"raw_p99_ns"`
	EngineP99        time.Duration `json:"engine_p99_ns"`
}

// ProxyName names RawProxy's runs in comparisons.
const ProxyName = "KV put proxy"

// Compare sets engine against raw (RawNATS run with the same Config).
func Compare(raw, engine *Report) Comparison {
	against := "raw NATS"
	switch raw.Config.Workload {
	case RawHeaderWorkload:
		against = "header echo"
	case RawKVWorkload:
		against = "direct KV put"
	case RawObjectWorkload:
		against = "direct object put"
	case RawProxyWorkload:
		against = ProxyName
	}
	return Comparison{
		Against:          against,
		Throughput:       ratio(engine.Throughput, raw.Throughput),
		P50:              ratio(float64(engine.Latency.P50), float64(raw.Latency.P50)),
		P99:              ratio(float64(engine.Latency.P99), float64(raw.Latency.P99)),
		RawThroughput:    raw.Throughput,
		EngineThroughput: engine.Throughput,
		RawP50:           raw.Latency.P50,
		EngineP50:        engine.Latency.P50,
		RawP99:           raw.Latency.P99,
		EngineP99:        engine.Latency.P99,
	}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// String is the ratio line, e.g. "engine/raw NATS: throughput 0.87x (45123 vs 51870
// ops/s), p50 1.10x (330µs vs 300µs), p99 1.21x (1.21ms vs 1.00ms)".
func (c Comparison) String() string {
	var b strings.Builder
	against := c.Against
	if against == "" {
		against = "raw NATS"
	}
	b.WriteString(cmp.Or(c.Of, "engine") + "/" + against + ": throughput ")
	b.WriteString(fmtRatio(c.Throughput))
	fmt.Fprintf(&b, " (%.0f vs %.0f ops/s), p50 %s (%s vs %s), p99 %s (%s vs %s)",
		c.EngineThroughput, c.RawThroughput,
		fmtRatio(c.P50), fmtDuration(c.EngineP50), fmtDuration(c.RawP50),
		fmtRatio(c.P99), fmtDuration(c.EngineP99), fmtDuration(c.RawP99))
	return b.String()
}

func fmtRatio(r float64) string {
	if r == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", r)
}

// fmtDuration prints three significant digits or so, in the unit that fits.
func fmtDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	case d >= time.Microsecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	default:
		return fmt.Sprintf("%dns", int64(d))
	}
}
