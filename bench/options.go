package bench

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
)

// Option adjusts Run and RawNATS.
type Option func(*options)

type options struct {
	progressW     io.Writer
	progressEvery time.Duration
	// ticks makes the progress ticker; tests replace it to tick on demand.
	ticks      func(every time.Duration) (<-chan time.Time, func())
	recorder   *Recorder
	noHistory  bool
	stop       <-chan struct{}
	responder  *nats.Conn
	echoHeader string // the instance id RawNATS's echo stamps, "" for none
	forRawNATS bool
	errs       []error
}

// Progress writes a one-line status to w every interval while the run goes on
// (elapsed, operations, operations per second over the last interval, errors, p99 so
// far), and a last one when it ends. On a terminal each line overwrites the one before
// it.
func Progress(w io.Writer, every time.Duration) Option {
	return func(o *options) {
		if w == nil || every <= 0 {
			o.errs = append(o.errs, fmt.Errorf("bench: Progress needs a writer and a positive interval, got %v and %s", w, every))
			return
		}
		o.progressW, o.progressEvery = w, every
	}
}

// WithRecorder makes Run record into r instead of a Recorder of its own, so the caller
// can read the history while the run goes on, or share one Recorder between runs.
// Whether history is kept is then r's to say (NewRecorder).
func WithRecorder(r *Recorder) Option {
	return func(o *options) {
		if r == nil {
			o.errs = append(o.errs, errors.New("bench: WithRecorder got a nil Recorder"))
			return
		}
		o.recorder = r
	}
}

// WithoutHistory keeps only the aggregates, so a long run's memory stays constant;
// Report.History is then empty.
func WithoutHistory() Option { return func(o *options) { o.noHistory = true } }

// StopOn ends the run when ch closes: workers issue no new call, and the calls in
// flight complete (unlike ending ctx, which cancels them).
func StopOn(ch <-chan struct{}) Option { return func(o *options) { o.stop = ch } }

// WithResponderConn makes RawNATS run its echo responder on nc instead of the
// requesters' connection, so that requests and replies cross the broker between two
// connections as they do with an engine. The caller owns nc.
func WithResponderConn(nc *nats.Conn) Option {
	return func(o *options) {
		if nc == nil {
			o.errs = append(o.errs, errors.New("bench: WithResponderConn got a nil connection"))
			return
		}
		o.responder, o.forRawNATS = nc, true
	}
}

// WithInstanceHeader makes RawNATS's echo stamp every reply with the
// Abi-Engine-Instance header carrying instance, the one piece of work the protocol
// requires of every reply, so the engine can be read against a responder that does
// exactly that and nothing else; a reply without it counts as a mismatch. The report's
// Workload is then RawHeaderWorkload.
func WithInstanceHeader(instance string) Option {
	return func(o *options) {
		if instance == "" {
			o.errs = append(o.errs, errors.New("bench: WithInstanceHeader got an empty instance id"))
			return
		}
		o.echoHeader, o.forRawNATS = instance, true
	}
}

func buildOptions(raw bool, opts []Option) (*options, error) {
	o := &options{ticks: realTicks}
	for _, opt := range opts {
		opt(o)
	}
	switch {
	case len(o.errs) > 0:
		return nil, errors.Join(o.errs...)
	case o.recorder != nil && o.noHistory:
		return nil, errors.New("bench: WithRecorder and WithoutHistory both given; the recorder decides (NewRecorder(false) keeps no history)")
	case o.forRawNATS && !raw:
		return nil, errors.New("bench: WithResponderConn and WithInstanceHeader apply to RawNATS only")
	}
	if o.recorder == nil {
		o.recorder = NewRecorder(!o.noHistory)
	}
	return o, nil
}

func realTicks(every time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(every)
	return t.C, t.Stop
}
