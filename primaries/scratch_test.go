package primaries

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/abi-engine/engine/protocol"
)

// The scratch is lent to one reply at a time, and given back by reclaim, or at once
// when the reply outgrew it; keep copies a reply out of it.
func TestReplyScratchLendsOneReplyAtATime(t *testing.T) {
	s := new(replyScratch)
	small := protocol.KVGetReply{Found: true, Value: []byte("v")}
	first := s.appendReply(&small)
	if !s.holds(first) {
		t.Fatal("a free scratch was not lent")
	}
	second := s.appendReply(&small)
	if s.holds(second) || string(second) != string(first) {
		t.Fatalf("a lent scratch was lent again, or the second reply %q differs from %q", second, first)
	}
	s.reclaim(second) // not the scratch's: the loan of first goes on
	if s.holds(s.appendReply(&small)) {
		t.Fatal("reclaiming another reply gave the scratch back")
	}
	kept := s.keep(first)
	if s.holds(kept) || string(kept) != `{"found":true,"value":"dg=="}` {
		t.Fatalf("keep returned %q, in the scratch: %v", kept, s.holds(kept))
	}
	big := protocol.KVGetReply{Found: true, Value: make([]byte, replySize)}
	if out := s.appendReply(&big); s.holds(out) || len(out) <= replySize {
		t.Fatalf("a reply of %d bytes is in the scratch of %d", len(out), replySize)
	}
	if !s.holds(s.appendReply(&small)) {
		t.Fatal("a reply that outgrew the scratch kept it lent")
	}
	var none *replyScratch
	if out := none.appendReply(&small); string(out) != string(first) || none.holds(out) {
		t.Fatalf("no scratch: %q", out)
	}
}

// An inline call of a Handle operation allocates its frame and its strings; its reply,
// context member and deadline live in the frame and the endpoint's scratch.
func TestInlineCallAllocations(t *testing.T) {
	value := []byte("a value of some thirty-two bytes")
	op := Handle(func(_ context.Context, r *protocol.KVKeyRequest) (protocol.KVGetReply, error) {
		return protocol.KVGetReply{Found: true, Value: value[:len(r.Key)]}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := new(replyScratch)
	var ic context.Context = inlineCtx{Context: ctx, scratch: s} // as the endpoint holds it
	body := []byte(`{"context":{"timeout_ms":10000},"key":"bench-key"}`)
	n := testing.AllocsPerRun(200, func() {
		out, err := op(ic, body)
		if err != nil || !s.holds(out) {
			t.Fatalf("%q, %v: not in the scratch", out, err)
		}
		s.reclaim(out)
	})
	if n > 1 { // the key; the frame is reused
		t.Errorf("%v allocations per inline call, want at most 1", n)
	}
}

// A reply that appends itself, and stops half way (holding its endpoint's scratch)
// while hold is open for it.
type heldRep struct {
	ID   string
	hold chan struct{} // nil: not held
	lent chan<- string // told once the reply holds the scratch
}

func (r *heldRep) AppendJSON(b []byte) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, r.ID...)
	if r.hold != nil {
		r.lent <- r.ID
		<-r.hold
	}
	return append(b, `"}`...)
}

// Two calls of one inline endpoint at once: the first holds the scratch while it
// appends its reply (served from the backlog on a worker), the second is served from
// the backlog on another worker meanwhile, so it must take a buffer of its own. Each
// reply arrives whole and as its own.
func TestInlineCallsShareNoScratch(t *testing.T) {
	srv := natstest.Start(t)
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	blockers := map[string]chan struct{}{"y": make(chan struct{}), "z": make(chan struct{})}
	started := make(chan string, 4)
	hold, lent := make(chan struct{}), make(chan string, 2)
	svc := Service{Name: "test_svc", Inline: true, Operations: map[string]Operation{}}
	for name, gate := range blockers {
		svc.Operations[name] = Handle(func(_ context.Context, r *workReq) (workRep, error) {
			started <- name
			<-gate
			return workRep{ID: r.ID}, nil
		})
	}
	svc.Operations["x"] = Handle(func(_ context.Context, r *workReq) (heldRep, error) {
		rep := heldRep{ID: r.ID + strings.Repeat("-", 40)}
		if r.ID == "first" {
			rep.hold, rep.lent = hold, lent
		}
		return rep, nil
	})
	p := newPrimary(t, nc, svc, "engine-a", 2, alwaysValid)
	serve(t, p)

	y, z := callAsync(client, "y", "y"), callAsync(client, "z", "z")
	recv(t, started, "a blocker to start")
	recv(t, started, "the other blocker to start")
	first := callAsync(client, "x", "first")
	testwait.For(t, waitTimeout, "the first x call in the backlog", func() bool { return p.InFlight() == 3 })
	close(blockers["z"]) // its slot goes to the first x call, on a worker
	if r := recv(t, z, "z's reply"); r.err != nil || r.werr != nil {
		t.Fatalf("z: %+v", r)
	}
	recv(t, lent, "the first x call to hold the scratch")
	second := callAsync(client, "x", "second")
	testwait.For(t, waitTimeout, "the second x call in the backlog", func() bool { return p.InFlight() == 3 })
	close(blockers["y"]) // its slot goes to the second x call
	for _, c := range []struct {
		id string
		ch <-chan result
	}{{"y", y}, {"second", second}} {
		r := recv(t, c.ch, c.id+"'s reply")
		if r.err != nil || r.werr != nil || (c.id == "second" && r.rep.ID != "second"+strings.Repeat("-", 40)) {
			t.Fatalf("%s: %+v (%q)", c.id, r, r.msg.Data)
		}
	}
	close(hold)
	if r := recv(t, first, "the first x call's reply"); r.err != nil || r.werr != nil || r.rep.ID != "first"+strings.Repeat("-", 40) {
		t.Fatalf("first: %+v (%q)", r, r.msg.Data)
	}
}

// Inline replies of every size, some larger than the scratch, from many callers
// across three endpoints under a limit of two slots, each arrive whole and as their
// own.
func TestInlineRepliesOfEverySize(t *testing.T) {
	srv := natstest.Start(t)
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	svc := Service{Name: "test_svc", Inline: true, Operations: map[string]Operation{}}
	names := []string{"alpha", "beta", "gamma"}
	for _, name := range names {
		svc.Operations[name] = Handle(func(_ context.Context, r *workReq) (workRep, error) {
			n, _ := strconv.Atoi(r.ID[strings.LastIndexByte(r.ID, '-')+1:])
			return workRep{ID: r.ID, By: strings.Repeat(name[:1], n%(2*replySize))}, nil
		})
	}
	p := newPrimary(t, nc, svc, "engine-a", 2, alwaysValid)
	serve(t, p)

	const callers, each = 8, 100
	var wg sync.WaitGroup
	errs := make(chan error, callers*each)
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				name := names[(c+i)%len(names)]
				n := c*each + i
				id := fmt.Sprintf("c%d-%d", c, n)
				r := call(client, name, id, waitTimeout)
				switch want := strings.Repeat(name[:1], n%(2*replySize)); {
				case r.err != nil || r.werr != nil:
					errs <- fmt.Errorf("%s %s: %v %v", name, id, r.err, r.werr)
				case r.rep.ID != id || r.rep.By != want:
					errs <- fmt.Errorf("%s %s: got reply %q (by %d bytes), want by %d bytes", name, id, r.rep.ID, len(r.rep.By), len(want))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
