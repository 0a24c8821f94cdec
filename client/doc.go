// Package client is the Go SDK of the kernel services an abi-engine serves over NATS.
// Go programs, the engine's client role and its CLI use it.
//
// A handover between engines is invisible to the caller. While one engine stops
// accepting and the next one subscribes, requests briefly reach nobody ("no responders"),
// and an engine that was fenced answers UNAVAILABLE with retryable true without running
// anything. In both cases nothing ran, so the Transport resends the call; retryable true
// means exactly that, whoever sets it (a backend that refused a write sets it too), and
// an UNAVAILABLE without it (a write whose outcome is unknown) is never resent. It starts with
// a 50 ms pause, doubles it up to 500 ms, and keeps going for up to 5 s (RetryPolicy).
// The window closes 0.5 s before the caller's deadline, so the caller sees "no
// responders" rather than a timeout. Only subjects that any serving engine answers
// through a queue group are resent (see Retryable). A subject that names one engine
// instance fails at once. A timeout is never resent, because the call may have run.
//
// Every error is a *CallError. It wraps a *protocol.Error, which carries the code, the
// message and the retryable flag, decoded from the engine's error envelope
// {"error": {...}} or made up for what went wrong on the way. When the failure happened
// on the way, it also wraps the cause from nats.go or from the context. Match errors with
// errors.Is and errors.As:
//
//	_, err := kv.Exists(ctx, "k")
//	switch {
//	case errors.Is(err, nats.ErrNoResponders): // no engine serves keyvalue
//	case errors.Is(err, protocol.ErrInvalidArgument):
//	}
//
// KeyValue and ObjectStorage are typed clients with the method sets of the engine's own
// backends, so a client-role engine can hand them to its modules in place of a local
// backend. KeyValue implements primaries/keyvalue.Store and ObjectStorage implements
// primaries/objectstorage.Store, without importing primaries.
//
// # Large payloads
//
// A broker message is limited (its max payload, 1 MiB by default), so larger payloads
// travel in other ways, up to the Transport's transfer limit (WithMaxTransferBytes,
// 256 MiB by default):
//
//   - Parked replies. Every typed call whose reply can outgrow a message (get_object,
//     list_objects, and every call of an embedder's service:
//     protocol.ReplyMayOverflow) carries the header Abi-Overflow: 1. An engine
//     whose reply does not fit one message parks it and answers with where to read it
//     (protocol.OverflowEnvelope); the Transport reads it chunk by chunk from the engine
//     that parked it, closes the parked session and hands the body on as if it had
//     arrived whole. Request does the same for any caller that sets the header, and
//     Transport.Call as the typed clients do. A keyvalue get, the most frequent call
//     and one whose value rarely outgrows a message, goes without the header (it costs
//     every call that carries it its encoding, the broker's parsing and the engine's
//     decoding); when the engine answers PAYLOAD_TOO_LARGE, the get is sent once more
//     with the header (it only reads) and counted in Stats.OverflowResends.
//   - Transfers (protocol/transfer.go). Upload and Download run one transfer session:
//     open, write the data in chunks, start the operation, read its result, close. The
//     client asks for the largest chunk that fits one message as base64, at most half
//     the max payload, and uses what the engine grants. ObjectStorage.PutObject uploads
//     an object whose request does not fit one message through the transfer operation
//     "put"; GetObject falls back to the transfer operation "get" when the engine
//     answers PAYLOAD_TOO_LARGE, and DownloadObject uses it directly.
//
// A keyvalue set whose request does not fit one message has no such way: request
// overflow (an upload on abi.rpc.overflow named by Abi-Overflow-Request) is a feature
// of the engine's protobuf protocol, which the Python clients speak, and this package
// speaks JSON. Such a set fails before it is sent, PAYLOAD_TOO_LARGE "the request
// exceeds the broker's max payload"; keep values below the max payload, or store them
// as objects.
//
// During a handover a transfer behaves like any call: the open is resent until the next
// engine takes it. The session's own calls (write, start, read, close) go to the engine
// that opened it and fail at once when it is gone, as do the reads of a parked reply;
// the whole transfer then fails, and an error after the operation ran is not retryable.
// A session is always closed, on errors too, with a fresh short context if the
// caller's has ended.
//
// The Transport's Counters (calls, retries, give-ups, failures by code) feed the
// engine's metrics.
//
// Usage:
//
//	nc, err := nats.Connect(url)
//	if err != nil { ... }
//	defer nc.Close()
//	t, err := client.NewTransport(nc)
//	if err != nil { ... }
//	kv := client.NewKeyValue(t)
//	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
//	defer cancel()
//	if err := kv.Set(ctx, "greeting", []byte("hello"), 0); err != nil { ... }
//	v, found, err := kv.Get(ctx, "greeting")
package client
