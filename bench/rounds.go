package bench

import (
	"cmp"
	"fmt"
	"slices"
)

// Spread is the median of a figure over rounds, with its range.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// spreadOf is the Spread of vs (the zero Spread of none); an even count's median is
// the mean of the middle two.
func spreadOf(vs []float64) Spread {
	if len(vs) == 0 {
		return Spread{}
	}
	s := slices.Sorted(slices.Values(vs))
	mid := len(s) / 2
	median := s[mid]
	if len(s)%2 == 0 {
		median = (s[mid-1] + s[mid]) / 2
	}
	return Spread{Median: median, Min: s[0], Max: s[len(s)-1]}
}

// Rounds is a set of Comparisons against one baseline, one per round of interleaved
// runs, summarised as each ratio's median and range: the way to read an engine
// against raw NATS on a shared machine, where one pair of runs can be off by more than
// the difference it is meant to show.
type Rounds struct {
	Of               string `json:"of,omitempty"`
	Against          string `json:"against"`
	Rounds           int    `json:"rounds"`
	Throughput       Spread `json:"throughput_ratio"`
	P50              Spread `json:"p50_ratio"`
	P99              Spread `json:"p99_ratio"`
	RawThroughput    Spread `json:"raw_ops_per_sec"`
	EngineThroughput Spread `json:"engine_ops_per_sec"`
}

// SummarizeRounds sums up the comparisons of several rounds against the same
// baseline (their Against is the first one's).
func SummarizeRounds(cs []Comparison) Rounds {
	var tput, p50, p99, raw, eng []float64
	for _, c := range cs {
		tput, p50, p99 = append(tput, c.Throughput), append(p50, c.P50), append(p99, c.P99)
		raw, eng = append(raw, c.RawThroughput), append(eng, c.EngineThroughput)
	}
	r := Rounds{Rounds: len(cs), Throughput: spreadOf(tput), P50: spreadOf(p50), P99: spreadOf(p99),
		RawThroughput: spreadOf(raw), EngineThroughput: spreadOf(eng)}
	if len(cs) > 0 {
		r.Of, r.Against = cs[0].Of, cs[0].Against
	}
	return r
}

// String is the summary line, e.g. "engine/header echo over 5 rounds, median (range):
// throughput 0.96x (0.91x-0.99x) (41233 vs 43012 ops/s), p50 1.02x (0.98x-1.10x), p99
// 1.10x (1.01x-1.31x)".
func (r Rounds) String() string {
	return fmt.Sprintf("%s/%s over %d rounds, median (range): throughput %s (%.0f vs %.0f ops/s), p50 %s, p99 %s",
		cmp.Or(r.Of, "engine"), r.Against, r.Rounds, fmtSpread(r.Throughput), r.EngineThroughput.Median, r.RawThroughput.Median,
		fmtSpread(r.P50), fmtSpread(r.P99))
}

func fmtSpread(s Spread) string {
	return fmt.Sprintf("%s (%s-%s)", fmtRatio(s.Median), fmtRatio(s.Min), fmtRatio(s.Max))
}

// Phase names one run of a round of raw and engine runs.
type Phase int

// The phases of a round.
const (
	PhaseEcho       Phase = iota // RawNATS, the bare echo
	PhaseHeaderEcho              // RawNATS WithInstanceHeader
	PhaseEngine                  // Run against the engine
	PhaseStore                   // RawStore, the store's own write
	PhaseProxy                   // RawProxy, the store's write through a bare responder
)

// RoundOrder is the order of the phases of round i (from 0): the bare echo, the header
// echo, the direct store write when store is true, then the engine in even rounds, and
// the reverse in odd ones, so that a machine growing faster or slower during a series
// weighs on both sides of the ratios alike.
func RoundOrder(i int, store bool) []Phase {
	if store {
		return Interleave(i, PhaseEcho, PhaseHeaderEcho, PhaseStore, PhaseEngine)
	}
	return Interleave(i, PhaseEcho, PhaseHeaderEcho, PhaseEngine)
}

// Interleave is the order of phases in round i (from 0): as given in even rounds, the
// reverse in odd ones (RoundOrder).
func Interleave(i int, phases ...Phase) []Phase {
	order := slices.Clone(phases)
	if i%2 == 1 {
		slices.Reverse(order)
	}
	return order
}
