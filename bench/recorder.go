package bench

import (
	"hash/crc64"
	"slices"
	"sync"
	"time"

	"github.com/abi-engine/engine/protocol"
)

// KindEcho is the Op.Kind of RawNATS's requests; every other kind is a protocol
// operation name.
const KindEcho = "echo"

// Op is one operation as a client saw it. The fields a linearizability checker of a
// keyvalue register needs are all there: Key, Kind, Input (written), Output and Found
// (read), Applied (a conditional write's outcome), Invoke and Complete, and whether a
// failure leaves the outcome open (Indefinite).
type Op struct {
	// Worker is the index of the worker that issued it (of the seeding or cleanup
	// goroutine for Setup ops).
	Worker int `json:"worker"`
	// Kind is the operation: protocol.OpSet, OpSetIfNotExists, OpGet, OpDelete,
	// OpPutObject, OpGetObject, OpDeleteObject, or KindEcho.
	Kind string `json:"kind"`
	// Key is the keyvalue key, or "<prefix>/<key>" of an object.
	Key string `json:"key"`
	// Input is ValueHash of the value written (set, set_if_not_exists, put_object,
	// echo); 0 otherwise.
	Input uint64 `json:"input,omitempty"`
	// Output is ValueHash of the value read when Found (get, get_object, echo).
	Output uint64 `json:"output,omitempty"`
	// Found reports that a read found a value. A get_object answered NOT_FOUND is
	// Found false without an error, like a keyvalue get of a missing key.
	Found bool `json:"found,omitempty"`
	// Applied is the boolean outcome of a keyvalue set_if_not_exists (set: the key was
	// absent and now holds Input) or delete (deleted: the key had a value).
	Applied bool `json:"applied,omitempty"`
	// Invoke is when the call was issued, Complete when its reply or error arrived.
	Invoke   time.Time `json:"invoke"`
	Complete time.Time `json:"complete"`
	// Code is the error's code; empty when the call succeeded.
	Code protocol.Code `json:"code,omitempty"`
	// Err is the error's message.
	Err string `json:"err,omitempty"`
	// Indefinite reports a failure after which the call may still have taken effect,
	// at any time after Invoke: a timeout, a cancelled call, a connection lost on the
	// way, an engine's INTERNAL or DEADLINE_EXCEEDED, and an UNAVAILABLE that is not
	// retryable (a lost ack, a commit of unknown result). Other failures ran nothing (no
	// responders, a retryable UNAVAILABLE, INVALID_ARGUMENT, ...).
	Indefinite bool `json:"indefinite,omitempty"`
	// Instance is the engine instance that answered, with a reply or an error reply;
	// empty when none did.
	Instance string `json:"instance,omitempty"`
	// Mismatch reports a read that returned something else than what the workload
	// knows was written.
	Mismatch bool `json:"mismatch,omitempty"`
	// Interrupted reports a call that failed because the run's ctx ended; it counts
	// apart from Errors.
	Interrupted bool `json:"interrupted,omitempty"`
	// Setup marks the seeding and cleanup calls around the measured run; they are in
	// the history but in no aggregate.
	Setup bool `json:"setup,omitempty"`
}

// Latency returns Complete minus Invoke.
func (o Op) Latency() time.Duration { return o.Complete.Sub(o.Invoke) }

// Failed reports whether the call ended in an error.
func (o Op) Failed() bool { return o.Code != "" }

var crcTable = crc64.MakeTable(crc64.ECMA)

// ValueHash is the hash an Op records for a value: CRC-64 (ECMA), the same in every
// process, so a checker can hash what it reads itself and compare.
func ValueHash(b []byte) uint64 { return crc64.Checksum(b, crcTable) }

// Latency is a summary of a Histogram. JSON carries nanoseconds.
type Latency struct {
	Count int64         `json:"count"`
	Min   time.Duration `json:"min_ns"`
	Mean  time.Duration `json:"mean_ns"`
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p999_ns"`
	Max   time.Duration `json:"max_ns"`
}

// Summarize reads the summary of h.
func Summarize(h *Histogram) Latency {
	return Latency{
		Count: h.Count(), Min: h.Min(), Mean: h.Mean(),
		P50: h.Quantile(0.5), P90: h.Quantile(0.9), P99: h.Quantile(0.99), P999: h.Quantile(0.999),
		Max: h.Max(),
	}
}

// KindStats are the aggregates of one kind of operation.
type KindStats struct {
	Ops    int64 `json:"ops"`
	Errors int64 `json:"errors"`
	// Latency covers the successful calls.
	Latency Latency `json:"latency"`
}

// Summary are a Recorder's aggregates over the operations that are not Setup. Ops
// counts every one of them; Errors those that failed, except Interrupted ones, which
// count apart.
type Summary struct {
	Ops          int64                   `json:"ops"`
	Errors       int64                   `json:"errors"`
	ErrorsByCode map[protocol.Code]int64 `json:"errors_by_code"`
	Mismatches   int64                   `json:"mismatches"`
	Interrupted  int64                   `json:"interrupted"`
	// Latency covers the successful calls of every kind.
	Latency Latency              `json:"latency"`
	Kinds   map[string]KindStats `json:"kinds"`
	// Instances counts the operations each engine instance answered.
	Instances map[string]int64 `json:"instances"`
}

// Recorder collects operations from any number of goroutines. It always keeps the
// aggregates, in constant memory, and keeps the full history when asked to.
type Recorder struct {
	mu          sync.Mutex
	keep        bool
	history     []Op
	ops         int64
	errors      int64
	interrupted int64
	mismatches  int64
	byCode      map[protocol.Code]int64
	all         Histogram
	kinds       map[string]*kindAgg
	instances   map[string]int64
}

type kindAgg struct {
	ops, errors int64
	latency     Histogram
}

// NewRecorder returns an empty Recorder that keeps every Op when keepHistory is true,
// and only the aggregates otherwise.
func NewRecorder(keepHistory bool) *Recorder {
	return &Recorder{
		keep:      keepHistory,
		byCode:    map[protocol.Code]int64{},
		kinds:     map[string]*kindAgg{},
		instances: map[string]int64{},
	}
}

// KeepsHistory reports whether the Recorder keeps every Op.
func (r *Recorder) KeepsHistory() bool { return r.keep }

// Record adds op to the history (when kept) and, unless it is Setup, to the aggregates.
func (r *Recorder) Record(op Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keep {
		r.history = append(r.history, op)
	}
	if op.Setup {
		return
	}
	k := r.kinds[op.Kind]
	if k == nil {
		k = &kindAgg{}
		r.kinds[op.Kind] = k
	}
	r.ops++
	k.ops++
	if op.Instance != "" {
		r.instances[op.Instance]++
	}
	if op.Mismatch {
		r.mismatches++
	}
	switch {
	case op.Interrupted:
		r.interrupted++
	case op.Failed():
		r.errors++
		k.errors++
		r.byCode[op.Code]++
	default:
		d := op.Latency()
		r.all.Record(d)
		k.latency.Record(d)
	}
}

// History is a copy of the operations recorded so far, in the order they completed;
// nil when the Recorder keeps no history.
func (r *Recorder) History() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.history)
}

// Summary computes the aggregates so far.
func (r *Recorder) Summary() Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Summary{
		Ops: r.ops, Errors: r.errors, Mismatches: r.mismatches, Interrupted: r.interrupted,
		ErrorsByCode: make(map[protocol.Code]int64, len(r.byCode)),
		Latency:      Summarize(&r.all),
		Kinds:        make(map[string]KindStats, len(r.kinds)),
		Instances:    make(map[string]int64, len(r.instances)),
	}
	for c, n := range r.byCode {
		s.ErrorsByCode[c] = n
	}
	for name, k := range r.kinds {
		s.Kinds[name] = KindStats{Ops: k.ops, Errors: k.errors, Latency: Summarize(&k.latency)}
	}
	for id, n := range r.instances {
		s.Instances[id] = n
	}
	return s
}

// progress is the little the progress line needs, without copying maps.
func (r *Recorder) progress() (ops, errors, mismatches int64, p99 time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ops, r.errors, r.mismatches, r.all.Quantile(0.99)
}
