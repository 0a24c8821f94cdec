package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/abi-engine/engine/protocol"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// kernelOperations are the operations of the kernel services this abi-engine knows:
// what call --help lists, and what call checks against when no engine tells it its own
// (none runs, or the user may not ask $SRV.INFO).
var kernelOperations = map[string][]string{
	protocol.KeyValue: {protocol.OpGet, protocol.OpSet, protocol.OpSetIfNotExists, protocol.OpDelete,
		protocol.OpDeleteIfValueMatches, protocol.OpExists, protocol.OpListKeys, protocol.OpGetTTL},
	protocol.ObjectStorage: {protocol.OpPutObject, protocol.OpGetObject, protocol.OpDeleteObject,
		protocol.OpListObjects, protocol.OpGetObjectMetadata, protocol.OpListObjectsRecursive},
}

// askBound is how long call waits for a $SRV.INFO answer: an engine answers within
// milliseconds, and a broker says at once that nobody listens.
const askBound = time.Second

// UnknownOperationError is a call of an operation (or a service) that no engine offers:
// it names the valid ones. Nothing was sent.
type UnknownOperationError struct {
	Service, Operation string
	Valid              []string // the service's operations, or, for an unknown service, the services
	From               string   // where Valid comes from
	NoService          bool
}

func (e *UnknownOperationError) Error() string {
	if e.NoService {
		return fmt.Sprintf("SERVICE %q: no engine serves it; the services %s: %s", e.Service, e.From, strings.Join(e.Valid, ", "))
	}
	return fmt.Sprintf("OPERATION %q: %s has no such operation; its operations %s: %s", e.Operation, e.Service, e.From, strings.Join(e.Valid, ", "))
}

// kernelHelp is the services and operations of call's help.
func kernelHelp() string {
	var b strings.Builder
	for _, svc := range sortedKeys(kernelOperations) {
		fmt.Fprintf(&b, "  %s: %s\n", svc, strings.Join(kernelOperations[svc], ", "))
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkOperation refuses a call that no engine could answer, before it is sent: it
// asks $SRV.INFO.<service> of the engines on nc and checks op against the endpoints of
// the first that answers. When none answers a kernel service, the kernel's operations
// decide; when none answers another service, $SRV.INFO tells whether some engine runs
// that does not serve it. What cannot be asked (no engine up, no permission) lets the
// call go, as it did: its own retries and errors say the rest.
func checkOperation(ctx context.Context, nc *nats.Conn, service, op string) error {
	ctx, cancel := context.WithTimeout(ctx, askBound)
	defer cancel()
	ops, answered := askOperations(ctx, nc, service)
	kernel, isKernel := kernelOperations[service]
	switch {
	case answered && !slices.Contains(ops, op):
		return &UnknownOperationError{Service: service, Operation: op, Valid: ops, From: "the engine that answered offers"}
	case answered:
		return nil
	case isKernel && !slices.Contains(kernel, op):
		return &UnknownOperationError{Service: service, Operation: op, Valid: kernel, From: "are"}
	case isKernel:
		return nil
	}
	if services := askServices(ctx, nc); len(services) > 0 {
		return &UnknownOperationError{Service: service, Operation: op, NoService: true, Valid: services, From: "the engines that answered serve"}
	}
	return nil
}

// askOperations is the endpoints of service at the first engine that answers its
// $SRV.INFO; answered is false when none did (in time).
func askOperations(ctx context.Context, nc *nats.Conn, service string) (ops []string, answered bool) {
	subject, err := micro.ControlSubject(micro.InfoVerb, service, "")
	if err != nil {
		return nil, false
	}
	msg, err := nc.RequestWithContext(ctx, subject, nil)
	if err != nil {
		return nil, false
	}
	var info micro.Info
	if err := json.Unmarshal(msg.Data, &info); err != nil || info.Name != service {
		return nil, false
	}
	for _, ep := range info.Endpoints {
		ops = append(ops, ep.Name)
	}
	sort.Strings(ops)
	return ops, true
}

// askServices is the names of the services that answer $SRV.INFO, sorted; none when
// nobody answers (or the user may not ask).
func askServices(ctx context.Context, nc *nats.Conn) []string {
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$SRV.INFO", inbox, nil); err != nil {
		return nil
	}
	seen := map[string]bool{}
	// Every service instance answers at once; a short quiet after the last ends the wait.
	wait := askBound
	for {
		wctx, cancel := context.WithTimeout(ctx, wait)
		msg, err := sub.NextMsgWithContext(wctx)
		cancel()
		if err != nil || msg.Header.Get("Status") == "503" {
			break
		}
		var info micro.Info
		if json.Unmarshal(msg.Data, &info) == nil && info.Name != "" {
			seen[info.Name] = true
		}
		wait = 100 * time.Millisecond
	}
	return sortedKeys(seen)
}
