package protocol

import "encoding/json"

// HeaderOverflowRequest names a request uploaded to the overflow host; its body is
// empty, and only the protobuf protocol has such requests.
const HeaderOverflowRequest = "Abi-Overflow-Request"

// HeaderAuthToken carries the service token (an HS256 JWT) of a call.
const HeaderAuthToken = "Nats-Auth-Token"

// Codec is the wire format of one call: each request chooses its own (IsJSON), and
// its reply is in the same.
type Codec uint8

const (
	// JSON is the engine's own protocol (natscli, people, the Go SDK).
	JSON Codec = iota
	// Protobuf is the abi.*.v1 messages of the Python clients.
	Protobuf
)

func (c Codec) String() string {
	if c == Protobuf {
		return "protobuf"
	}
	return "json"
}

// IsJSON reports whether a request body is in the JSON protocol: a body that starts
// with '{' (the JSON path pays only this byte's check), else any valid JSON, so that a
// JSON body that is not an object keeps its JSON error ("must be a JSON object").
// Everything else is protobuf, the empty body included (an all-defaults message; the
// JSON protocol requires an object). No protobuf request can start with '{': that
// byte is field 15 as a group, which no request message has, and the Python clients'
// requests start with their context, byte 0x0a. A request naming an upload
// (HeaderOverflowRequest) has an empty body, so it is protobuf too.
func IsJSON(body []byte) bool {
	if len(body) == 0 {
		return false
	}
	if body[0] == '{' {
		return true
	}
	// A protobuf body fails here within its first bytes: 0x0a is JSON white space,
	// but the length byte after it is no JSON token.
	return json.Valid(body)
}
