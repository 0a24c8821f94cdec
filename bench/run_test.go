package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
)

func TestRunSetGetCount(t *testing.T) {
	f := newFixture(t)
	st := newStore()
	serveKV(t, f.conn(t), st, "instance-a", honest)
	serveKV(t, f.conn(t), st, "instance-b", honest)

	rep, err := Run(t.Context(), f.tr, testConfig(200))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ops != 200 || rep.Errors != 0 || rep.Mismatches != 0 || rep.Interrupted != 0 {
		t.Fatalf("ops %d errors %d (%v) mismatches %d interrupted %d, want 200 ops and nothing else",
			rep.Ops, rep.Errors, rep.ErrorsByCode, rep.Mismatches, rep.Interrupted)
	}
	if rep.StoppedBy != StoppedByCount {
		t.Errorf("stopped by %q, want %q", rep.StoppedBy, StoppedByCount)
	}
	if got := rep.Kinds[protocol.OpSet].Ops + rep.Kinds[protocol.OpGet].Ops; got != 200 || rep.Kinds[protocol.OpSet].Ops != 100 {
		t.Errorf("kinds %+v, want 100 sets and 100 gets", rep.Kinds)
	}
	if rep.Latency.Count != 200 || rep.Latency.P50 <= 0 || rep.Latency.P50 > rep.Latency.Max {
		t.Errorf("latency %+v, want 200 values with 0 < p50 <= max", rep.Latency)
	}
	if rep.Throughput <= 0 {
		t.Errorf("throughput %v, want > 0", rep.Throughput)
	}
	if rep.Instances["instance-a"]+rep.Instances["instance-b"] != 200 {
		t.Errorf("instances %v, want 200 ops answered by instance-a and instance-b", rep.Instances)
	}

	ops := measured(rep.History)
	if len(ops) != 200 {
		t.Fatalf("history holds %d measured ops, want 200", len(ops))
	}
	lastSet := map[string]uint64{}
	for _, op := range ops {
		if op.Instance != "instance-a" && op.Instance != "instance-b" {
			t.Fatalf("op %+v answered by %q, want one of the two instances", op, op.Instance)
		}
		if op.Complete.Before(op.Invoke) || op.Invoke.IsZero() {
			t.Fatalf("op %+v: complete before invoke", op)
		}
		if !strings.HasPrefix(op.Key, rep.Config.KeyPrefix+"/") || op.Worker < 0 || op.Worker >= 4 {
			t.Fatalf("op %+v: key outside %q or worker out of range", op, rep.Config.KeyPrefix)
		}
		switch op.Kind {
		case protocol.OpSet:
			if op.Input == 0 {
				t.Fatalf("set %+v records no input", op)
			}
			lastSet[op.Key] = op.Input
		case protocol.OpGet:
			// The key is the worker's own: the get completed after its set, and the
			// history is in completion order.
			if !op.Found || op.Output != lastSet[op.Key] {
				t.Fatalf("get %+v: want the value of the last set, hash %x", op, lastSet[op.Key])
			}
		}
	}
	// Cleanup (on by default) deleted the whole key space and recorded it.
	if n := st.len(); n != 0 {
		t.Errorf("%d keys left after cleanup", n)
	}
	deletes := 0
	for _, op := range rep.History {
		if op.Setup && op.Kind == protocol.OpDelete && !op.Failed() {
			deletes++
		}
	}
	if deletes != 16 {
		t.Errorf("%d cleanup deletes in the history, want 16", deletes)
	}
}

func TestRunDurationStops(t *testing.T) {
	f := newFixture(t)
	serveKV(t, f.conn(t), newStore(), "i", honest)
	cfg := testConfig(0)
	cfg.Duration = 50 * time.Millisecond
	rep, err := Run(t.Context(), f.tr, cfg, WithoutHistory())
	if err != nil {
		t.Fatal(err)
	}
	if rep.StoppedBy != StoppedByDuration || rep.Elapsed < cfg.Duration || rep.Ops == 0 || rep.Errors != 0 {
		t.Errorf("stopped by %q after %s with %d ops and %d errors, want duration, >= %s, some ops, no errors",
			rep.StoppedBy, rep.Elapsed, rep.Ops, rep.Errors, cfg.Duration)
	}
	if rep.History != nil {
		t.Errorf("history of %d ops kept WithoutHistory", len(rep.History))
	}
}

func TestRunCountsMismatches(t *testing.T) {
	f := newFixture(t)
	serveKV(t, f.conn(t), newStore(), "liar", corrupt)
	rep, err := Run(t.Context(), f.tr, testConfig(40))
	if err != nil {
		t.Fatal(err)
	}
	// Every get reads back a value other than the one just written.
	if rep.Mismatches != 20 || rep.Errors != 0 {
		t.Errorf("mismatches %d errors %d, want 20 and 0", rep.Mismatches, rep.Errors)
	}
	for _, op := range measured(rep.History) {
		if op.Mismatch != (op.Kind == protocol.OpGet) {
			t.Errorf("op %+v: mismatch flag wrong", op)
		}
	}
}

func TestRunWithoutResponders(t *testing.T) {
	f := newFixture(t, client.WithRetryPolicy(client.RetryPolicy{
		Window: 30 * time.Millisecond, FirstDelay: 5 * time.Millisecond, MaxDelay: 10 * time.Millisecond,
	}))
	cfg := testConfig(4)
	cfg.Concurrency = 2
	rep, err := Run(t.Context(), f.tr, cfg)
	// Cleanup finds nobody either, and says so.
	if err == nil || !strings.Contains(err.Error(), "cleanup") {
		t.Fatalf("err %v, want the cleanup's failure", err)
	}
	if rep == nil || rep.Ops != 4 || rep.Errors != 4 || rep.ErrorsByCode[protocol.Unavailable] != 4 {
		t.Fatalf("report %+v, want 4 ops failed UNAVAILABLE", rep)
	}
	for _, op := range measured(rep.History) {
		if op.Code != protocol.Unavailable || op.Indefinite || op.Instance != "" || op.Err == "" {
			t.Errorf("op %+v, want UNAVAILABLE, definite, no instance, a message", op)
		}
	}
	if rep.Latency.Count != 0 {
		t.Errorf("latency counts %d failed calls", rep.Latency.Count)
	}
}

func TestRunGetWorkloadSeeds(t *testing.T) {
	f := newFixture(t)
	st := newStore()
	serveKV(t, f.conn(t), st, "i", honest)
	cfg := testConfig(100)
	cfg.Workload = WorkloadGet
	cfg.Cleanup = false
	cfg.KeyPrefix = "seeded"
	rep, err := Run(t.Context(), f.tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ops != 100 || rep.Kinds[protocol.OpGet].Ops != 100 || rep.Errors != 0 || rep.Mismatches != 0 {
		t.Fatalf("ops %d kinds %v errors %d mismatches %d, want 100 gets, no error, no mismatch",
			rep.Ops, rep.Kinds, rep.Errors, rep.Mismatches)
	}
	seeds := 0
	for _, op := range rep.History {
		if op.Setup {
			seeds++
			if op.Kind != protocol.OpSet || op.Failed() {
				t.Errorf("setup op %+v, want a successful set", op)
			}
		} else if !op.Found {
			t.Errorf("get %+v found nothing", op)
		}
	}
	if seeds != 16 || st.len() != 16 {
		t.Errorf("%d seeding ops, %d keys stored, want 16 and 16", seeds, st.len())
	}
	// A run with another seed reads its own seeded values from the same keys.
	cfg.Seed++
	if rep, err = Run(t.Context(), f.tr, cfg, WithoutHistory()); err != nil || rep.Mismatches != 0 {
		t.Fatalf("second run: err %v mismatches %d", err, rep.Mismatches)
	}
}

func TestRunObjectPutGet(t *testing.T) {
	f := newFixture(t)
	st := newStore()
	serveObjects(t, f.conn(t), st, "obj")
	cfg := testConfig(60)
	cfg.Service, cfg.Workload = protocol.ObjectStorage, WorkloadPutGet
	cfg.PayloadBytes = 1000
	rep, err := Run(t.Context(), f.tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ops != 60 || rep.Errors != 0 || rep.Mismatches != 0 ||
		rep.Kinds[protocol.OpPutObject].Ops != 30 || rep.Kinds[protocol.OpGetObject].Ops != 30 {
		t.Fatalf("ops %d errors %v mismatches %d kinds %v, want 30 puts and 30 gets, all fine",
			rep.Ops, rep.ErrorsByCode, rep.Mismatches, rep.Kinds)
	}
	if st.len() != 0 {
		t.Errorf("%d objects left after cleanup", st.len())
	}
}

func TestRunGetCountsMissingAsMismatch(t *testing.T) {
	f := newFixture(t)
	serveKV(t, f.conn(t), newStore(), "i", forgetful)
	cfg := testConfig(30)
	cfg.Workload = WorkloadGet
	rep, err := Run(t.Context(), f.tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Mismatches != 30 || rep.Errors != 0 {
		t.Errorf("mismatches %d errors %d, want 30 and 0: a seeded key that is missing is a wrong read", rep.Mismatches, rep.Errors)
	}
}

func TestRunObjectGet(t *testing.T) {
	f := newFixture(t)
	st := newStore()
	serveObjects(t, f.conn(t), st, "obj")
	cfg := testConfig(20)
	cfg.Service, cfg.Workload = protocol.ObjectStorage, WorkloadGet
	cfg.Cleanup = false
	cfg.KeyPrefix = "p"
	// A missing object is NOT_FOUND on the wire and Found false in the history.
	d := newDriver(f.tr, cfg)
	d.rec = NewRecorder(true)
	op := d.read(t.Context(), 0, 3, false)
	if op.Failed() || op.Found || op.Instance != "obj" {
		t.Fatalf("get of a missing object: %+v, want Found false without an error, from obj", op)
	}
	rep, err := Run(t.Context(), f.tr, cfg)
	if err != nil || rep.Mismatches != 0 || rep.Errors != 0 {
		t.Fatalf("err %v mismatches %d errors %d", err, rep.Mismatches, rep.Errors)
	}
}

func TestRunStopOnLetsCallsComplete(t *testing.T) {
	f := newFixture(t)
	st := newStore()
	serveKV(t, f.conn(t), st, "i", honest)
	cfg := testConfig(0) // neither count nor duration: until stopped
	stop := make(chan struct{})
	reached := st.reaches(50)
	done := make(chan *Report, 1)
	go func() {
		rep, err := Run(context.Background(), f.tr, cfg, StopOn(stop))
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	<-reached
	close(stop)
	rep := <-done
	if rep == nil {
		t.FailNow()
	}
	if rep.StoppedBy != StoppedByStop || rep.Ops < 50 || rep.Errors != 0 || rep.Interrupted != 0 || rep.Mismatches != 0 {
		t.Errorf("stopped by %q, ops %d, errors %d, interrupted %d, mismatches %d; want stop, >= 50 ops, nothing failed",
			rep.StoppedBy, rep.Ops, rep.Errors, rep.Interrupted, rep.Mismatches)
	}
}

func TestRunContextEndInterrupts(t *testing.T) {
	f := newFixture(t)
	st := newStore()
	serveKV(t, f.conn(t), st, "i", honest)
	cfg := testConfig(0)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	reached := st.reaches(50)
	done := make(chan *Report, 1)
	go func() {
		rep, err := Run(ctx, f.tr, cfg)
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	<-reached
	cancel()
	rep := <-done
	if rep == nil {
		t.FailNow()
	}
	if rep.StoppedBy != StoppedByContext || rep.Errors != 0 {
		t.Errorf("stopped by %q with %d errors (%v); want context, and cancelled calls only as interrupted",
			rep.StoppedBy, rep.Errors, rep.ErrorsByCode)
	}
	for _, op := range measured(rep.History) {
		if op.Interrupted && (!op.Failed() || !op.Indefinite) {
			t.Errorf("interrupted op %+v, want a failure of unknown outcome", op)
		}
	}
	// Cleanup runs even though ctx has ended.
	if st.len() != 0 {
		t.Errorf("%d keys left after cleanup", st.len())
	}
}

func TestRunRefusesPayloadOverMaxPayload(t *testing.T) {
	srv := natstest.Start(t, natstest.WithoutJetStream(), natstest.WithMaxPayload(1024))
	nc := natstest.Connect(t, srv.URL())
	tr, err := client.NewTransport(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(10)
	cfg.PayloadBytes = 1000 // base64 makes the request about 1340 bytes
	_, err = Run(t.Context(), tr, cfg)
	if err == nil {
		t.Fatal("a 1000-byte value ran against a 1024-byte max payload")
	}
	contains(t, err.Error(), "payload_bytes 1000")
	contains(t, err.Error(), "max payload of 1024")
}

func TestRunRefusesBadInput(t *testing.T) {
	f := newFixture(t)
	bad := testConfig(10)
	bad.Concurrency = 0
	if _, err := Run(t.Context(), f.tr, bad); err == nil || !strings.Contains(err.Error(), "concurrency 0") {
		t.Errorf("Run with concurrency 0: %v", err)
	}
	if _, err := Run(t.Context(), nil, testConfig(10)); err == nil {
		t.Error("Run without a Transport succeeded")
	}
	if _, err := Run(t.Context(), f.tr, testConfig(10), WithRecorder(NewRecorder(true)), WithoutHistory()); err == nil {
		t.Error("WithRecorder and WithoutHistory together were accepted")
	}
	if _, err := Run(t.Context(), f.tr, testConfig(10), WithResponderConn(f.nc)); err == nil {
		t.Error("WithResponderConn was accepted by Run")
	}
	if _, err := Run(t.Context(), f.tr, testConfig(10), Progress(nil, time.Second)); err == nil {
		t.Error("Progress to a nil writer was accepted")
	}
}

func TestRunWithSharedRecorder(t *testing.T) {
	f := newFixture(t)
	serveKV(t, f.conn(t), newStore(), "i", honest)
	rec := NewRecorder(false)
	cfg := testConfig(20)
	cfg.Workload = WorkloadMixed
	for range 2 {
		if _, err := Run(t.Context(), f.tr, cfg, WithRecorder(rec)); err != nil {
			t.Fatal(err)
		}
	}
	if s := rec.Summary(); s.Ops != 40 || s.Errors != 0 || rec.History() != nil {
		t.Errorf("shared recorder: ops %d errors %d history %d, want 40, 0, none", s.Ops, s.Errors, len(rec.History()))
	}
}

// TestMixedRecordsConditionalWrites: the mixed workload sends set_if_not_exists and
// delete besides sets and gets, and records what each conditional write found.
func TestMixedRecordsConditionalWrites(t *testing.T) {
	f := newFixture(t)
	serveKV(t, f.conn(t), newStore(), "i", honest)
	cfg := testConfig(400)
	cfg.Workload, cfg.Keys = WorkloadMixed, 4
	rep, err := Run(t.Context(), f.tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]map[bool]int{}
	for _, op := range measured(rep.History) {
		if op.Failed() {
			t.Fatalf("%s failed: %s", op.Kind, op.Err)
		}
		if outcomes[op.Kind] == nil {
			outcomes[op.Kind] = map[bool]int{}
		}
		outcomes[op.Kind][op.Applied]++
	}
	for _, kind := range []string{protocol.OpSetIfNotExists, protocol.OpDelete} {
		if outcomes[kind][true] == 0 || outcomes[kind][false] == 0 {
			t.Errorf("%s outcomes %v: want some applied and some not over 4 keys", kind, outcomes[kind])
		}
	}
	if len(outcomes[protocol.OpGet]) == 0 || len(outcomes[protocol.OpSet]) == 0 {
		t.Errorf("kinds %v: want gets and sets too", outcomes)
	}
}

func TestExpectation(t *testing.T) {
	ok := func(h uint64) Op { return Op{Input: h} }
	lost := func(h uint64) Op { return Op{Input: h, Code: protocol.DeadlineExceeded, Indefinite: true} }
	refused := func(h uint64) Op { return Op{Input: h, Code: protocol.Unavailable} }
	read := func(h uint64) Op { return Op{Found: true, Output: h} }

	var e expectation
	if !e.accepts(Op{}) || !e.accepts(read(9)) {
		t.Error("before any acknowledged write, anything must be accepted")
	}
	e.wrote(ok(1))
	if !e.accepts(read(1)) || e.accepts(read(2)) || e.accepts(Op{}) {
		t.Error("after write 1: want exactly 1")
	}
	e.wrote(refused(2))
	if e.accepts(read(2)) {
		t.Error("a write that certainly did not run became acceptable")
	}
	e.wrote(lost(3))
	e.wrote(ok(4))
	if !e.accepts(read(4)) || !e.accepts(read(3)) || e.accepts(read(1)) {
		t.Error("after 1, lost 3, 4: want 4 or the late 3, never 1")
	}
	for h := range uint64(maxPossible + 1) {
		e.wrote(lost(100 + h))
	}
	if !e.accepts(read(12345)) {
		t.Error("after too many unknown outcomes the key must no longer be checked")
	}
}

func TestMayHaveRun(t *testing.T) {
	cases := []struct {
		name string
		ce   *client.CallError
		want bool
	}{
		{"no responders", &client.CallError{Err: &protocol.Error{Code: protocol.Unavailable, Retryable: true}, Cause: nats.ErrNoResponders}, false},
		{"timeout", &client.CallError{Err: &protocol.Error{Code: protocol.DeadlineExceeded}, Cause: context.DeadlineExceeded}, true},
		{"cancelled", &client.CallError{Err: &protocol.Error{Code: protocol.Unavailable}, Cause: context.Canceled}, true},
		{"too large to send", &client.CallError{Err: &protocol.Error{Code: protocol.PayloadTooLarge}, Cause: nats.ErrMaxPayload}, false},
		{"fenced", &client.CallError{Err: &protocol.Error{Code: protocol.Unavailable, Retryable: true}}, false},
		{"unavailable after running", &client.CallError{Err: &protocol.Error{Code: protocol.Unavailable}}, true},
		{"conflict", &client.CallError{Err: &protocol.Error{Code: protocol.Conflict}}, false},
		{"internal", &client.CallError{Err: &protocol.Error{Code: protocol.Internal}}, true},
		{"engine deadline", &client.CallError{Err: &protocol.Error{Code: protocol.DeadlineExceeded}}, true},
	}
	for _, c := range cases {
		if got := mayHaveRun(c.ce); got != c.want {
			t.Errorf("%s: mayHaveRun %v, want %v", c.name, got, c.want)
		}
	}
	var op Op
	failure(&op, errors.New("not a CallError"))
	if op.Code != protocol.Internal || !op.Indefinite {
		t.Errorf("a foreign error gave %+v, want INTERNAL of unknown outcome", op)
	}
}

// The key space named up front names every key as a driver without it does, and one
// over namedKeys is named per call.
func TestKeySpaceNamesKeysAsPerCall(t *testing.T) {
	named := &driver{cfg: Config{KeyPrefix: "bench-x", Keys: 300}, keys: keySpace("bench-x", 300)}
	perCall := &driver{cfg: Config{KeyPrefix: "bench-x", Keys: 300}}
	for _, idx := range []int{0, 7, 299} {
		if named.key(idx) != perCall.key(idx) || named.objectKey(idx) != perCall.objectKey(idx) {
			t.Fatalf("key %d: named %q / %q, per call %q / %q", idx, named.key(idx), named.objectKey(idx), perCall.key(idx), perCall.objectKey(idx))
		}
	}
	if got := named.key(299); got != "bench-x/299" {
		t.Fatalf("key 299 is %q", got)
	}
	if keySpace("p", namedKeys+1) != nil {
		t.Fatal("a key space over namedKeys was named up front")
	}
}
