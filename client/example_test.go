package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/protocol"
)

func Example() {
	url, stop := startEngine()
	defer stop()
	nc, err := nats.Connect(url)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()

	t, err := client.NewTransport(nc)
	if err != nil {
		log.Fatal(err)
	}
	kv := client.NewKeyValue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if err := kv.Set(ctx, "greeting", []byte("hello"), 0); err != nil {
		log.Fatal(err)
	}
	v, found, err := kv.Get(ctx, "greeting")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %v\n", v, found)

	_, _, err = kv.Get(ctx, "")
	var perr *protocol.Error
	if errors.As(err, &perr) {
		fmt.Println(perr.Code, perr.Message)
	}
	// Output:
	// hello true
	// INVALID_ARGUMENT key is empty
}

// startEngine starts an in-process nats-server on a random port and, in place of an
// engine, a responder that serves keyvalue get and set from a map.
func startEngine() (url string, stop func()) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		log.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		log.Fatal("nats-server did not start")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	store := map[string][]byte{}
	respond := func(m *nats.Msg, v any) {
		out := nats.NewMsg(m.Reply)
		if e, ok := v.(*protocol.Error); ok {
			v = protocol.Envelope{Error: e}
			out.Header.Set(protocol.HeaderErrorCode, string(e.Code))
		}
		out.Data, _ = json.Marshal(v)
		_ = m.RespondMsg(out)
	}
	_, _ = nc.QueueSubscribe(protocol.ServiceSubject(protocol.KeyValue, protocol.OpSet), "q", func(m *nats.Msg) {
		var r protocol.KVSetRequest
		_ = json.Unmarshal(m.Data, &r)
		mu.Lock()
		store[r.Key] = r.Value
		mu.Unlock()
		respond(m, protocol.Empty{})
	})
	_, _ = nc.QueueSubscribe(protocol.ServiceSubject(protocol.KeyValue, protocol.OpGet), "q", func(m *nats.Msg) {
		var r protocol.KVKeyRequest
		_ = json.Unmarshal(m.Data, &r)
		if r.Key == "" {
			respond(m, protocol.Errorf(protocol.InvalidArgument, "key is empty"))
			return
		}
		mu.Lock()
		v, ok := store[r.Key]
		mu.Unlock()
		respond(m, protocol.KVGetReply{Found: ok, Value: v})
	})
	if err := nc.Flush(); err != nil {
		log.Fatal(err)
	}
	return s.ClientURL(), func() {
		nc.Close()
		s.Shutdown()
		s.WaitForShutdown()
	}
}
