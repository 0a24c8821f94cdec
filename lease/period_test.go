package lease_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	. "github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/leasetest"
)

func TestPeriodCodec(t *testing.T) {
	p := Period{InstanceID: "engine-a", Lease: 40 * time.Second}
	var raw map[string]any
	if err := json.Unmarshal(p.Encode(), &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw) != 2 || raw["instance_id"] != "engine-a" || raw["lease_ms"] != float64(40000) {
		t.Fatalf("Encode = %s, want {instance_id, lease_ms: 40000}", p.Encode())
	}
	if got := DecodePeriod(p.Encode()); got != p {
		t.Fatalf("DecodePeriod(Encode(p)) = %+v, want %+v", got, p)
	}
	for _, tc := range []struct {
		in   string
		want Period
	}{
		{`{"instance_id":"engine-a","lease_ms":1500}`, Period{"engine-a", 1500 * time.Millisecond}},
		{`{"instance_id":"engine-a","lease_ms":1500.0,"extra":true}`, Period{"engine-a", 1500 * time.Millisecond}},
		{`{"instance_id":"engine-a","lease_ms":1e12}`, Period{"engine-a", MaxPublishedLease}},
		{`{"instance_id":"engine-a","lease_ms":0}`, Period{}},
		{`{"instance_id":"engine-a","lease_ms":-5}`, Period{}},
		{`{"instance_id":"engine-a","lease_ms":"40000"}`, Period{}},
		{`{"instance_id":"engine-a"}`, Period{}},
		{`{"instance_id":7,"lease_ms":1000}`, Period{}},
		{`{"lease_ms":1000}`, Period{}},
		{`not json`, Period{}},
		{``, Period{}},
		{`[1,2]`, Period{}},
	} {
		if got := DecodePeriod([]byte(tc.in)); got != tc.want {
			t.Errorf("DecodePeriod(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestHolderLeaseNamesTheHolderOnly(t *testing.T) {
	h := holder("h", "")
	for _, tc := range []struct {
		name string
		rec  Record
		want time.Duration
	}{
		{"the holder's", Record{Holder: h, Revision: 3, Period: Period{h.InstanceID, 8 * time.Second}}, 8 * time.Second},
		{"none published", Record{Holder: h, Revision: 3}, 0},
		{"an earlier holder's", Record{Holder: h, Revision: 3, Period: Period{"engine-old", 8 * time.Second}}, 0},
		{"an unknown holder", Record{Holder: Holder{}, Revision: 3, Period: Period{"", 8 * time.Second}}, 0},
		{"a free lease", Record{Period: Period{h.InstanceID, 8 * time.Second}}, 0},
	} {
		if got := tc.rec.HolderLease(); got != tc.want {
			t.Errorf("%s: HolderLease() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A holder publishes its lease period when it takes the lease, before it serves.
func TestHolderPublishesItsPeriodBeforeServing(t *testing.T) {
	store := leasetest.NewMemStore()
	m := newMachine(t, Config{Me: holder("me", ""), Lease: longLease, StandbyTimeout: standby})
	out := m.Start(t0)
	out = m.Done(t0, Result{ID: out.Op.ID}) // read: free
	if out.Op == nil || out.Op.Kind != OpCreate {
		t.Fatalf("after a free read: %+v, want a create", out.Op)
	}
	rev, err := store.Create(context.Background(), out.Op.Holder)
	if err != nil {
		t.Fatal(err)
	}
	out = m.Done(t0, Result{ID: out.Op.ID, Rev: rev})
	if out.Op == nil || out.Op.Kind != OpPublish || out.Op.Period != (Period{"engine-me", longLease}) {
		t.Fatalf("after the create: %+v, want a publish of our period", out.Op)
	}
	if m.State() == StateServing || m.Revision() != rev {
		t.Fatalf("state %v, revision %d while publishing: want not serving yet, holding %d", m.State(), m.Revision(), rev)
	}
	// A publish that fails still lets it serve (once its epoch is settled); it publishes
	// again after a renewal.
	out = m.Done(t0, Result{ID: out.Op.ID, Err: errors.New("broker away")})
	if len(out.Events) != 1 || out.Events[0].Kind != EventStoreError {
		t.Fatalf("events %+v, want one store_error", out.Events)
	}
	if out.Op == nil || out.Op.Kind != OpReadEpoch {
		t.Fatalf("after the failed publish: %+v, want the epoch read", out.Op)
	}
	out = m.Done(t0, Result{ID: out.Op.ID}) // no epoch record
	erev, err := store.WriteEpoch(context.Background(), out.Op.Epoch, out.Op.Revision)
	if err != nil {
		t.Fatal(err)
	}
	m.Done(t0, Result{ID: out.Op.ID, Rev: erev})
	if m.State() != StateServing {
		t.Fatalf("state after a failed publish = %v, want serving", m.State())
	}
	at := t0.Add(longLease / 4)
	out = m.Tick(at)
	if out.Op == nil || out.Op.Kind != OpUpdate {
		t.Fatalf("at the renewal: %+v", out.Op)
	}
	next, err := store.Update(context.Background(), out.Op.Holder, out.Op.Revision)
	if err != nil {
		t.Fatal(err)
	}
	out = m.Done(at, Result{ID: out.Op.ID, Rev: next})
	if out.Op == nil || out.Op.Kind != OpPublish {
		t.Fatalf("after the renewal: %+v, want the publish again", out.Op)
	}
	if err := store.Publish(context.Background(), out.Op.Period); err != nil {
		t.Fatal(err)
	}
	out = m.Done(at, Result{ID: out.Op.ID})
	at = t0.Add(longLease / 2)
	if out = m.Tick(at); out.Op == nil || out.Op.Kind != OpUpdate {
		t.Fatalf("the renewal after a good publish: %+v", out.Op)
	}
	next2, _ := store.Update(context.Background(), out.Op.Holder, out.Op.Revision)
	if out = m.Done(at, Result{ID: out.Op.ID, Rev: next2}); out.Op != nil {
		t.Fatalf("published again after it succeeded: %+v", out.Op)
	}
	if r, _ := store.Read(context.Background()); r.HolderLease() != longLease {
		t.Fatalf("the store reads %v, want the holder's %v", r, longLease)
	}
}

// longLease is the holder's period of the mismatched-period fixtures: it renews every
// 2 s, so a contender on the 1 s lease of the other fixtures sees "silence" between two
// renewals.
const longLease = 8 * time.Second

// TestContenderJudgesTheHolderByTheLongerPeriod pins item 1 of issue 9: a contender
// never takes over a holder that renews on its own, longer, schedule; it waits the
// longer of its own period and the one the holder published. A holder that publishes
// none (a Python engine) is judged by the contender's own period, as before.
func TestContenderJudgesTheHolderByTheLongerPeriod(t *testing.T) {
	type outcome struct {
		state         State
		refused       bool
		after, before time.Duration // when it is reached
	}
	tests := []struct {
		name    string
		period  time.Duration // the holder's lease period
		publish string        // "holder", "none" (a Python engine), "earlier" (an earlier holder's key)
		renews  bool
		rollout string // the contender's; the holder has none
		want    outcome
	}{
		{name: "live holder on a longer period, same rollout", period: longLease, publish: "holder", renews: true,
			want: outcome{state: StateIdle, refused: true, after: longLease / 4, before: longLease/4 + renew}},
		{name: "live holder on a longer period, other rollout", period: longLease, publish: "holder", renews: true, rollout: "v2",
			want: outcome{state: StateStandby, after: 0, before: 0}},
		{name: "dead holder on a longer period", period: longLease, publish: "holder",
			want: outcome{state: StateServing, after: longLease, before: longLease + renew}},
		{name: "dead standby-watched holder on a longer period", period: longLease, publish: "holder", rollout: "v2",
			want: outcome{state: StateServing, after: longLease, before: longLease + renew}},
		{name: "dead holder that published nothing", period: longLease, publish: "none",
			want: outcome{state: StateServing, after: lease * 9 / 10, before: lease + renew}},
		{name: "dead holder, the period key names an earlier engine", period: longLease, publish: "earlier",
			want: outcome{state: StateServing, after: lease * 9 / 10, before: lease + renew}},
		{name: "dead holder on a shorter period", period: lease / 2, publish: "holder",
			want: outcome{state: StateServing, after: lease * 9 / 10, before: lease + renew}},
		// Documented: a holder that publishes nothing is judged by the contender's period.
		{name: "live holder that published nothing", period: longLease, publish: "none", renews: true,
			want: outcome{state: StateServing, after: lease * 9 / 10, before: lease + renew}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			store := leasetest.NewMemStore()
			h := holder("holder", "")
			store.Put(h)
			switch tt.publish {
			case "holder":
				store.Publish(ctx, Period{InstanceID: h.InstanceID, Lease: tt.period})
			case "earlier":
				store.Publish(ctx, Period{InstanceID: "engine-earlier", Lease: tt.period})
			}
			me := newSimWith(t, store, Config{Me: holder("me", tt.rollout), Lease: lease, StandbyTimeout: 10 * longLease})
			me.start()
			reached := time.Duration(-1)
			for d := time.Duration(0); d <= 3*longLease; d += 10 * time.Millisecond {
				if tt.renews && d > 0 && d%(tt.period/4) == 0 {
					if rec, _ := store.Read(ctx); rec.Holder == h {
						if _, err := store.Update(ctx, h, rec.Revision); err != nil {
							t.Fatal(err)
						}
					}
				}
				me.at(d)
				if reached < 0 && me.m.State() == tt.want.state && (tt.want.state != StateIdle || me.err != nil) {
					reached = d
				}
			}
			if reached < 0 {
				t.Fatalf("state = %v, never %v (log %v)", me.m.State(), tt.want.state, me.log)
			}
			if reached < tt.want.after || reached > tt.want.before {
				t.Fatalf("reached %v at %v, want within [%v, %v] (log %v)", tt.want.state, reached, tt.want.after, tt.want.before, me.log)
			}
			var as *AlreadyServingError
			if refused := errors.As(me.err, &as); refused != tt.want.refused || (refused && as.Holder != h) {
				t.Fatalf("err = %v, want refused %v naming the holder", me.err, tt.want.refused)
			}
			if tt.want.state != StateServing {
				if rec, _ := store.Read(ctx); rec.Holder != h {
					t.Fatalf("the live holder lost its lease to %v", rec.Holder)
				}
				if me.m.State() != tt.want.state {
					t.Fatalf("state at the end = %v, want %v (log %v)", me.m.State(), tt.want.state, me.log)
				}
			}
		})
	}
}

// Two real machines: a holder on a long lease and a contender on a short one.
func TestShortLeaseContenderNextToALongLeaseHolder(t *testing.T) {
	store := leasetest.NewMemStore()
	h := newSimWith(t, store, Config{Me: holder("holder", ""), Lease: longLease, StandbyTimeout: standby})
	h.start()
	h.at(longLease/4 + 10*time.Millisecond) // just after a renewal: the next is 2 s away
	me := newSim(t, store, holder("me", ""))
	me.now = h.now
	me.start()
	run(t, h, me)(2 * longLease)
	var as *AlreadyServingError
	if !errors.As(me.err, &as) || as.Holder.InstanceID != "engine-holder" {
		t.Fatalf("contender: err %v, state %v (log %v), want refused naming the holder", me.err, me.m.State(), me.log)
	}
	if h.m.State() != StateServing {
		t.Fatalf("holder: %v (log %v)", h.m.State(), h.log)
	}
}
