package broker

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Leaves is a hub server with leaf nodes connected to it, one account across them all,
// and JetStream on every server in a domain of its own: the topology in which engines
// on different leaf nodes see different JetStream unless they name one domain.
type Leaves struct {
	// Hub is the server the leaf nodes connect to; its JetStream domain is HubDomain.
	Hub *Server
	// Nodes are the leaf nodes; Nodes[i]'s JetStream domain is LeafDomain(i).
	Nodes []*Server
}

// HubDomain is the hub's JetStream domain.
const HubDomain = "hub"

// LeafDomain is the JetStream domain of leaf node i.
func LeafDomain(i int) string { return fmt.Sprintf("leaf%d", i+1) }

// StartLeaves starts a hub and n leaf nodes connected to it, each with JetStream in its
// own domain and its store under dir, and waits until ctx ends for every leaf node to be
// connected to the hub and every server to reach every domain.
func StartLeaves(ctx context.Context, dir string, n int) (*Leaves, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	hub := &Server{opts: &server.Options{
		ServerName:      "hub",
		Host:            "127.0.0.1",
		Port:            -1,
		NoLog:           true,
		NoSigs:          true,
		JetStream:       true,
		JetStreamDomain: HubDomain,
		StoreDir:        filepath.Join(dir, "hub"),
		LeafNode:        server.LeafNodeOpts{Host: "127.0.0.1", Port: ports[0]},
	}}
	if err := hub.Start(); err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	l := &Leaves{Hub: hub}
	remote := &url.URL{Scheme: "nats-leaf", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	for i := range n {
		s := &Server{opts: &server.Options{
			ServerName:      LeafDomain(i),
			Host:            "127.0.0.1",
			Port:            -1,
			NoLog:           true,
			NoSigs:          true,
			JetStream:       true,
			JetStreamDomain: LeafDomain(i),
			StoreDir:        filepath.Join(dir, LeafDomain(i)),
			LeafNode: server.LeafNodeOpts{
				Remotes: []*server.RemoteLeafOpts{{URLs: []*url.URL{remote}}},
			},
		}}
		if err := s.Start(); err != nil {
			l.Stop()
			return nil, fmt.Errorf("leaf node %d: %w", i, err)
		}
		l.Nodes = append(l.Nodes, s)
	}
	if err := l.waitConnected(ctx); err != nil {
		l.Stop()
		return nil, err
	}
	return l, nil
}

// waitConnected waits until the hub has every leaf node and every server reaches
// every other server's JetStream domain: the domains' API subjects cross the hub only
// once their interest has, which a test that uses a domain at once must not race.
func (l *Leaves) waitConnected(ctx context.Context) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if h := l.Hub.Raw(); h != nil && h.NumLeafNodes() == len(l.Nodes) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("leaf nodes not connected to the hub: %w", ctx.Err())
		case <-tick.C:
		}
	}
	servers := append([]*Server{l.Hub}, l.Nodes...)
	for _, from := range servers {
		if err := reachDomains(ctx, from, servers); err != nil {
			return err
		}
	}
	return nil
}

// reachDomains waits until from answers for the JetStream domain of every server.
func reachDomains(ctx context.Context, from *Server, servers []*Server) error {
	nc, err := nats.Connect("", nats.InProcessServer(from.Raw()))
	if err != nil {
		return fmt.Errorf("leaf nodes: connect to %s: %w", from.Name(), err)
	}
	defer nc.Close()
	for _, to := range servers {
		domain := to.opts.JetStreamDomain
		js, err := jetstream.NewWithDomain(nc, domain)
		if err != nil {
			return err
		}
		for {
			c, cancel := context.WithTimeout(ctx, time.Second)
			_, err := js.AccountInfo(c)
			cancel()
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("JetStream domain %s not reached from %s: %w", domain, from.Name(), err)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}

// Stop stops the leaf nodes, then the hub.
func (l *Leaves) Stop() {
	for _, s := range l.Nodes {
		s.Stop()
	}
	l.Hub.Stop()
}
