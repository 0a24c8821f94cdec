package discovery

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
	"github.com/abi-engine/engine/protocol"
)

// TestAStopBehindAServeIsNotFoldedIntoTheStopBeforeIt: a fence, a restore and a fence
// again while the first fence's stop still waits for a call: Stop, Serve, Stop. The
// second Stop came after the Serve, so it stops what that Serve subscribes; it must
// not be answered with the first stop's end, which would leave the member serving
// behind a Down.
func TestAStopBehindAServeIsNotFoldedIntoTheStopBeforeIt(t *testing.T) {
	srv := natstest.Start(t)
	store := &heldReads{release: make(chan struct{})}
	e := startEngineOn(t, srv.URL(), "flap", 20*time.Second, store)
	others := e.nc.NumSubscriptions() - len(Operations) // the connection's request inbox
	nc := natstest.Connect(t, srv.URL())
	answered := make(chan error, 1)
	go func() {
		msg := nats.NewMsg(Subject("flap", OpGetModule))
		msg.Data, _ = proto.Marshal(&pb.GetModuleRequest{ModuleId: "m", ContractMajor: 1})
		msg.Header.Set(protocol.HeaderAuthToken, mint(t, "svc"))
		_, err := nc.RequestMsg(msg, 20*time.Second)
		answered <- err
	}()
	testwait.For(t, 10*time.Second, "a lookup running", func() bool { return store.waiting.Load() == 1 })

	e.tell(actors.Stop{})
	testwait.For(t, 10*time.Second, "the first stop to end the subscriptions", func() bool { return e.nc.NumSubscriptions() == others })
	e.tell(actors.Serve{Epoch: 1})
	e.tell(actors.Stop{})
	close(store.release)
	if err := testwait.Recv(t, answered, 10*time.Second, "the lookup's answer"); err != nil {
		t.Fatal(err)
	}

	var got []string
	for range 3 {
		switch m := testwait.Recv(t, e.inbox, 10*time.Second, "a reply").(type) {
		case actors.Down:
			got = append(got, "Down")
		case actors.Accepting:
			got = append(got, fmt.Sprintf("Accepting{%v}", m.On))
		default:
			got = append(got, fmt.Sprintf("%T", m))
		}
	}
	if fmt.Sprint(got) != "[Down Accepting{true} Down]" {
		t.Fatalf("replies %v, want [Down Accepting{true} Down]: each command answered in the order received", got)
	}
	if n := e.nc.NumSubscriptions() - others; n != 0 {
		t.Fatalf("%d subscriptions after the last Stop was answered: the member serves behind a Down", n)
	}
}

// TestCloseEndsWhatAServeSubscribedAfterItsActorStopped: the actor poisoned while its
// Serve's subscribe step runs never hears of what the step subscribed (its report goes
// to a stopped actor); Close, which ends what the member still serves, must end those
// subscriptions too, not leave them taking calls for an engine that has stopped.
func TestCloseEndsWhatAServeSubscribedAfterItsActorStopped(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	svc, err := New(&memoryStore{}, Config{Lease: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMember(MemberConfig{Conn: nc, Project: "gone", Service: svc, MaxConcurrent: 4})
	if err != nil {
		t.Fatal(err)
	}
	sys, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	before := nc.NumSubscriptions()
	pid := m.Spawn(sys)
	sys.Send(pid, actors.Serve{Epoch: 1})
	<-sys.Poison(pid).Done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := nc.NumSubscriptions() - before; n != 0 {
		t.Fatalf("%d subscriptions of the member's after its Close", n)
	}
}
