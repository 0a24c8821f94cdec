package protocol

// Request overflow: a call whose request does not fit one message. The caller uploads
// the request's bytes to the overflow host (OverflowPrefix) as a session of operation
// OverflowRequestOperation, then makes the call with an empty body and
// HeaderOverflowRequest naming that session; the engine serving the call reads the
// upload from the engine that holds it, closes it, and runs the call on its bytes.
// The Python clients speak it in protobuf only; a call carrying the header is a
// protobuf call whatever its body.

// OverflowRequestOperation is the operation of an upload holding a request too large
// for one message: the only operation a client opens on OverflowPrefix. The client
// writes and never starts it; the engine that serves the call reads it.
const OverflowRequestOperation = "request"

// DefaultMaxOverflowRequestBytes bounds one overflow upload, as the Python engine's
// max_value_bytes does (256 MiB both ways).
const DefaultMaxOverflowRequestBytes = 256 << 20
