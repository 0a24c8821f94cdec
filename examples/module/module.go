// Package module is an example of a Go module: a process that registers with the
// serving engine's module registry (docs/discovery.md) through client/discovery,
// serves its own subject while it is registered, and at its stop drains, stops
// serving and unregisters, in that order, as the Python SDK's modules do.
//
// It serves "echo" on abi.mod.<project>.<instance id>.echo: an instance-addressed
// subject, which callers find through get_module and which no engine answers.
package module

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	discoveryclient "github.com/abi-engine/engine/client/discovery"
	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
)

// ID is the example's module id.
const ID = "example.echo"

// Subject is where the instance id serves echo.
func Subject(project, instanceID string) string {
	return "abi.mod." + project + "." + instanceID + ".echo"
}

// Run registers an instance of the module with cl's registry, serves echo on nc, and
// reports it initialized; once ctx ends, it reports draining, ends its subscription
// (what it received is still answered) and unregisters. started, if not nil, receives
// the instance id once the instance is initialized.
func Run(ctx context.Context, nc *nats.Conn, cl *discoveryclient.Client, started chan<- string) error {
	s, err := discoveryclient.NewSession(cl, &pb.ModuleDescriptor{ModuleId: ID, ContractMajor: 1, PackageVersion: "1.0.0"}, "", "", nil)
	if err != nil {
		return err
	}
	if err := s.Start(ctx); err != nil {
		return fmt.Errorf("example module: register: %w", err)
	}
	sub, err := nc.Subscribe(Subject(cl.Project(), s.InstanceID()), func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		_ = s.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("example module: serve: %w", err)
	}
	if err := s.SetInitialized(ctx); err != nil {
		_ = sub.Unsubscribe()
		_ = s.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("example module: initialized: %w", err)
	}
	if started != nil {
		started <- s.InstanceID()
	}
	<-ctx.Done()
	stop := context.WithoutCancel(ctx)
	// Draining first: lookups show the instance DRAINING while it finishes.
	drainErr := s.Drain(stop)
	if err := sub.Drain(); err != nil {
		return fmt.Errorf("example module: stop serving: %w", err)
	}
	if err := s.Close(stop); err != nil {
		return fmt.Errorf("example module: unregister: %w", err)
	}
	return drainErr
}
