// Package natstest starts real nats-server instances in-process for tests: a single
// JetStream server on a random port with its store in a temporary directory, restarts on
// the same port and store, and a 3-node JetStream cluster.
//
// Every server is stopped by the test's cleanup, so a test that forgets to stop one
// leaks neither goroutines nor files.
package natstest

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// readyTimeout bounds how long a server may take to accept connections. A cluster's
// JetStream meta leader election is slower (raft timeouts of 4-9 s that cannot be
// configured) and has its own, larger bound.
const (
	readyTimeout   = 10 * time.Second
	clusterTimeout = 45 * time.Second
)

// Option adjusts the options of a server before it starts.
type Option func(*server.Options)

// WithMaxPayload sets the largest message the server accepts.
func WithMaxPayload(n int32) Option { return func(o *server.Options) { o.MaxPayload = n } }

// WithoutJetStream starts a core-only server.
func WithoutJetStream() Option { return func(o *server.Options) { o.JetStream = false } }

// Server is one in-process nats-server. It can be stopped and restarted on the same port
// and store directory, which is how tests make a broker "go away" and "come back".
type Server struct {
	t    testing.TB
	opts *server.Options // template, never handed to NewServer itself
	srv  *server.Server
}

// Start starts a JetStream server on 127.0.0.1 with a random port and a temporary store,
// and registers its shutdown with t.Cleanup.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	o := &server.Options{
		ServerName: "natstest",
		Host:       "127.0.0.1",
		Port:       -1,
		NoLog:      true,
		NoSigs:     true,
		JetStream:  true,
		StoreDir:   t.TempDir(),
	}
	for _, opt := range opts {
		opt(o)
	}
	s := &Server{t: t, opts: o}
	if err := s.start(); err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start() error {
	// NewServer keeps and mutates the options it is given, so every start gets a clone.
	srv, err := server.NewServer(s.opts.Clone())
	if err != nil {
		return fmt.Errorf("new server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fmt.Errorf("server %s did not accept connections within %s", s.opts.ServerName, readyTimeout)
	}
	// Remember the resolved port so a restart comes back where clients reconnect.
	if s.opts.Port <= 0 {
		s.opts.Port = srv.Addr().(*net.TCPAddr).Port
	}
	s.srv = srv
	return nil
}

// URL is the client URL, stable across restarts.
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.opts.Port) }

// Port is the client port, stable across restarts.
func (s *Server) Port() int { return s.opts.Port }

// Name is the server's name (unique within a cluster).
func (s *Server) Name() string { return s.opts.ServerName }

// Raw is the running nats-server, nil while stopped.
func (s *Server) Raw() *server.Server { return s.srv }

// Running reports whether the server is up.
func (s *Server) Running() bool { return s.srv != nil }

// Stop shuts the server down and waits until it has released its port and store.
// Stopping a stopped server does nothing.
func (s *Server) Stop() {
	if s.srv == nil {
		return
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.srv = nil
}

// Restart stops the server if it runs and starts it again on the same port and store.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
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
	t     testing.TB
	Nodes []*Server
}

// StartCluster starts a 3-node JetStream cluster and waits until it has a meta leader.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	const n = 3
	ports := freePorts(t, n)
	routes := make([]string, n)
	for i, p := range ports {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	c := &Cluster{t: t}
	for i := range n {
		o := &server.Options{
			ServerName: fmt.Sprintf("n%d", i),
			Host:       "127.0.0.1",
			Port:       -1,
			NoLog:      true,
			NoSigs:     true,
			JetStream:  true,
			StoreDir:   t.TempDir(),
			Cluster: server.ClusterOpts{
				Name: "natstest",
				Host: "127.0.0.1",
				Port: ports[i],
			},
			Routes: server.RoutesFromStr(strings.Join(routes, ",")),
		}
		s := &Server{t: t, opts: o}
		if err := s.start(); err != nil {
			c.stop()
			t.Fatalf("natstest: cluster node %d: %v", i, err)
		}
		c.Nodes = append(c.Nodes, s)
	}
	t.Cleanup(c.stop)
	c.WaitReady()
	return c
}

// freePorts picks ports for the cluster routes: the route list must be known before
// any node starts, so these cannot be -1.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("natstest: pick a port: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

func (c *Cluster) stop() {
	for _, s := range c.Nodes {
		s.Stop()
	}
}

// URLs is a comma-separated client URL list of every node, running or not.
func (c *Cluster) URLs() string {
	urls := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}

// WaitReady waits until every running node is routed to the others and reports healthy
// JetStream with a meta leader.
func (c *Cluster) WaitReady() {
	c.t.Helper()
	running := 0
	for _, s := range c.Nodes {
		if s.Running() {
			running++
		}
	}
	deadline := time.Now().Add(clusterTimeout)
	for {
		ok := true
		for _, s := range c.Nodes {
			if !s.Running() {
				continue
			}
			if s.srv.NumRoutes() < running-1 {
				ok = false
				break
			}
			if h := s.srv.Healthz(&server.HealthzOptions{JSMetaOnly: true}); h.Status != "ok" {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("natstest: cluster not ready within %s", clusterTimeout)
		}
		time.Sleep(25 * time.Millisecond) // polling a server we do not own; no event to wait on
	}
}

// StreamLeader is the index of the node that leads the stream in the global account,
// or -1 when no running node leads it.
func (c *Cluster) StreamLeader(stream string) int {
	for i, s := range c.Nodes {
		if s.Running() && s.srv.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}
