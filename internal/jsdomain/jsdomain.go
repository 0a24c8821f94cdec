// Package jsdomain opens the JetStream an engine keeps its lease and its data in: the
// JetStream of the server it is connected to, or a named JetStream domain
// (nats.jetstream.domain), reached through whichever server of the account the engine
// is connected to: a leaf node, a hub, a node of a cluster.
//
// A domain matters on leaf nodes that run JetStream of their own: each is its own
// domain, and an engine that asks "its" JetStream gets the one of its leaf node, so
// engines on two leaf nodes would each take a lease of their own. Naming one domain
// sends every JetStream API request to $JS.<domain>.API, which the servers route to
// that domain.
//
// nats.go does so for the API and for its own KV writes, but a backend that publishes
// to a bucket's subjects itself (an epoch-checked write, an atomic batch) sends them
// as they are, and a server refuses to carry $KV.> across a leaf connection between
// domains: such a write would reach a bucket of the same name in the local domain, or
// none. So the handle New returns puts $JS.<domain>.API. in front of a $KV. subject on
// every publish (the servers map it back to $KV. in the domain), and Batch does the
// same for an atomic batch, which jetstreamext sends on the connection itself.
// Publish is the publish of the engine's fenced writes: PublishMsg's answers, with
// the acknowledgement read without encoding/json.
// Object store subjects ($O.) have no such mapping and no such refusal: they reach the
// domain's stream by interest, as they are.
package jsdomain

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// kvPrefix is the subject space of the KV buckets, which the servers map from
// $JS.<domain>.API.$KV.> to the domain's streams.
const kvPrefix = "$KV."

// New returns the JetStream of domain through nc; "" is the JetStream of the server nc
// is connected to.
func New(nc *nats.Conn, domain string, opts ...jetstream.JetStreamOpt) (jetstream.JetStream, error) {
	if domain == "" {
		js, err := jetstream.New(nc, opts...)
		if err != nil {
			return nil, err
		}
		return &local{JetStream: js}, nil
	}
	js, err := jetstream.NewWithDomain(nc, domain, opts...)
	if err != nil {
		return nil, fmt.Errorf("jetstream domain %q: %w", domain, err)
	}
	return &inDomain{JetStream: js, prefix: "$JS." + domain + ".API."}, nil
}

// local is the JetStream of the server the connection is on, marked as opened here
// so that Publish may send on its connection itself.
type local struct {
	jetstream.JetStream
}

// inDomain is a JetStream of a named domain whose publishes reach that domain's KV
// buckets.
type inDomain struct {
	jetstream.JetStream
	prefix string
}

func (j *inDomain) subject(s string) string {
	if strings.HasPrefix(s, kvPrefix) {
		return j.prefix + s
	}
	return s
}

// msg is m, or a copy of it with the domain's subject: the caller keeps its message,
// whose subject it may read again.
func (j *inDomain) msg(m *nats.Msg) *nats.Msg {
	s := j.subject(m.Subject)
	if s == m.Subject {
		return m
	}
	return &nats.Msg{Subject: s, Reply: m.Reply, Header: m.Header, Data: m.Data}
}

func (j *inDomain) Publish(ctx context.Context, subject string, payload []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return j.JetStream.Publish(ctx, j.subject(subject), payload, opts...)
}

func (j *inDomain) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return j.JetStream.PublishMsg(ctx, j.msg(m), opts...)
}

func (j *inDomain) PublishAsync(subject string, payload []byte, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	return j.JetStream.PublishAsync(j.subject(subject), payload, opts...)
}

func (j *inDomain) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	return j.JetStream.PublishMsgAsync(j.msg(m), opts...)
}

// Batch sends msgs as one atomic batch (jetstreamext.PublishMsgBatch) in js's domain.
func Batch(ctx context.Context, js jetstream.JetStream, msgs []*nats.Msg, opts ...jetstreamext.PublishMsgBatchOpt) (*jetstreamext.BatchAck, error) {
	if d, ok := js.(*inDomain); ok {
		out := make([]*nats.Msg, len(msgs))
		for i, m := range msgs {
			out[i] = d.msg(m)
		}
		msgs = out
	}
	return jetstreamext.PublishMsgBatch(ctx, js, msgs, opts...)
}
