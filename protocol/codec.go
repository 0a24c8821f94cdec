package protocol

import "encoding/json"

// requestAppender is a request with an appender of its own (AppendJSON).
type requestAppender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// replyDecoder is a reply with a fast path of its own (DecodeFast).
type replyDecoder interface{ DecodeFast(data []byte) bool }

// EncodeRequest encodes a request body as json.Marshal does, without reflection for
// this package's request types (their AppendJSON). The SDKs' side of the codec; the
// engine's is DecodeFast on requests and AppendJSON on replies.
func EncodeRequest(req any) ([]byte, error) {
	if a, ok := req.(requestAppender); ok {
		return a.AppendJSON(make([]byte, 0, 128))
	}
	return json.Marshal(req)
}

// DecodeReply decodes a reply body into out as json.Unmarshal does; this package's
// reply types in the shapes the engine writes take their fast path instead
// (DecodeFast).
func DecodeReply(data []byte, out any) error {
	if d, ok := out.(replyDecoder); ok && d.DecodeFast(data) {
		return nil
	}
	return json.Unmarshal(data, out)
}
