// Package sessions holds what the engine must let finish before it hands over: calls and
// transfer sessions. It provides the owner ids and session ids that route a session's
// calls to the engine holding it, the Host contract the handover drives, StopDelivery
// (end a subscription at the broker without losing what it was already sent),
// WaitForSessions (the two-round drain), the TransferHost (chunked transfers, a
// hollywood actor with one child actor per session) and the OverflowHost (replies too
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
//     failed start ends the session.
//  5. Download: TransferReadRequest{id, sequence} with sequence 0, 1, 2, ... answered
//     TransferReadReply{data, sequence, done}; done marks the last chunk.
//  6. TransferCloseRequest{id} ends the session and frees its bytes; closing an unknown
//     session succeeds. A session no call touches for the idle timeout (60 s by
//     default, on the injected Clock) is closed by the host. A call on a closed,
//     expired or unknown session is NOT_FOUND.
//
// Every reply carries Abi-Engine-Instance: <owner>; errors are protocol.Envelope with
// the headers of design §4.3.
//
// # Overflow
//
// A ServicePrimary answers through OverflowHost.Reply. A reply that does not fit the
// broker's max payload is parked as a session that is already started (step 4 done)
// when the request carried Abi-Overflow: 1; the caller receives a
// protocol.OverflowEnvelope (and the Abi-Overflow-Reply and Abi-Overflow-Size headers)
// and performs steps 5 and 6 on protocol.OverflowPrefix. Without the header the reply is
// PAYLOAD_TOO_LARGE.
//
// # Handover
//
//  1. StopAccepting: the host ends P.open at the broker with StopDelivery and returns
//     once the broker confirmed the UNSUB; the opens it had already been sent are still
//     answered, and the owner-scoped subjects keep serving open sessions.
//  2. WaitForSessions: twice, every host's SessionsFinished, until nothing is open or
//     the drain deadline.
//  3. Stop: every subscription ends, every remaining session is closed and its handler
//     cancelled.
//
// The host actor obeys the same steps as role messages (actors.Serve, StopAccepting,
// Stop) and answers Accepting, Drained and Down.
//
// # Crashes
//
// The TransferHost value is the durable state: subscriptions, the session registry,
// budgets and counters. Every actor runs under actors.Recover, which restarts a crashed
// actor in place (same PID and inbox; an actors.Kill crashes one on purpose). The host
// actor holds nothing of its own, so its crash loses no session and no queued call. A
// session's bytes and sequence numbers live only in its actor, so a crashed session
// actor loses its session: its next call is NOT_FOUND, and no other session notices.
package sessions
