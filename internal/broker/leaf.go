package broker

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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
// connected to the hub.
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

// waitConnected waits until the hub has every leaf node.
func (l *Leaves) waitConnected(ctx context.Context) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		h := l.Hub.Raw()
		if h != nil && h.NumLeafNodes() == len(l.Nodes) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("leaf nodes not connected to the hub: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// Stop stops the leaf nodes, then the hub.
func (l *Leaves) Stop() {
	for _, s := range l.Nodes {
		s.Stop()
	}
	l.Hub.Stop()
}
