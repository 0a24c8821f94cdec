// Package bench is the load driver of abi-engine: `abi-engine bench` measures an engine
// with it, and the chaos harness drives traffic and records history with it.
//
// Run starts Config.Concurrency workers against a running engine's keyvalue or
// object_storage service. They stop after Config.Count operations, after
// Config.Duration, when a StopOn channel closes, or when ctx ends, whichever comes first.
// Workers issue every call through client.Transport.Call with the protocol's payload
// structs, appended as the typed clients append them, and decode the replies
// themselves, so each operation's record names the engine instance that answered it
// (header Abi-Engine-Instance). Like the typed clients, a call that reached nobody is
// resent within the Transport's retry window. A handover therefore shows up as slower
// calls, not as errors.
//
// Workloads (Config.Workload):
//
//	keyvalue        set-get  each worker owns Keys/Concurrency keys and, key after key,
//	                         sets a fresh value and reads it back; the read must return
//	                         what was written
//	                get      Keys keys are seeded first; workers read random ones and
//	                         check the seeded value
//	                set      writes of fresh values to random keys
//	                mixed    random keys shared by all workers: half gets, a quarter
//	                         sets, an eighth each set_if_not_exists and delete (their
//	                         boolean outcomes recorded): history for a linearizability
//	                         checker, no check of its own
//	object_storage  put-get  as set-get, with put_object and get_object
//	                get      as get, with get_object
//	                put      as set, with put_object
//
// Every value is unique within a run: its first 16 bytes are a hexadecimal tag of the
// worker and its sequence number. Report.Mismatches counts reads that returned
// something else than what the workload knows was written. A key that is missing
// counts too. A failed write whose outcome is unknown (a timeout, say) makes either
// value acceptable.
//
// Every operation goes to a Recorder as an Op: worker, kind, key, hashes of the value
// written and read (ValueHash), a conditional write's outcome (Applied), invoke and
// complete times, error code, the answering
// instance, and whether a failure leaves open that the call took effect (Indefinite).
// That is what a per-key register linearizability check needs. The Recorder keeps
// aggregates in constant memory: counts, errors by code, and latency in a log-linear
// Histogram with a relative error under 0.4 %. By default it also keeps the full
// history. WithoutHistory drops it for long benchmarks.
//
// RawNATS measures plain NATS request/reply with the same concurrency and payload,
// against an echo it starts and stops itself: an endpoint of a NATS micro service, as
// the engine's services are, that stamps the instance header when asked
// (WithInstanceHeader), as the protocol requires of any responder. That gives
// docs/performance.md a baseline from the same run, and Compare turns the two reports
// into a ratio line. For writes, RawStore measures the store's own put into a scratch
// bucket shaped like the engine's, and RawProxy the same put through a bare responder
// (a micro endpoint that puts and replies): the engine against the proxy is what the
// engine adds to serving a write, the proxy against the store what serving one through
// NATS request/reply costs on that cluster. Over several rounds of such runs
// (Interleave alternates their order), SummarizeRounds gives each ratio's median and
// range.
//
// Usage:
//
//	tr, err := client.NewTransport(nc)
//	if err != nil { ... }
//	cfg := bench.DefaultConfig() // keyvalue set-get, 16 workers, 10 s, 64 B
//	cfg.Concurrency = 64
//	engine, err := bench.Run(ctx, tr, cfg, bench.WithoutHistory(), bench.Progress(os.Stderr, time.Second))
//	if err != nil { ... }
//	raw, err := bench.RawNATS(ctx, nc, cfg)
//	if err != nil { ... }
//	engine.Table(os.Stdout)
//	fmt.Println(bench.Compare(raw, engine))
//	err = engine.WriteJSON(f)
//
// A chaos scenario keeps the history instead and stops the driver when the scenario
// ends; calls in flight complete first:
//
//	stop := make(chan struct{})
//	cfg.Duration, cfg.Count = 0, 0 // until stopped
//	cfg.Workload, cfg.KeyPrefix = bench.WorkloadMixed, "chaos"
//	rep, err := bench.Run(ctx, tr, cfg, bench.StopOn(stop)) // the scenario closes stop
//	// rep.History: every Op, for the checkers
package bench
