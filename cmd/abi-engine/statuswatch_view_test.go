package main

import (
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/nats-io/nats.go/jetstream"
)

// entry is a KV update as the watch delivers it.
type entry struct {
	key string
	val []byte
	rev uint64
	op  jetstream.KeyValueOp
}

func (e entry) Bucket() string                  { return jetstreamstore.DefaultBucket }
func (e entry) Key() string                     { return e.key }
func (e entry) Value() []byte                   { return e.val }
func (e entry) Revision() uint64                { return e.rev }
func (e entry) Created() time.Time              { return time.Unix(1_800_000_000, 0) }
func (e entry) Delta() uint64                   { return 0 }
func (e entry) Operation() jetstream.KeyValueOp { return e.op }

// TestWatchLinesOfEachChange: the events status --watch prints for each kind of change
// (and the ones it does not: a renewal, an epoch written again unchanged, a delete of a
// free lease), with the epoch's number and state on every line.
func TestWatchLinesOfEachChange(t *testing.T) {
	a := lease.Holder{InstanceID: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", RolloutID: "v1"}
	b := lease.Holder{InstanceID: "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", RolloutID: "v2"}
	put := func(h lease.Holder, rev uint64) jetstream.KeyValueEntry {
		return entry{jetstreamstore.Key, h.Encode(), rev, jetstream.KeyValuePut}
	}
	epoch := func(n uint64, id string, s lease.EpochState, rev uint64) jetstream.KeyValueEntry {
		return entry{jetstreamstore.EpochKey, lease.EpochRecord{Epoch: n, InstanceID: id, State: s}.Encode(), rev, jetstream.KeyValuePut}
	}
	var out strings.Builder
	v := &leaseView{out: &out}
	now := time.Unix(1_800_000_100, 0)
	for _, e := range []jetstream.KeyValueEntry{
		put(a, 1), epoch(1, a.InstanceID, lease.EpochServing, 2), nil, // the initial values
		put(a, 3), // a renewal: nothing
		epoch(1, a.InstanceID, lease.EpochServing, 4), // written again unchanged: nothing
		epoch(1, a.InstanceID, lease.EpochDraining, 5),
		put(a.ReleasedTo(lease.Target{RolloutID: "v2"}), 6),
		put(b, 7),
		epoch(1, a.InstanceID, lease.EpochDrained, 8),
		epoch(2, b.InstanceID, lease.EpochServing, 9),
		entry{jetstreamstore.Key, nil, 10, jetstream.KeyValuePurge},  // while B serves: an eviction
		entry{jetstreamstore.Key, nil, 11, jetstream.KeyValueDelete}, // already free: nothing
		put(a, 12),
		epoch(2, b.InstanceID, lease.EpochDrained, 13),
		entry{jetstreamstore.Key, nil, 14, jetstream.KeyValuePurge}, // not under its own epoch: a purge
		entry{jetstreamstore.EpochKey, []byte("junk"), 15, jetstream.KeyValuePut},
		entry{jetstreamstore.EpochKey, nil, 16, jetstream.KeyValueDelete},
	} {
		if err := v.on(e, now); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"current 1 1 serving",
		"draining 3 1 draining",
		"handed-off 6 1 draining",
		"acquired 7 1 draining",
		"drained 7 1 drained",
		"new-epoch 7 2 serving",
		"evicted 10 2 serving",
		"acquired 12 2 serving",
		"drained 12 2 drained",
		"purged 14 2 drained",
		"epoch-bad 14 unreadable",
		"epoch-gone 14 none",
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, l := range lines {
		// EVENT, REVISION and EPOCH (one word, or a number and a state).
		f := strings.Fields(l)
		n := 5
		if f[3] == "unreadable" || f[3] == "none" {
			n = 4
		}
		if got := strings.Join(f[1:n], " "); got != want[i] {
			t.Errorf("line %d %q: got %q, want %q", i, l, got, want[i])
		}
	}
	if !strings.Contains(lines[2], "released to rollout v2 by "+a.InstanceID) {
		t.Errorf("the hand-off line %q does not say to whom and by whom", lines[2])
	}
}

// TestWatchAgeOfALeaseReleasedBeforeItStarted: the first line of a watch that finds the
// lease released counts the age from the release, not from the year 1.
func TestWatchAgeOfALeaseReleasedBeforeItStarted(t *testing.T) {
	var out strings.Builder
	v := &leaseView{out: &out}
	now := entry{}.Created().Add(90 * time.Second)
	for _, e := range []jetstream.KeyValueEntry{entry{jetstreamstore.Key, nil, 5, jetstream.KeyValueDelete}, nil} {
		if err := v.on(e, now); err != nil {
			t.Fatal(err)
		}
	}
	if f := strings.Fields(out.String()); len(f) < 6 || f[1] != "current" || f[4] != "1m30s" || f[5] != "free" {
		t.Fatalf("first line %q: want current, age 1m30s, free", out.String())
	}
}
