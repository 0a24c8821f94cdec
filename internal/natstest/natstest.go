// Package natstest starts real nats-servers in-process for tests: a single JetStream
// server on a random port with its store in a temporary directory, restarts on the same
// port and store, a 3-node JetStream cluster, and a hub with JetStream leaf nodes in
// domains of their own. It wraps internal/broker with the
// test's cleanup and failures.
//
// Every server is stopped by the test's cleanup, so a test that forgets to stop one
// leaks neither goroutines nor files.
package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/broker"
	"github.com/nats-io/nats.go"
)

// clusterTimeout bounds a cluster's JetStream meta leader election (raft timeouts of
// 4-9 s that cannot be configured).
const clusterTimeout = 45 * time.Second

// Option adjusts the options of a server before it starts.
type Option = broker.Option

// WithMaxPayload sets the largest message the server accepts.
func WithMaxPayload(n int32) Option { return broker.WithMaxPayload(n) }

// WithoutJetStream starts a core-only server.
func WithoutJetStream() Option { return broker.WithoutJetStream() }

// Server is one in-process nats-server. It can be stopped and restarted on the same port
// and store directory, which is how tests make a broker "go away" and "come back".
type Server struct {
	*broker.Server
	t testing.TB
}

// Start starts a JetStream server on 127.0.0.1 with a random port and a temporary store,
// and registers its shutdown with t.Cleanup.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := broker.Start(t.TempDir(), opts...)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(s.Stop)
	return &Server{Server: s, t: t}
}

// Restart stops the server if it runs and starts it again on the same port and store.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.Server.Restart(); err != nil {
		s.t.Fatalf("natstest: restart: %v", err)
	}
}

// Connect opens a client connection that reconnects forever (a test decides when the
// broker is gone, not the client) and is closed by the test's cleanup.
func Connect(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	base := []nats.Option{
		nats.MaxReconnects(-1),
		nats.ReconnectWait(20 * time.Millisecond),
		nats.ReconnectJitter(0, 0),
		nats.Timeout(2 * time.Second),
	}
	nc, err := nats.Connect(url, append(base, opts...)...)
	if err != nil {
		t.Fatalf("natstest: connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Cluster is a 3-node JetStream cluster in this process.
type Cluster struct {
	*broker.Cluster
	t     testing.TB
	Nodes []*Server
}

// StartCluster starts a 3-node JetStream cluster and waits until it has a meta leader.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	bc, err := broker.StartCluster(ctx, t.TempDir())
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(bc.Stop)
	c := &Cluster{Cluster: bc, t: t}
	for _, n := range bc.Nodes {
		c.Nodes = append(c.Nodes, &Server{Server: n, t: t})
	}
	return c
}

// WaitReady waits until every running node is routed to the others and reports healthy
// JetStream with a meta leader.
func (c *Cluster) WaitReady() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	if err := c.Cluster.WaitReady(ctx); err != nil {
		c.t.Fatalf("natstest: %v", err)
	}
}

// Leaves is a hub with leaf nodes, each server with JetStream in a domain of its own
// (broker.HubDomain, broker.LeafDomain(i)), one account across them.
type Leaves struct {
	*broker.Leaves
	Hub   *Server
	Nodes []*Server
}

// StartLeaves starts a hub and n leaf nodes connected to it, and waits until every
// leaf node is connected.
func StartLeaves(t testing.TB, n int) *Leaves {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	bl, err := broker.StartLeaves(ctx, t.TempDir(), n)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(bl.Stop)
	l := &Leaves{Leaves: bl, Hub: &Server{Server: bl.Hub, t: t}}
	for _, s := range bl.Nodes {
		l.Nodes = append(l.Nodes, &Server{Server: s, t: t})
	}
	return l
}
