package objectstorage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/clock"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/primaries/internal/transfertest"
	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/primaries/objectstorage/jetstream"
	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
)

// getRig is the object_storage primary over a JetStream bucket, with an overflow host
// whose budget is small, on a broker whose max payload is 64 KiB: a get_object of an
// object of getObjectBytes has its reply parked.
type getRig struct {
	budget   *sessions.Budget
	overflow *sessions.OverflowHost
	clock    *clock.Fake
	storeNC  *nats.Conn // the backend's connection: what it reads arrives on it
	client   *nats.Conn
}

const (
	getObjectBytes = 300 << 10
	getBudget      = 700 << 10
	getIdle        = time.Minute
)

func newGetRig(t *testing.T, store func(objectstorage.Store) objectstorage.Store) *getRig {
	t.Helper()
	srv := natstest.Start(t, natstest.WithMaxPayload(64<<10))
	r := &getRig{budget: sessions.NewBudget(getBudget, 0), clock: clock.NewFake(time.Unix(1_700_000_000, 0)),
		storeNC: natstest.Connect(t, srv.URL()), client: natstest.Connect(t, srv.URL())}
	j, err := js.New(r.storeNC)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	bucket, err := jetstream.New(ctx, j, jetstream.Config{Bucket: "GETRESERVE", Storage: js.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	if err := bucket.PutObject(ctx, "p", "big", objectContent()); err != nil {
		t.Fatal(err)
	}
	owner := sessions.NewOwnerID()
	r.overflow, err = sessions.NewOverflowHost(natstest.Connect(t, srv.URL()), sessions.OverflowConfig{
		Owner: owner, Budget: r.budget, IdleTimeout: getIdle, Clock: r.clock, LeaseValid: func() bool { return true },
	})
	if err != nil {
		t.Fatal(err)
	}
	e, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	r.overflow.Spawn(e)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := r.overflow.Close(ctx); err != nil {
			t.Errorf("close the overflow host: %v", err)
		}
	})
	if err := r.overflow.Serve(ctx); err != nil {
		t.Fatal(err)
	}
	var served objectstorage.Store = bucket
	if store != nil {
		served = store(bucket)
	}
	servePrimary(t, srv, served, owner, func(c *primaries.Config) { c.Overflow = r.overflow })
	return r
}

func objectContent() []byte {
	return bytes.Repeat([]byte("0123456789abcdef"), getObjectBytes/16)
}

// get calls get_object for p/big asking for a parked reply; it returns the notice's
// parked reply id, or the error.
func (r *getRig) get(t *testing.T) (string, error) {
	t.Helper()
	m, err := transfertest.Call(r.client, protocol.ServiceSubject(protocol.ObjectStorage, protocol.OpGetObject),
		nats.Header{protocol.HeaderOverflow: {"1"}}, protocol.ObjectRequest{Prefix: "p", Key: "big"}, nil)
	if err != nil {
		return "", err
	}
	var env protocol.OverflowEnvelope
	if err := json.Unmarshal(m.Data, &env); err != nil || env.Overflow == nil {
		t.Fatalf("get_object of a %d-byte object: the reply of %d bytes is not a parked reply's notice", getObjectBytes, len(m.Data))
	}
	return env.Overflow.ID, nil
}

// fetch reads parked reply id and closes it, as a client consumes it.
func (r *getRig) fetch(t *testing.T, id string) {
	t.Helper()
	c := transfertest.Client{NC: r.client, Prefix: protocol.OverflowPrefix}
	body, err := c.ReadAll(id)
	if err != nil {
		t.Fatal(err)
	}
	var rep protocol.GetObjectReply
	if err := json.Unmarshal(body, &rep); err != nil || !bytes.Equal(rep.Content, objectContent()) {
		t.Fatalf("the parked reply is not the object (%d bytes, %v)", len(body), err)
	}
	if err := c.Close(id); err != nil {
		t.Fatal(err)
	}
}

// inBytes is what the backend's connection has received so far.
func (r *getRig) inBytes() uint64 { return r.storeNC.Stats().InBytes }

// waitBudget waits until the budget holds want bytes.
func (r *getRig) waitBudget(t *testing.T, what string, want int64) {
	t.Helper()
	testwait.For(t, callTimeout, what, func() bool { return r.budget.Used() == want })
}

// A get_object whose reply will be parked reserves its reply's buffer, which the object
// is read into, before the backend reads a byte: one that does not fit the budget's
// free part is
// refused RESOURCE_EXHAUSTED, retryable, naming the object, its size and the budget,
// having read nothing; and what a parked reply holds goes back to the budget once its
// caller has read it, or once it expired unread. Before, the object was read and its
// reply parked whatever the budget held (16 × 3 get_object calls of a 40 MiB object
// peaked at 454 MiB against a bound of 448).
func TestGetObjectReservesBeforeItReads(t *testing.T) {
	r := newGetRig(t, nil)
	reply := int64(len(protocol.GetObjectReply{Content: objectContent()}.AppendJSON(nil)))

	first, err := r.get(t)
	if err != nil {
		t.Fatalf("the first get_object: %v", err)
	}
	if got := r.budget.Used(); got != reply {
		t.Fatalf("a parked reply of %d bytes holds %d bytes of the budget; want exactly its size (what its read held beyond it goes back)", reply, got)
	}

	// A second reply (400 KiB, the object read into its buffer) beside the parked one
	// would pass the budget of 700 KiB.
	before := r.inBytes()
	_, err = r.get(t)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.ResourceExhausted || !pe.Retryable {
		t.Fatalf("a get_object beyond the budget: %v; want RESOURCE_EXHAUSTED, retryable", err)
	}
	for _, want := range []string{`"big"`, `"p"`, "307200 bytes", "716800", "read nothing"} {
		if !strings.Contains(pe.Message, want) {
			t.Errorf("the refusal %q does not name %s", pe.Message, want)
		}
	}
	if read := r.inBytes() - before; read >= getObjectBytes {
		t.Errorf("the refused get_object had the backend receive %d bytes: it read the object", read)
	}
	if got := r.budget.Used(); got != reply {
		t.Fatalf("after the refusal the budget holds %d bytes; want the parked reply's %d", got, reply)
	}

	r.fetch(t, first)
	r.waitBudget(t, "the budget back to 0 once the parked reply was read and closed", 0)

	// Parked and never read: it expires and gives its bytes back.
	if _, err := r.get(t); err != nil {
		t.Fatalf("a get_object with the budget free: %v", err)
	}
	if got := r.budget.Used(); got != reply {
		t.Fatalf("a parked reply holds %d bytes; want %d", got, reply)
	}
	r.clock.Advance(getIdle + time.Second) // the reaper looks every second of the clock's
	r.waitBudget(t, "the budget back to 0 once the unread parked reply expired", 0)
	if n := r.overflow.Sessions(); n != 0 {
		t.Fatalf("%d parked replies left after the idle timeout", n)
	}
}

// failingStore asks for its buffer, as a backend does once it knows the size, then
// fails the read.
type failingStore struct{ objectstorage.Store }

func (s failingStore) GetObject(ctx context.Context, prefix, key string) ([]byte, error) {
	if _, err := objectstorage.ReadBuffer(ctx, prefix, key, getObjectBytes); err != nil {
		return nil, err
	}
	return nil, protocol.Refused("the backend failed the read")
}

// A read that fails after its reservation gives back exactly what it reserved.
func TestGetObjectReleasesItsReservationWhenTheReadFails(t *testing.T) {
	r := newGetRig(t, func(s objectstorage.Store) objectstorage.Store { return failingStore{s} })
	_, err := r.get(t)
	if protocol.CodeOf(err) != protocol.Unavailable {
		t.Fatalf("get_object: %v; want the backend's UNAVAILABLE", err)
	}
	r.waitBudget(t, "the budget back to 0 after the failed read", 0)
}

// A get_object whose reply could never be parked is refused PAYLOAD_TOO_LARGE having
// read nothing: without Abi-Overflow: 1 (the reply could not be sent), or when what it
// holds is above a client's share of the budget (the SDK then reads it by transfer).
func TestGetObjectThatCanNeverFitReadsNothing(t *testing.T) {
	r := newGetRig(t, nil)
	before := r.inBytes()
	_, err := transfertest.Call(r.client, protocol.ServiceSubject(protocol.ObjectStorage, protocol.OpGetObject),
		nil, protocol.ObjectRequest{Prefix: "p", Key: "big"}, nil)
	if protocol.CodeOf(err) != protocol.PayloadTooLarge || !strings.Contains(err.Error(), "read nothing") {
		t.Fatalf("get_object without %s: %v; want PAYLOAD_TOO_LARGE having read nothing", protocol.HeaderOverflow, err)
	}
	if read := r.inBytes() - before; read >= getObjectBytes {
		t.Errorf("the refused get_object had the backend receive %d bytes: it read the object", read)
	}
	if got := r.budget.Used(); got != 0 {
		t.Fatalf("after the refusal the budget holds %d bytes", got)
	}
}

// A parked reply left unread when the engine stops serving gives its bytes back.
func TestGetObjectParkedReplyIsReleasedWhenTheHostStops(t *testing.T) {
	r := newGetRig(t, nil)
	if _, err := r.get(t); err != nil {
		t.Fatal(err)
	}
	if r.budget.Used() == 0 {
		t.Fatal("a parked reply holds nothing of the budget")
	}
	r.overflow.Stop()
	r.waitBudget(t, "the budget back to 0 once the host stopped", 0)
}

// A get_object whose reply could not be parked because the overflow host does not
// serve is refused before its read, retryable.
func TestGetObjectWithoutAServingOverflowHostReadsNothing(t *testing.T) {
	r := newGetRig(t, nil)
	r.overflow.Stop()
	before := r.inBytes()
	_, err := r.get(t)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.Unavailable || !pe.Retryable || !strings.Contains(pe.Message, "read nothing") {
		t.Fatalf("get_object with the overflow host stopped: %v; want UNAVAILABLE, retryable, having read nothing", err)
	}
	if read := r.inBytes() - before; read >= getObjectBytes {
		t.Errorf("the refused get_object had the backend receive %d bytes: it read the object", read)
	}
	if got := r.budget.Used(); got != 0 {
		t.Fatalf("after the refusal the budget holds %d bytes", got)
	}
}
