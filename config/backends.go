package config

import (
	"slices"
	"strings"
)

// LocalStorage says where the keyvalue adapter keeps its data when it stays on this
// host, and returns "" when every engine reaches the same data (jetstream, postgres).
// It judges the adapter alone; Config.LocalBackends also counts a jetstream adapter as
// local when the broker is the embedded one.
func (k KeyValue) LocalStorage() string {
	switch k.Adapter {
	case KeyValueMemory:
		return "this process"
	case KeyValueBolt:
		return "file at " + k.Path
	default:
		return ""
	}
}

// LocalStorage says where the object_storage adapter keeps its data when it stays on
// this host, and returns "" when every engine reaches the same data (jetstream).
func (o ObjectStorage) LocalStorage() string {
	switch o.Adapter {
	case ObjectStorageMemory:
		return "this process"
	case ObjectStorageFS:
		return "files under " + o.Root
	default:
		return ""
	}
}

// LocalBackend is one service whose data stays on this host.
type LocalBackend struct {
	// Service is "keyvalue", "object_storage", or "nats" for the embedded broker.
	Service string
	// Where describes where the data is, e.g. "file at data/kv.db".
	Where string
}

// LocalBackends lists, sorted by service, every service of this engine whose data stays
// on this host. An engine hosting the embedded broker (nats.url empty) keeps the broker's
// store, and with it every jetstream-backed service, on this host too (docs/design.md §5.6).
func (c *Config) LocalBackends() []LocalBackend {
	var out []LocalBackend
	embedded := c.NATS.EmbeddedBroker()
	onEmbedded := func(what string) string {
		return what + " on the embedded NATS server, stored under " + c.NATS.Embedded.StoreDir
	}
	kv := c.Services.KeyValue
	if where := kv.LocalStorage(); where != "" {
		out = append(out, LocalBackend{"keyvalue", where})
	} else if embedded && kv.Adapter == KeyValueJetStream {
		out = append(out, LocalBackend{"keyvalue", onEmbedded("JetStream KV bucket " + kv.Bucket)})
	}
	if embedded {
		out = append(out, LocalBackend{"nats", "embedded NATS server with its store under " + c.NATS.Embedded.StoreDir})
	}
	obj := c.Services.ObjectStorage
	if where := obj.LocalStorage(); where != "" {
		out = append(out, LocalBackend{"object_storage", where})
	} else if embedded && obj.Adapter == ObjectStorageJetStream {
		out = append(out, LocalBackend{"object_storage", onEmbedded("JetStream object store " + obj.Bucket)})
	}
	slices.SortFunc(out, func(a, b LocalBackend) int { return strings.Compare(a.Service, b.Service) })
	return out
}

// CheckSharedBackends is the shared-backend check of the ADR ("Standby needs shared
// backends"): a serving engine with a rollout id hands over without downtime, which is
// only safe when every engine reaches the same data. It returns a *LocalBackendsError
// when role is serve, the rollout id is set, and LocalBackends is not empty. Role client
// opens no backend and role auto claims with an empty rollout id, so neither fails it.
// It is pure: the engine runs it before it connects to anything.
func (c *Config) CheckSharedBackends() error {
	if err := c.localBackendsError(); err != nil {
		return err
	}
	return nil // not a nil *LocalBackendsError, which would be a non-nil error
}

func (c *Config) localBackendsError() *LocalBackendsError {
	e := c.NATS.Engine
	if e.Role != RoleServe || e.RolloutID == "" && !e.HotStandby() {
		return nil
	}
	local := c.LocalBackends()
	if len(local) == 0 {
		return nil
	}
	return &LocalBackendsError{RolloutID: e.RolloutID, Local: local}
}

// LocalBackendsError refuses a rollout whose services keep data on this host.
type LocalBackendsError struct {
	RolloutID string
	// Local lists the offending services, sorted by service.
	Local []LocalBackend
}

func (e *LocalBackendsError) Error() string {
	if e.RolloutID == "" {
		return "a hot standby (nats.engine.standby: hot) " + e.reason()
	}
	return "rollout " + e.RolloutID + " " + e.reason()
}

// reason is the message without the rollout, shared with the Issue that Validate reports.
func (e *LocalBackendsError) reason() string {
	var b strings.Builder
	b.WriteString("hands over without downtime, which needs every service on a shared backend, but these keep their data on this host: ")
	for i, l := range e.Local {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(l.Service)
		b.WriteString(": ")
		b.WriteString(l.Where)
	}
	b.WriteString(". Zero-downtime deploys need shared backends: set nats.url to a shared NATS server and use the jetstream or postgres adapters; or deploy without a rollout id (unset " +
		EnvRolloutID + " and nats.engine.rollout_id) and without nats.engine.standby: hot, and stop the serving engine first")
	return b.String()
}
