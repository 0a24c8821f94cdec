package sessions

import (
	"bytes"
	"testing"

	"github.com/abi-engine/engine/internal/natstest"
)

// BenchmarkTransferRoundTrip runs whole echo sessions (open, 32 writes of 8 KiB,
// start, 32 reads, close) against a real broker: the cost of the path every chunk
// takes, callback to host actor to session actor and back.
func BenchmarkTransferRoundTrip(b *testing.B) {
	srv := natstest.Start(b, natstest.WithMaxPayload(testMaxPayload))
	startHost(b, connect(b, srv), TransferConfig{Handlers: newStore().handlers()})
	c := newClient(b, connect(b, srv), testPrefix)
	data := payload(32 * testMaxPayload / 2)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		out, err := c.roundTrip("echo", nil, data)
		if err != nil || !bytes.Equal(out, data) {
			b.Fatalf("round trip: %d bytes, %v", len(out), err)
		}
	}
}
