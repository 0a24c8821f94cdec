package bench

import (
	"math"
	"math/bits"
	"time"
)

// The histogram's buckets are log-linear, as in HdrHistogram: values below 2^subBits
// nanoseconds have a bucket each; above, every power of two is split into 2^subBits
// buckets of equal width. A bucket is thus never wider than 1/2^subBits of its lowest
// value, and a percentile read from the buckets is at most that much above the exact
// one, in constant memory whatever the number of values.
const (
	subBits  = 8
	subCount = 1 << subBits
	// maxBits bounds the values that get a bucket of their own (2^48 ns, about 78 h);
	// larger ones count in the last bucket, and Max still holds them exactly.
	maxBits     = 48
	bucketCount = (maxBits - subBits + 1) << subBits
)

// HistogramPrecision is the largest relative error of a Histogram's quantiles: a
// quantile q lies in [exact, exact*(1+HistogramPrecision)], where exact is the smallest
// recorded value with at least ceil(q*Count) values at or below it.
const HistogramPrecision = 1.0 / subCount

// Histogram counts durations in log-linear buckets (HistogramPrecision) and keeps the
// exact count, sum, minimum and maximum. Its memory is fixed (about 84 KiB once a value
// has been recorded). The zero value is empty and ready to use; it is not safe for
// concurrent use (the Recorder locks around it).
type Histogram struct {
	counts   []uint64
	n        int64
	sum      float64 // nanoseconds; a float so that no run can overflow it
	min, max time.Duration
}

// Record adds one duration; a negative one counts as 0.
func (h *Histogram) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	if h.counts == nil {
		h.counts = make([]uint64, bucketCount)
	}
	h.counts[bucketOf(uint64(d))]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	if d > h.max {
		h.max = d
	}
	h.n++
	h.sum += float64(d)
}

// Merge adds every value of o.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]uint64, bucketCount)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// Count is the number of recorded values.
func (h *Histogram) Count() int64 { return h.n }

// Min is the smallest recorded value (0 when empty).
func (h *Histogram) Min() time.Duration { return h.min }

// Max is the largest recorded value (0 when empty).
func (h *Histogram) Max() time.Duration { return h.max }

// Mean is the average of the recorded values (0 when empty).
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// Quantile is the value at or below which a fraction q (0..1) of the values lie: the
// highest value of the bucket that holds the value of rank ceil(q*Count), but never
// above Max (and Max itself for values beyond the last bucket). Quantile(1) is Max; an empty histogram answers 0.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	want := rank(q, h.n)
	var seen int64
	for i, c := range h.counts {
		seen += int64(c)
		if seen >= want {
			if i == bucketCount-1 {
				return h.max // the last bucket has no upper bound of its own
			}
			return min(time.Duration(highestOf(i)), h.max)
		}
	}
	return h.max
}

// rank is the 1-based rank of quantile q among n values (nearest-rank definition),
// tolerant of q*n landing a hair above an integer through rounding.
func rank(q float64, n int64) int64 {
	r := int64(math.Ceil(q*float64(n) - 1e-9))
	return min(max(r, 1), n)
}

// bucketOf is the bucket of v: v itself below 2*subCount, where buckets are one
// nanosecond wide; above, the group of v's highest bit and its next subBits bits.
func bucketOf(v uint64) int {
	if v >= 1<<maxBits {
		return bucketCount - 1
	}
	if v < 2*subCount {
		return int(v)
	}
	e := bits.Len64(v) - subBits - 1 // v >> e has subBits+1 bits
	return (e+1)<<subBits + int(v>>e) - subCount
}

// highestOf is the largest value that lands in bucket i.
func highestOf(i int) uint64 {
	group, sub := i>>subBits, uint64(i&(subCount-1))
	if group == 0 {
		return sub
	}
	e := group - 1
	return (subCount+sub)<<e + (1 << e) - 1
}
