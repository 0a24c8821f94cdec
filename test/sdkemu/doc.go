// Package sdkemu is a client of the kernel services that follows, rule for rule, the
// transport of the Python SDK (naas-abi-sdk's Transport, its transfer reader and its
// overflow helpers), written in Go so that the protobuf contract can be exercised on
// every test run without Python: the headers a call carries, the context it fills,
// how it reads a reply, how it drives a transfer and how it moves a value larger than
// one broker message.
//
// It is deliberately not the engine's code: messages are built and read with the
// generated types of proto/abi, tokens are signed with golang-jwt directly, and every
// rule below is the client's, so a test that passes through it passes for the same
// reason a Python client would.
//
// The rules:
//   - every call carries Nats-Auth-Token (a non-empty token without CR or LF, else the
//     call is refused before anything is sent) and, unless it is a chunk exchange of an
//     overflow session, Abi-Overflow: 1; a traceparent when one is given;
//   - the request's context is filled on a copy: trace_id (a uuid4 with hyphens) when
//     empty, timeout_ms always, from the transport's timeout;
//   - a reply carrying Nats-Service-Error or Nats-Service-Error-Code is an error
//     whatever its body (code: the header's value, or UNKNOWN), checked before decoding;
//   - a reply naming a parked reply (Abi-Overflow-Reply) is read from the overflow
//     host without a start, checked against Abi-Overflow-Size, and always closed;
//   - a decoded reply whose error field is set is an error carrying the code, the
//     message and the decoded response (the error field is number 2, 1 or 15 by
//     message: found by name, as the SDK does);
//   - a request whose body and header block do not fit the connection's max payload is
//     uploaded to abi.rpc.overflow (open with operation "request", writes from
//     sequence 0) and the call is sent with an empty body and Abi-Overflow-Request,
//     the upload closed afterwards whatever happened;
//   - a transfer is read from sequence 0: a reply whose sequence is not the one asked
//     is a protocol breach; done is looked at first and ends the stream (data in a done
//     reply is dropped); pending waits 20 ms and asks again.
package sdkemu
