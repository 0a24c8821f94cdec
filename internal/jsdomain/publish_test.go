package jsdomain

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/broker"
	"github.com/abi-engine/engine/internal/natstest"
)

// Publish answers as nats.go's PublishMsg does, on the server's own acknowledgements
// and refusals: with and without a domain, a duplicate, a refused expectation, a
// subject no stream takes.
func TestPublishAnswersAsPublishMsg(t *testing.T) {
	l := natstest.StartLeaves(t, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, domain := range []string{"", broker.HubDomain} {
		nc := natstest.Connect(t, l.Hub.URL())
		if domain != "" {
			nc = natstest.Connect(t, l.Nodes[0].URL()) // the hub's JetStream from a leaf node
		}
		js, err := New(nc, domain)
		if err != nil {
			t.Fatal(err)
		}
		name := "PUB" + map[string]string{"": "LOCAL", broker.HubDomain: "HUB"}[domain]
		if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name}); err != nil {
			t.Fatal(err)
		}
		msg := func(key string, h nats.Header) *nats.Msg {
			return &nats.Msg{Subject: "$KV." + name + "." + key, Data: []byte("v"), Header: h}
		}
		for i, tc := range []struct {
			name string
			m    func() *nats.Msg
		}{
			{"a plain put", func() *nats.Msg { return msg("a", nil) }},
			{"a duplicate", func() *nats.Msg { return msg("b", nats.Header{jetstream.MsgIDHeader: {"same"}}) }},
			{"a refused expectation", func() *nats.Msg {
				return msg("c", nats.Header{jetstream.ExpectedLastSubjSeqHeader: {"999"}})
			}},
			{"no stream", func() *nats.Msg { return &nats.Msg{Subject: "$KV.NOSUCH.k", Data: []byte("v")} }},
		} {
			if tc.name == "no stream" && domain != "" {
				continue // across a leaf connection nobody answers "no responders": it times out
			}
			theirs, terr := js.PublishMsg(ctx, tc.m())
			ours, oerr := Publish(ctx, js, tc.m())
			if i == 1 { // ours was a duplicate of PublishMsg's; now PublishMsg's is too
				theirs, terr = js.PublishMsg(ctx, tc.m())
			}
			if (terr == nil) != (oerr == nil) || (terr != nil && terr.Error() != oerr.Error()) {
				t.Fatalf("domain %q, %s: error %v, PublishMsg's %v", domain, tc.name, oerr, terr)
			}
			var tAPI, oAPI *jetstream.APIError
			if errors.As(terr, &tAPI) != errors.As(oerr, &oAPI) || (tAPI != nil && tAPI.ErrorCode != oAPI.ErrorCode) {
				t.Fatalf("domain %q, %s: API error %+v, PublishMsg's %+v", domain, tc.name, oAPI, tAPI)
			}
			if errors.Is(terr, jetstream.ErrNoStreamResponse) != errors.Is(oerr, jetstream.ErrNoStreamResponse) {
				t.Fatalf("domain %q, %s: %v against %v", domain, tc.name, oerr, terr)
			}
			if terr != nil {
				continue
			}
			if ours.Stream != theirs.Stream || ours.Domain != theirs.Domain || ours.Duplicate != theirs.Duplicate ||
				(i == 1) != ours.Duplicate || ours.Sequence != theirs.Sequence+map[bool]uint64{true: 0, false: 1}[i == 1] {
				t.Fatalf("domain %q, %s: ack %+v, PublishMsg's %+v", domain, tc.name, ours, theirs)
			}
			if ours.Domain != broker.HubDomain { // the hub's JetStream, from the hub or from a leaf
				t.Errorf("domain %q, %s: the ack names domain %q", domain, tc.name, ours.Domain)
			}
		}
	}
}

// parseAck reads the server's usual acknowledgements, and for any other bytes either
// refuses (leaving them to encoding/json) or reads what encoding/json reads.
func TestParseAckAgreesWithEncodingJSON(t *testing.T) {
	golden := map[string]jetstream.PubAck{
		`{"stream":"KV_ABI_KV","seq":1}`:                                   {Stream: "KV_ABI_KV", Sequence: 1},
		`{"stream":"KV_ABI_KV","domain":"hub","seq":18446744073709551615}`: {Stream: "KV_ABI_KV", Domain: "hub", Sequence: 1<<64 - 1},
	}
	for in, want := range golden {
		got, ok := parseAck([]byte(in))
		if !ok || *got != want {
			t.Errorf("parseAck(%s) = %+v, %v; want %+v", in, got, ok, want)
		}
	}
	for _, in := range []string{
		`{"stream":"S","seq":5,"duplicate": true}`, `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 1"},"stream":"S","seq":0}`,
		`{"stream":"S","seq":}`, `{"stream":"S","seq":-1}`, `{"stream":"S","seq":18446744073709551616}`, `{"stream":"","seq":1}`,
		`{"stream":"S\"x","seq":1}`, `{"stream":"S","seq":1} `, `{"stream":"S","seq":1,"batch":"b","count":2}`, ``, `{`,
	} {
		if got, ok := parseAck([]byte(in)); ok {
			t.Errorf("parseAck(%s) = %+v, want it left to encoding/json", in, got)
		}
	}
	// Random bytes built from the acknowledgement's own pieces.
	pieces := []string{`{"stream":"`, `S`, `"`, `,"domain":"`, `,"seq":`, `12`, `}`, `,`, ` `, `\`, `"error"`, `x`}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b []byte
		for range 1 + rng.IntN(8) {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		got, ok := parseAck(b)
		if !ok {
			continue
		}
		var want jetstream.PubAck
		if err := json.Unmarshal(b, &want); err != nil || *got != want {
			t.Fatalf("parseAck(%s) = %+v; encoding/json reads %+v (%v)", b, got, want, err)
		}
	}
}

// BenchmarkAck reads a stream's usual acknowledgement as Publish does and as nats.go's
// PublishMsg does (encoding/json into its response type).
func BenchmarkAck(b *testing.B) {
	ack := []byte(`{"stream":"KV_ABI_KV","seq":1234567}`)
	b.Run("parseAck", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := parseAck(ack); !ok {
				b.Fatal("not read")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r struct {
				Error *jetstream.APIError `json:"error,omitempty"`
				*jetstream.PubAck
			}
			if err := json.Unmarshal(ack, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
