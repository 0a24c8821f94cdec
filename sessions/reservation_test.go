package sessions

import (
	"errors"
	"testing"

	"github.com/abi-engine/engine/protocol"
)

// A reservation takes its bytes from the budget at once and gives them back exactly
// once, whoever releases it how often; what can never fit is PAYLOAD_TOO_LARGE, what
// does not fit now RESOURCE_EXHAUSTED, retryable, and neither takes anything.
func TestReservationTakesAndGivesBackOnce(t *testing.T) {
	srv := smallBroker(t)
	budget := NewBudget(90<<10, 60<<10)
	o := startOverflow(t, connect(t, srv), OverflowConfig{Budget: budget, MaxReplyBytes: 50 << 10})

	r, err := o.Reserve("a", 40<<10, 30<<10)
	if err != nil {
		t.Fatal(err)
	}
	if budget.Used() != 40<<10 || r.Held() != 40<<10 {
		t.Fatalf("reserved 40 KiB: the budget holds %d, the reservation %d", budget.Used(), r.Held())
	}
	for _, c := range []struct {
		client      string
		hold, reply int64
		code        protocol.Code
		retryable   bool
	}{
		{"b", 40 << 10, 51 << 10, protocol.PayloadTooLarge, false},  // the reply above the overflow limit
		{"b", 61 << 10, 40 << 10, protocol.PayloadTooLarge, false},  // above a client's share
		{"a", 30 << 10, 30 << 10, protocol.ResourceExhausted, true}, // "a" holds 40 of its 60
		{"b", 60 << 10, 40 << 10, protocol.ResourceExhausted, true}, // 40 of the 90 held
	} {
		_, err := o.Reserve(c.client, c.hold, c.reply)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != c.code || pe.Retryable != c.retryable {
			t.Errorf("reserve %d for a reply of %d (client %s): %v; want %s, retryable %v", c.hold, c.reply, c.client, err, c.code, c.retryable)
		}
	}
	if budget.Used() != 40<<10 {
		t.Fatalf("after the refusals the budget holds %d; want the 40 KiB reserved", budget.Used())
	}
	r.Release()
	r.Release()
	var none *Reservation
	none.Release()
	if budget.Used() != 0 || r.Held() != 0 {
		t.Fatalf("after two releases the budget holds %d, the reservation %d; want 0", budget.Used(), r.Held())
	}
}
