// Package discovery is the Go client of the module registry an engine serves when
// nats.discovery is set (docs/discovery.md): lookups (GetModule, ListModules), the
// admin's Evict, and a Session for a Go service that registers itself as a module
// instance, renews well inside its lease, reports that it is initialized or draining,
// unregisters when it stops, and registers again under the same instance id after
// LEASE_EXPIRED, as the Python SDK's DiscoverySession does.
//
// Every call carries a service token and is sent again on "no responders" for up to
// 5 s with a growing pause (0.05 s doubling to 0.5 s), which hides the gap of an
// engine handover, as the SDK does.
package discovery
