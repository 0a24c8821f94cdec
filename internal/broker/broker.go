// Package broker runs nats-servers in-process: one JetStream server, a 3-node
// JetStream cluster, or a hub with leaf nodes each running JetStream in a domain of its
// own (leaf.go), on 127.0.0.1 with random client ports and their stores under a
// directory the caller owns. A server can be stopped and started again on the same port
// and store, which is how tests and chaos scenarios restart the broker or kill a
// cluster node.
//
// It needs no testing.TB, so `abi-engine chaos` runs scenarios outside `go test`;
// internal/natstest wraps it for tests.
package broker

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// readyTimeout bounds how long a server may take to accept connections.
const readyTimeout = 10 * time.Second

// Server is one in-process nats-server.
type Server struct {
	mu   sync.Mutex
	opts *server.Options // template; every start gets a clone
	srv  *server.Server
}

// Option adjusts a server's options before it first starts.
type Option func(*server.Options)

// WithMaxPayload sets the largest message the server accepts.
func WithMaxPayload(n int32) Option { return func(o *server.Options) { o.MaxPayload = n } }

// WithoutJetStream starts a core-only server.
func WithoutJetStream() Option { return func(o *server.Options) { o.JetStream = false } }

// Start starts a JetStream server on 127.0.0.1 with a random client port and its store
// in dir.
func Start(dir string, opts ...Option) (*Server, error) {
	o := &server.Options{
		ServerName: "abi-broker",
		Host:       "127.0.0.1",
		Port:       -1,
		NoLog:      true,
		NoSigs:     true,
		JetStream:  true,
		StoreDir:   dir,
	}
	for _, opt := range opts {
		opt(o)
	}
	s := &Server{opts: o}
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// Start starts a stopped server again on its port and store; it does nothing to a
// running one.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return nil
	}
	// NewServer keeps and mutates the options it is given.
	srv, err := server.NewServer(s.opts.Clone())
	if err != nil {
		return fmt.Errorf("broker %s: %w", s.opts.ServerName, err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fmt.Errorf("broker %s did not accept connections within %s", s.opts.ServerName, readyTimeout)
	}
	if s.opts.Port <= 0 {
		s.opts.Port = srv.Addr().(*net.TCPAddr).Port
	}
	s.srv = srv
	return nil
}

// Stop shuts the server down and waits until it released its port and store. Stopping
// a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.srv = nil
}

// Restart stops the server and starts it again on the same port and store.
func (s *Server) Restart() error {
	s.Stop()
	return s.Start()
}

// Running reports whether the server is up.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv != nil
}

// URL is the client URL, stable across restarts.
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.opts.Port) }

// Port is the client port, stable across restarts.
func (s *Server) Port() int { return s.opts.Port }

// Addr is host:port of the client listener, stable across restarts.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.opts.Port) }

// Name is the server's name.
func (s *Server) Name() string { return s.opts.ServerName }

// Raw is the running nats-server, nil while stopped.
func (s *Server) Raw() *server.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv
}

// Cluster is a 3-node JetStream cluster in this process.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts a 3-node JetStream cluster with each node's store under dir and
// waits until ctx ends for it to be ready (WaitReady) and able to place a 3-replica
// stream.
func StartCluster(ctx context.Context, dir string) (*Cluster, error) {
	const n = 3
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	routes := make([]string, n)
	for i, p := range ports {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	c := &Cluster{}
	for i := range n {
		s := &Server{opts: &server.Options{
			ServerName: fmt.Sprintf("n%d", i),
			Host:       "127.0.0.1",
			Port:       -1,
			NoLog:      true,
			NoSigs:     true,
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("n%d", i)),
			Cluster:    server.ClusterOpts{Name: "abi-broker", Host: "127.0.0.1", Port: ports[i]},
			Routes:     server.RoutesFromStr(strings.Join(routes, ",")),
		}}
		if err := s.Start(); err != nil {
			c.Stop()
			return nil, fmt.Errorf("cluster node %d: %w", i, err)
		}
		c.Nodes = append(c.Nodes, s)
	}
	if err := c.WaitReady(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.waitPlaceable(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// probeStream is the replicated stream StartCluster creates and deletes to learn that
// the cluster can place one.
const probeStream = "ABI_BROKER_PROBE"

// waitPlaceable waits until the cluster can place a 3-replica stream. A fresh cluster
// reports a healthy meta leader before that leader has heard every peer's first
// statistics, and until it has, it refuses placement with "no suitable peers for
// placement, peer offline" (nats-server selectPeerGroup): a test or scenario that
// creates an R3 bucket right away would fail on a cluster that is only slow to settle.
func (c *Cluster) waitPlaceable(ctx context.Context) error {
	nc, err := nats.Connect("", nats.InProcessServer(c.Nodes[0].Raw()))
	if err != nil {
		return fmt.Errorf("cluster probe: connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("cluster probe: %w", err)
	}
	cfg := jetstream.StreamConfig{Name: probeStream, Subjects: []string{"$ABI.broker.probe"},
		Replicas: 3, Storage: jetstream.MemoryStorage}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := js.CreateStream(ctx, cfg)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster cannot place a replicated stream: %w", err)
		case <-tick.C:
		}
	}
	if err := js.DeleteStream(ctx, probeStream); err != nil {
		return fmt.Errorf("cluster probe: delete %s: %w", probeStream, err)
	}
	return nil
}

// freePorts picks ports for the cluster routes, which must be known before any node
// starts.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a route port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Stop stops every node.
func (c *Cluster) Stop() {
	for _, s := range c.Nodes {
		s.Stop()
	}
}

// URLs is the comma-separated client URL list of every node, running or not.
func (c *Cluster) URLs() string {
	urls := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}

// WaitReady waits until every running node is routed to the others and reports healthy
// JetStream with a meta leader, or ctx ends. A meta leader election takes 0.3-11 s
// (raft timeouts that cannot be configured).
func (c *Cluster) WaitReady(ctx context.Context) error {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		if c.ready() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not ready: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

func (c *Cluster) ready() bool {
	var running []*server.Server
	for _, s := range c.Nodes {
		if r := s.Raw(); r != nil {
			running = append(running, r)
		}
	}
	for _, r := range running {
		if r.NumRoutes() < len(running)-1 {
			return false
		}
		if h := r.Healthz(&server.HealthzOptions{JSMetaOnly: true}); h.Status != "ok" {
			return false
		}
	}
	return true
}

// StreamLeader is the index of the node that leads stream (in the global account), or
// -1 when no running node does.
func (c *Cluster) StreamLeader(stream string) int {
	for i, s := range c.Nodes {
		if r := s.Raw(); r != nil && r.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// StreamCurrent reports whether every running node has caught up on stream: after a
// node restarts, its replica must catch up before another node may be lost safely.
func (c *Cluster) StreamCurrent(stream string) bool {
	leader := false
	for _, s := range c.Nodes {
		r := s.Raw()
		if r == nil {
			continue
		}
		if !r.JetStreamIsStreamCurrent(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return false
		}
		if r.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			leader = true
		}
	}
	return leader
}
