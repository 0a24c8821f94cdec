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

// serving reports whether p says it serves; a process that exited does not.
func (p *proc) serving() bool {
	select {
	case <-p.exited:
		return false
	default:
	}
	_, body, err := p.get("/status")
	return err == nil && strings.Contains(body, `"state": "serving"`)
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

// TestOutsideDeleteFencesTheHolderAtOnce is issue 9 item 3: `owner` deleted from
// outside under a serving engine (lease 20 s: its next renewal is 5 s away) with a
// standby present. The holder watches its own key and stops serving at once; the
// standby, which sees the delete too, may create the key first. Either way, before the
// holder's next renewal exactly one engine serves, the one the lease names, and the
// holder logged the eviction.
func TestOutsideDeleteFencesTheHolderAtOnce(t *testing.T) {
	srv := natstest.Start(t)
	const lease, renew = 20, 5 * time.Second
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), Rollout: "v1", Lease: lease, HTTPPort: freePort(t)})
	a.waitState("serving", 20*time.Second)
	b := start(t, "B", engineConfig{NATSURL: srv.URL(), Rollout: "v2", Lease: lease, HTTPPort: freePort(t)})
	b.waitState("standby", 20*time.Second)
	ids := map[*proc]string{a: a.instanceID(), b: b.instanceID()}
	kv := leaseKV(t, srv.URL())

	nextRenewal(t, kv, 2*renew)
	renewed := time.Now()
	if err := kv.Delete(ctxFor(t, 5*time.Second), "owner"); err != nil {
		t.Fatal(err)
	}
	// Settle well before A's next renewal, which would also find the key changed.
	deadline := renewed.Add(renew - time.Second)
	for {
		holder := holderOf(t, kv)
		var serves, others []*proc
		for p, id := range ids {
			if p.serving() {
				serves = append(serves, p)
			}
			if id != holder {
				others = append(others, p)
			}
		}
		if len(serves) == 1 && ids[serves[0]] == holder {
			t.Logf("after the delete, %s holds and serves (%s after the renewal)", serves[0].name, time.Since(renewed))
			break
		}
		if time.Now().After(deadline) {
			names := func(ps []*proc) (s []string) {
				for _, p := range ps {
					s = append(s, p.name)
				}
				return s
			}
			t.Fatalf("%s after A's renewal (its next is at %s): serving %v, the lease names %q (not %v)",
				time.Since(renewed), renew, names(serves), holder, names(others))
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.waitLog(`"event":"evicted"`, time.Second)
}
