package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
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
	holder := start(t, "holder", engineConfig{NATSURL: srv.URL(), Lease: 16, HTTPPort: testproc.FreePort(t)})
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
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), Rollout: "v1", Lease: lease, HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 20*time.Second)
	b := start(t, "B", engineConfig{NATSURL: srv.URL(), Rollout: "v2", Lease: lease, HTTPPort: testproc.FreePort(t)})
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

// TestStandbyBeatenToTheReleasedLeaseExitsThree is issue 9 item 9: two standbys of v2
// wait while v1 serves; on v1's SIGTERM one takes the lease and the other exits 3,
// naming it, as a second engine refused at start does (not idle for good).
func TestStandbyBeatenToTheReleasedLeaseExitsThree(t *testing.T) {
	srv := natstest.Start(t)
	v1 := start(t, "v1", engineConfig{NATSURL: srv.URL(), Rollout: "v1", HTTPPort: testproc.FreePort(t)})
	v1.waitState("serving", 20*time.Second)
	b1 := start(t, "v2-a", engineConfig{NATSURL: srv.URL(), Rollout: "v2", HTTPPort: testproc.FreePort(t)})
	b2 := start(t, "v2-b", engineConfig{NATSURL: srv.URL(), Rollout: "v2", HTTPPort: testproc.FreePort(t)})
	b1.waitState("standby", 20*time.Second)
	b2.waitState("standby", 20*time.Second)
	ids := map[*proc]string{b1: b1.instanceID(), b2: b2.instanceID()}
	kv := leaseKV(t, srv.URL())

	v1.signal(syscall.SIGTERM)
	if code := v1.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("v1 exited %d after SIGTERM, want 0", code)
	}
	var winner, loser *proc
	select {
	case <-b1.exited:
		winner, loser = b2, b1
	case <-b2.exited:
		winner, loser = b1, b2
	case <-time.After(20 * time.Second):
		t.Fatalf("neither v2 standby exited after the handover (the lease names %q)", holderOf(t, kv))
	}
	if code := loser.exitCode(time.Second); code != 3 {
		t.Fatalf("%s exited %d, want 3", loser.name, code)
	}
	winner.waitState("serving", 10*time.Second)
	if got := holderOf(t, kv); got != ids[winner] {
		t.Fatalf("the lease names %q, want the winner %s", got, ids[winner])
	}
	out := loser.out.String()
	for _, want := range []string{"another engine already serves this NATS account: " + ids[winner], "rollout v2", "ABI_ROLLOUT_ID"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s output lacks %q:\n%s", loser.name, want, out)
		}
	}
}

// TestStandbyOfAnotherRolloutKeepsStandingBy is the other half of issue 9 item 9: with
// standbys of v2 and v3 waiting for v1, whichever takes the released lease, the other
// rollout's standby goes on standing by (and counts as ready) next to the new holder.
func TestStandbyOfAnotherRolloutKeepsStandingBy(t *testing.T) {
	srv := natstest.Start(t)
	v1 := start(t, "v1", engineConfig{NATSURL: srv.URL(), Rollout: "v1", HTTPPort: testproc.FreePort(t)})
	v1.waitState("serving", 20*time.Second)
	v2 := start(t, "v2", engineConfig{NATSURL: srv.URL(), Rollout: "v2", HTTPPort: testproc.FreePort(t)})
	v3 := start(t, "v3", engineConfig{NATSURL: srv.URL(), Rollout: "v3", HTTPPort: testproc.FreePort(t)})
	v2.waitState("standby", 20*time.Second)
	v3.waitState("standby", 20*time.Second)
	ids := map[string]*proc{v2.instanceID(): v2, v3.instanceID(): v3}
	kv := leaseKV(t, srv.URL())

	v1.signal(syscall.SIGTERM)
	if code := v1.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("v1 exited %d after SIGTERM, want 0", code)
	}
	deadline := time.Now().Add(20 * time.Second)
	var winner *proc
	for winner == nil {
		if p := ids[holderOf(t, kv)]; p != nil && p.serving() {
			winner = p
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no standby serves 20 s after the handover (the lease names %q)", holderOf(t, kv))
		}
		time.Sleep(20 * time.Millisecond)
	}
	other := v2
	if winner == v2 {
		other = v3
	}
	// Two renewals of the new holder later (half a lease), the other still stands by.
	nextRenewal(t, kv, 5*time.Second)
	nextRenewal(t, kv, 5*time.Second)
	other.waitState("standby", time.Second)
	other.waitHTTP("/readyz", 200, time.Second)
	winner.waitState("serving", time.Second)
	if _, body, _ := other.get("/status"); !strings.Contains(body, winner.instanceID()) {
		t.Fatalf("%s stands by for someone else: %s", other.name, body)
	}
}
