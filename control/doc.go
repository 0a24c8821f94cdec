// Package control is the engine's control subjects: a step-down request to one engine
// instance, and the roll call of the engines standing by. The engine answers them
// (Serve, with a consumer-defined Engine); abi-engine step-down and evict ask them
// (RequestStepDown, Standbys).
//
// Subjects follow the owner-scoped convention of the protocol (<prefix>.<owner>.<op>):
//
//	abi.engine.v1.control.<instance>.step_down   one engine, no queue group
//	abi.engine.v1.control.standbys               every engine standing by answers
//
// Both are plain NATS request/reply with JSON bodies; they are not kernel services and
// are never retried on "no responders" (nobody answering means no such engine).
package control
