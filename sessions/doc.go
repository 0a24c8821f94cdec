// Package sessions holds what the engine must let finish before it hands over: calls and
// transfer sessions. It provides the owner ids and session ids that route a session's
// calls to the engine holding it, the Host contract the handover drives, StopDelivery
// (end a subscription at the broker without losing what it was already sent),
// WaitForSessions (the two-round drain), the TransferHost (chunked transfers: a
// hollywood actor for the host, and one per session) and the OverflowHost (replies too
// large for one message).
//
// # Transfer protocol
//
// The payloads are in protocol/transfer.go. A host serving prefix P with instance id
// <owner>:
//
//  1. The client sends TransferOpenRequest{operation, metadata, chunk_bytes, size} to
//     P.open. The subject is queue-grouped (P.owners), so any serving engine may take
//     it; that engine spawns a session actor and answers TransferOpenReply{id,
//     chunk_bytes} with id "<owner>:<32 hex>" and the negotiated chunk size:
//     min(requested, the host's size), the host's size being at most half the broker's
//     max payload (base64 makes a chunk a third larger); a request below 1024 bytes is
//     INVALID_ARGUMENT.
//  2. Every later call goes to P.<owner>.<op>, which only the owning engine subscribes
//     (no queue group), so a session stays on its engine even once another one takes
//     the new opens. The client derives the subject from the id.
//  3. Upload: TransferWriteRequest{id, sequence, data} with sequence 0, 1, 2, ... and
//     data at most chunk_bytes. A wrong sequence is CONFLICT; bytes beyond the session's
//     or the host's limit are PAYLOAD_TOO_LARGE or RESOURCE_EXHAUSTED.
//  4. TransferStartRequest{id} runs the operation's Handler once, on a goroutine of the
//     host, with the assembled upload; it is answered TransferStartReply{size} when the
//     handler has returned, size being what it produced. A second start is CONFLICT; a
//     failed start ends the session. A handler that knows what it will produce before
//     producing it (a download, from the object's metadata) reserves those bytes first
//     (TransferRequest.Reserve), so a start beyond the budget is refused
//     RESOURCE_EXHAUSTED having read nothing.
//  5. Download: TransferReadRequest{id, sequence} with sequence 0, 1, 2, ... answered
//     TransferReadReply{data, sequence, done}; done marks the last chunk.
//  6. TransferCloseRequest{id} ends the session and frees its bytes; closing an unknown
//     session succeeds. A session no call touches for the idle timeout (60 s by
//     default, on the injected Clock) is closed by the host. A call on a closed,
//     expired or unknown session is NOT_FOUND.
//
// Every reply carries Abi-Engine-Instance: <owner>; errors are protocol.Envelope with
// the headers of docs/design.md §4.3.
//
// # Codecs and callers
//
// The same exchanges also speak protobuf (package abi.transfer.v1, the Python
// clients'; codec.go): a session speaks the codec of its open (protocol.IsJSON on the
// open's body) or, a parked reply, of the call that parked it, and a request in the
// other codec is INVALID_ARGUMENT. Protobuf requests are decoded into the JSON
// protocol's request types, so the actors run one protocol; replies are encoded back
// in the call's codec, errors in the response's field 15 with Abi-Error-Code. A
// protobuf read answers done in a reply of its own after the last data (the Python
// clients drop data that comes with done), at the sequence asked, without advancing.
//
// With TransferConfig.Tokens every exchange must carry a valid Nats-Auth-Token
// (UNAUTHENTICATED otherwise, checked in the NATS callback before anything else), and
// a session belongs to the `sub` of its opener's token: the host actor answers an
// exchange from another caller PERMISSION_DENIED before the session sees it (auth.go).
// Without Tokens, protobuf exchanges are refused and JSON sessions belong to nobody.
//
// # Overflow
//
// A ServicePrimary answers through OverflowHost.Reply. A reply that does not fit the
// broker's max payload is parked as a session that is already started (step 4 done)
// when the request carried Abi-Overflow: 1; the caller receives a
// protocol.OverflowEnvelope (and the Abi-Overflow-Reply and Abi-Overflow-Size headers)
// and performs steps 5 and 6 on protocol.OverflowPrefix. Without the header the reply is
// PAYLOAD_TOO_LARGE. A protobuf call is answered through ReplyProtobuf: the notice is
// an empty body with those two headers only, and its reads speak protobuf.
//
// A request too large for one message goes the other way (protocol/overflowrequest.go):
// the client opens an upload (operation "request") on the overflow host and writes it,
// then calls with an empty body naming it. The primary serving the call asks its
// OverflowHost.ReadRequest, which takes an upload of its own engine's from its session
// actor (checking it is the caller's), or fetches one held by another engine with start,
// reads and close on that engine's owner-scoped subjects, forwarding the caller's token.
// Either way the upload is closed once read, and its bytes stay in the budget (the
// holder's, or the reader's for a fetch) until the call releases them.
//
// # Handover
//
//  1. StopAccepting: the host ends P.open at the broker with StopDelivery and returns
//     once the broker confirmed the UNSUB; the opens it had already been sent are still
//     answered, and the owner-scoped subjects keep serving open sessions. While the
//     connection is down it drains nothing (that would leave the subscription at the
//     broker, see WaitConnected) and a later StopAccepting drains it.
//  2. WaitForSessions: twice, every host's SessionsFinished, until nothing is open or
//     the drain deadline.
//  3. Stop: every subscription ends, every remaining session is closed and its handler
//     cancelled.
//
// The host actor obeys the same steps as role messages (actors.Serve, StopAccepting,
// Stop) and answers Accepting, Drained and Down; the methods Serve, StopAccepting,
// Stop and Close send it the same commands and wait for its answer. Close stops the
// host for good and waits, bounded by its context, for everything the host started.
//
// # Actors and what they own
//
// The host actor owns its role state, as plain fields touched only in its Receive: the
// phase (actors.RolePhase: idle, subscribing, serving, stopping-accepting, draining,
// stopping, stopped, closed), the broker step running and the role commands waiting
// behind it (actors.RoleQueue), and whom to answer (actors.RoleCommand). Each broker step (subscribe and flush; UNSUB of P.open and its
// confirmation; UNSUB of everything, a flush and the wait for the handlers) runs on a
// goroutine of the host's that reports back with a message (actors.StartStep), and the next command
// starts from the mailbox; a Stop cuts a running Serve or StopAccepting short rather
// than wait for it. The wait for sessions after an actor's StopAccepting is a goroutine
// too, which reports when it ends.
//
// The host actor alone changes the TransferHost's durable state: the subscriptions, the
// registry of open sessions, the byte budget, and the context sessions run under. A
// session actor asks for bytes by message (reserve, answered reserved; a running
// handler's Reserve goes through its session actor as reserveAhead), and reports a
// failed start, a crash and each answered call the same way. The one counter changed
// off the actors is the hot path's own: the calls in flight, an atomic counted at the
// edge so the limit holds before anything queues.
//
// NATS callbacks read nothing of the registry. Each decodes its request, counts it,
// and sends it to the host actor, which answers opens and closes itself and routes
// every other call to its session's actor. The detour is what keeps a call from being
// lost: hollywood drops what lands behind a poison pill without a trace, and since the
// host actor both routes calls and poisons session actors, every call it routes is
// ahead of the pill. Handles read what the host actor publishes through
// internal/notify: Sessions, SessionPID and SessionsFinished a copy-on-write view (the
// open sessions, the drain of P.open), SessionsFinished also the in-flight count.
//
// Every goroutine has an owner that waits for it: the steps, drain waits and what a
// stopped actor leaves behind are in the host's steps group; the reaper (whose ticker
// the host actor starts at Serve and stops at Stop, at a restart and when it stops) and
// the handlers are in its work group, which Stop waits for and which takes no new
// handler from Stop to the next Serve. Close waits for both, for the session actors and
// for the host actor.
//
// # Crashes
//
// Every actor runs under actors.Recover, which restarts a crashed actor in place (same
// PID and inbox; an actors.Kill crashes one on purpose). The host actor keeps its role
// state across the restart (a command in progress is still in progress: its step will
// report, and its sender waits) and the TransferHost keeps the rest, so its crash loses
// no session and no queued call; the message it crashed on is answered (a call
// INTERNAL) or handled once more, and its reaper restarts. A session's bytes and
// sequence numbers live only in its actor, so a crashed session actor loses its
// session: its next call is NOT_FOUND, closing it succeeds, and no other session
// notices.
//
// # Logging
//
// Hosts log through the *zap.Logger of their config (nil discards), like the rest of
// the engine.
package sessions
