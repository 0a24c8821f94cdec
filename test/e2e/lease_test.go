package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// leaseKV is the lease bucket the engines on url use.
func leaseKV(t *testing.T, url string) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(natstest.Connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctxFor(t, 10*time.Second), "ABI_ENGINE")
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// nextRenewal waits for the next write of the lease key and returns its revision: a
// holder that just renewed renews next a quarter lease later.
func nextRenewal(t *testing.T, kv jetstream.KeyValue, within time.Duration) uint64 {
	t.Helper()
	ctx := ctxFor(t, within)
	w, err := kv.Watch(ctx, "owner", jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop() //nolint:errcheck // the watch ends either way
	for {
		select {
		case e := <-w.Updates():
			if e != nil {
				return e.Revision()
			}
		case <-ctx.Done():
			t.Fatalf("no write of the lease key within %s", within)
		}
	}
}

// holderOf is the instance id the lease key names now ("" when free).
func holderOf(t *testing.T, kv jetstream.KeyValue) string {
	t.Helper()
	e, err := kv.Get(ctxFor(t, 5*time.Second), "owner")
	if err != nil {
		return ""
	}
	var h struct {
		InstanceID string `json:"instance_id"`
	}
	_ = json.Unmarshal(e.Value(), &h)
	return h.InstanceID
}

// TestShortLeaseContenderNeverTakesOverALongLeaseHolder is issue 9 item 1: a holder
// with lease_seconds 16 renews every 4 s; a contender with lease_seconds 1, started just
// after a renewal, sees a second of "silence" long before the next one. It must judge
// the holder by the holder's published period, see it renew, and fail naming it, as a
// contender of the same rollout does; the holder never exits.
func TestShortLeaseContenderNeverTakesOverALongLeaseHolder(t *testing.T) {
	srv := natstest.Start(t)
	holder := start(t, "holder", engineConfig{NATSURL: srv.URL(), Lease: 16, HTTPPort: freePort(t)})
	holder.waitState("serving", 20*time.Second)
	id := holder.instanceID()
	kv := leaseKV(t, srv.URL())

	// The period is published beside the record, whose value keeps its six keys.
	p, err := kv.Get(ctxFor(t, 5*time.Second), "lease_period")
	if err != nil {
		t.Fatalf("no lease_period key: %v", err)
	}
	if got, want := string(p.Value()), `{"instance_id":"`+id+`","lease_ms":16000}`; got != want {
		t.Fatalf("lease_period = %s, want %s", got, want)
	}
	owner, err := kv.Get(ctxFor(t, 5*time.Second), "owner")
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(owner.Value(), &keys); err != nil || len(keys) != 6 {
		t.Fatalf("owner = %s, want exactly the six keys", owner.Value())
	}

	nextRenewal(t, kv, 10*time.Second)
	contender := start(t, "contender", engineConfig{NATSURL: srv.URL(), Lease: 1})
	select {
	case <-contender.exited:
	case <-holder.exited:
		t.Fatalf("the holder exited while the contender ran: %v", holder.waitErr)
	case <-time.After(30 * time.Second):
		t.Fatal("the contender neither failed nor exited within 30 s")
	}
	if code := contender.exitCode(time.Second); code != 3 {
		t.Fatalf("contender exited %d, want 3", code)
	}
	out := contender.out.String()
	for _, want := range []string{"another engine already serves", id, "rollout none", "ABI_ROLLOUT_ID"} {
		if !strings.Contains(out, want) {
			t.Errorf("contender output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "took over") {
		t.Fatalf("the contender took the live holder's lease over:\n%s", out)
	}
	// The holder renews on and serves; it never saw another holder.
	nextRenewal(t, kv, 10*time.Second)
	if got := holderOf(t, kv); got != id {
		t.Fatalf("the lease names %q, want the holder %s", got, id)
	}
	holder.waitState("serving", time.Second)
	if strings.Contains(holder.out.String(), `"event":"lost"`) {
		t.Fatalf("the holder saw its lease lost:\n%s", holder.out.String())
	}
}
