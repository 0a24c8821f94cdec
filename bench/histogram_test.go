package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// exact is the nearest-rank quantile of sorted values, the definition Quantile
// approximates.
func exact(sorted []time.Duration, q float64) time.Duration {
	return sorted[rank(q, int64(len(sorted)))-1]
}

var quantiles = []float64{0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 0.9999, 1}

func checkQuantiles(t *testing.T, name string, values []time.Duration) {
	t.Helper()
	var h Histogram
	for _, v := range values {
		h.Record(v)
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	for _, q := range quantiles {
		want := exact(sorted, q)
		got := h.Quantile(q)
		limit := time.Duration(math.Floor(float64(want) * (1 + HistogramPrecision)))
		if got < want || got > limit {
			t.Errorf("%s: q%v = %d, exact %d, want within [%d, %d]", name, q, got, want, want, limit)
		}
	}
	if h.Count() != int64(len(values)) || h.Min() != sorted[0] || h.Max() != sorted[len(sorted)-1] {
		t.Errorf("%s: count %d min %d max %d, want %d %d %d", name, h.Count(), h.Min(), h.Max(), len(values), sorted[0], sorted[len(sorted)-1])
	}
	var sum float64
	for _, v := range values {
		sum += float64(v)
	}
	if mean := time.Duration(sum / float64(len(values))); h.Mean() != mean {
		t.Errorf("%s: mean %d, want %d", name, h.Mean(), mean)
	}
}

func TestHistogramQuantilesAgainstExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// Latency-like: log-normal around 300 µs with a long tail.
	var lognormal []time.Duration
	for range 100_000 {
		lognormal = append(lognormal, time.Duration(math.Exp(rng.NormFloat64()*0.8+math.Log(300e3))))
	}
	checkQuantiles(t, "lognormal", lognormal)

	// Uniform over six decades, nanoseconds to a second.
	var wide []time.Duration
	for range 50_000 {
		wide = append(wide, time.Duration(math.Pow(10, rng.Float64()*9)))
	}
	checkQuantiles(t, "wide", wide)

	// Two modes, the way a handover shows: fast calls and a few that waited for a retry.
	var bimodal []time.Duration
	for i := range 10_000 {
		d := 200*time.Microsecond + time.Duration(rng.IntN(100_000))
		if i%100 == 0 {
			d = 300*time.Millisecond + time.Duration(rng.IntN(50_000_000))
		}
		bimodal = append(bimodal, d)
	}
	checkQuantiles(t, "bimodal", bimodal)

	checkQuantiles(t, "single", []time.Duration{123456789})
}

func TestHistogramSmallValuesAreExact(t *testing.T) {
	var h Histogram
	for v := range time.Duration(600) {
		h.Record(v)
	}
	// Below 512 ns every nanosecond has its own bucket.
	for _, q := range []float64{0.1, 0.5, 0.8} {
		want := time.Duration(rank(q, 600) - 1)
		if got := h.Quantile(q); got != want {
			t.Errorf("q%v = %d, want exactly %d", q, got, want)
		}
	}
}

func TestHistogramEdges(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 || h.Mean() != 0 || h.Max() != 0 {
		t.Error("an empty histogram must answer 0")
	}
	h.Record(-5)
	if h.Min() != 0 || h.Quantile(1) != 0 {
		t.Errorf("a negative duration must count as 0, got min %d", h.Min())
	}
	huge := 500 * time.Hour // beyond the last bucket
	h.Record(huge)
	if h.Max() != huge || h.Quantile(1) != huge {
		t.Errorf("max %s q1 %s, want %s exactly", h.Max(), h.Quantile(1), huge)
	}
	if got := h.Quantile(0.75); got > huge || got < time.Duration(1)<<maxBits/2 {
		t.Errorf("q0.75 %s, want in the last bucket", got)
	}
}

func TestHistogramMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var a, b, all Histogram
	for i := range 20_000 {
		d := time.Duration(rng.ExpFloat64() * 1e6)
		all.Record(d)
		if i%3 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	var m Histogram
	m.Merge(&a)
	m.Merge(&b)
	m.Merge(&Histogram{})
	if m.Count() != all.Count() || m.Min() != all.Min() || m.Max() != all.Max() {
		t.Fatalf("merged count %d min %d max %d, want %d %d %d", m.Count(), m.Min(), m.Max(), all.Count(), all.Min(), all.Max())
	}
	for _, q := range quantiles {
		if m.Quantile(q) != all.Quantile(q) {
			t.Errorf("q%v merged %d, direct %d", q, m.Quantile(q), all.Quantile(q))
		}
	}
}

func TestBucketBoundaries(t *testing.T) {
	// Every bucket's highest value maps to it, and the next value to the next bucket.
	for i := range bucketCount - 1 {
		hi := highestOf(i)
		if bucketOf(hi) != i || bucketOf(hi+1) != i+1 {
			t.Fatalf("bucket %d: highest %d maps to %d, next to %d", i, hi, bucketOf(hi), bucketOf(hi+1))
		}
	}
}
