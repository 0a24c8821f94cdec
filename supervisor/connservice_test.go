package supervisor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/nats-io/nats.go"
	"github.com/thejerf/suture/v4"
)

// TestConnIsOwnedByItsTree: a connection held by a Conn service is flushed and closed
// when its tree removes it (what it published arrives), and a connection closed from
// elsewhere ends its service for good, which has nothing to restart.
func TestConnIsOwnedByItsTree(t *testing.T) {
	srv := natstest.Start(t)
	watcher := natstest.Connect(t, srv.URL())
	sub, err := watcher.SubscribeSync("last.words")
	if err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	tree := suture.NewSimple("test")
	ctx, cancel := context.WithCancel(context.Background())
	done := tree.ServeBackground(ctx)
	defer func() {
		cancel()
		<-done
	}()
	tok := tree.Add(NewConn("service", nc, time.Second))
	if err := nc.Publish("last.words", []byte("bye")); err != nil {
		t.Fatal(err)
	}
	if err := tree.RemoveAndWait(tok, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if !nc.IsClosed() {
		t.Fatal("the connection is open after its service was removed")
	}
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("what was published before the close did not arrive: %v", err)
	}

	other, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	svc := NewConn("lease", other, 0)
	errc := make(chan error, 1)
	go func() { errc <- svc.Serve(context.Background()) }()
	other.Close()
	if err := testwait.Recv(t, errc, 10*time.Second, "Serve returns once its connection is closed"); !errors.Is(err, suture.ErrDoNotRestart) {
		t.Fatalf("Serve = %v, want suture.ErrDoNotRestart", err)
	}
}
