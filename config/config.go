package config

import (
	"maps"
	"math"
	"strings"
	"time"
)

// FileName is the file Load reads from the working directory when no path is given.
const FileName = "abi-engine.yaml"

// The environment variables Load reads. Each wins over the file when it is set to a
// non-empty value.
const (
	EnvRole      = "ABI_ENGINE_ROLE"    // nats.engine.role
	EnvRolloutID = "ABI_ROLLOUT_ID"     // nats.engine.rollout_id
	EnvNATSURL   = "ABI_NATS_URL"       // nats.url
	EnvStandby   = "ABI_ENGINE_STANDBY" // nats.engine.standby
	// A container runs the image's defaults, whose 127.0.0.1 nothing outside the
	// container reaches: these two let the image (and a pod) listen elsewhere without a
	// file.
	EnvHTTPListen     = "ABI_HTTP_LISTEN"          // http.listen
	EnvEmbeddedListen = "ABI_NATS_EMBEDDED_LISTEN" // nats.embedded.listen
	// EnvJWTSecretFile lets the client commands (call, bench, chaos) and the engine
	// find the service tokens' secret without a configuration file.
	EnvJWTSecretFile = "ABI_JWT_SECRET_FILE" // nats.jwt_secret_file
)

// Role is what an engine does on its account (nats.engine.role).
type Role string

// The roles of the ADR.
const (
	// RoleServe takes the lease, serves the kernel services and hosts the jobs; it stands
	// by when an engine of another rollout holds the lease.
	RoleServe Role = "serve"
	// RoleClient never touches the lease, serves nothing and opens no backend.
	RoleClient Role = "client"
	// RoleAuto serves when no engine does and is a client otherwise; it never stands by.
	RoleAuto Role = "auto"
)

// KeyValueAdapter names the backend of the keyvalue service.
type KeyValueAdapter string

// The keyvalue backends.
const (
	KeyValueMemory    KeyValueAdapter = "memory"
	KeyValueBolt      KeyValueAdapter = "bbolt"
	KeyValueJetStream KeyValueAdapter = "jetstream"
	KeyValuePostgres  KeyValueAdapter = "postgres"
)

// ObjectStorageAdapter names the backend of the object_storage service.
type ObjectStorageAdapter string

// The object_storage backends.
const (
	ObjectStorageMemory    ObjectStorageAdapter = "memory"
	ObjectStorageFS        ObjectStorageAdapter = "fs"
	ObjectStorageJetStream ObjectStorageAdapter = "jetstream"
)

// Defaults of the adapter options, also filled in by Default.
const (
	DefaultBoltPath            = "data/kv.db"
	DefaultKeyValueBucket      = "ABI_KV"
	DefaultPostgresTable       = "abi_keyvalue"
	DefaultObjectsRoot         = "data/objects"
	DefaultObjectStorageBucket = "ABI_OBJECTS"
)

// leaseBucket is the JetStream KV bucket of the lease (docs/design.md §4.1). The lease package
// owns it, but config sits below lease in the import graph, so the name is repeated here
// only to keep keyvalue data out of it.
const leaseBucket = "ABI_ENGINE"

// Config is the whole configuration of an engine (docs/design.md §4.4). The zero value is not
// useful: start from Default, Load or Parse. Seconds are float64 as in the YAML; the
// methods returning time.Duration are what the engine should use.
type Config struct {
	NATS     NATS     `yaml:"nats"`
	Services Services `yaml:"services"`
	HTTP     HTTP     `yaml:"http"`
	Log      Log      `yaml:"log"`
	// Telemetry is in telemetry.go.
	Telemetry Telemetry `yaml:"telemetry"`
	Limits    Limits    `yaml:"limits"`

	// path is the file the configuration was read from ("" when none was).
	path string
	// origins maps a key path to where its value came from, so an error can point at
	// it. It is copied on write, so copies of a Config never share changes.
	origins map[string]source
}

// source is where a value came from: what is "line 7", "environment variable
// ABI_ROLLOUT_ID" or "flag --role"; line is its line in the file, 0 when not from it.
type source struct {
	what string
	line int
}

// NATS is the nats block.
type NATS struct {
	// URL is empty for the embedded server, else a comma-separated list of server URLs.
	URL                   string   `yaml:"url"`
	Embedded              Embedded `yaml:"embedded"`
	Credentials           string   `yaml:"credentials"`
	ClientTimeoutSeconds  float64  `yaml:"client_timeout_seconds"`
	MaxConcurrentRequests int      `yaml:"max_concurrent_requests"`
	Engine                Engine   `yaml:"engine"`
	// ConnectTimeoutSeconds bounds the first connection at start; after it the engine
	// reconnects for ever.
	ConnectTimeoutSeconds float64 `yaml:"connect_timeout_seconds"`
	// TLS is the connection's TLS: a private CA, a client certificate (mTLS).
	TLS TLS `yaml:"tls"`
	// NKeySeedFile, TokenFile and User with PasswordFile are the other ways to log in
	// (besides Credentials); at most one is set. The secrets stay in their files and
	// are read when the engine connects, never printed.
	NKeySeedFile string `yaml:"nkey_seed_file"`
	TokenFile    string `yaml:"token_file"`
	User         string `yaml:"user"`
	PasswordFile string `yaml:"password_file"`
	// JWTSecretFile names a file holding the HS256 secret of the service tokens
	// (Nats-Auth-Token) the kernel services verify on every call. Without it the JSON
	// protocol needs no token and protobuf calls are refused UNAUTHENTICATED.
	JWTSecretFile string `yaml:"jwt_secret_file"`
	// Discovery, when set, makes the serving engine host the module registry
	// (docs/discovery.md); nil is off.
	Discovery *Discovery `yaml:"discovery"`
	// JetStream is the nats.jetstream block: where the lease and the data live.
	JetStream JetStream `yaml:"jetstream"`
}

// JetStream is the nats.jetstream block.
type JetStream struct {
	// Domain is the JetStream domain that holds the lease bucket, the epoch and every
	// jetstream adapter's bucket; "" is the JetStream of the server the engine is
	// connected to. Every engine of an account must name the same one: on leaf nodes
	// with JetStream of their own, each would otherwise take a lease of its own.
	Domain string `yaml:"domain"`
}

// TLS is the nats.tls block. With none of it set, a tls:// URL is verified against the
// system's roots.
type TLS struct {
	// CAFile is a PEM bundle of the CAs the server's certificate is verified against.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the client certificate and its key (PEM), for a server
	// that verifies clients (mTLS); both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// InsecureSkipVerify accepts any server certificate: for a test bench only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// Enabled reports whether any TLS setting is made.
func (t TLS) Enabled() bool {
	return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.InsecureSkipVerify
}

// Limits is the limits block: the memory an engine gives transfer sessions and parked
// replies, and how long a session may live. docs/operations.md sizes a pod from it.
type Limits struct {
	// MemoryMiB bounds what every transfer session and parked reply hold together.
	MemoryMiB int `yaml:"memory_mib"`
	// ClientMemoryMiB is one client's share of MemoryMiB.
	ClientMemoryMiB int `yaml:"client_memory_mib"`
	// SessionMemoryMiB bounds one session: the largest object a transfer moves.
	SessionMemoryMiB int `yaml:"session_memory_mib"`
	// RequestUploadMiB bounds one overflow upload: the largest request a call may send
	// through the overflow host (protocol/overflowrequest.go).
	RequestUploadMiB int `yaml:"request_upload_mib"`
	// Sessions bounds the sessions open at once per host; ClientSessions per client.
	Sessions       int `yaml:"sessions"`
	ClientSessions int `yaml:"client_sessions"`
	// SessionIdleSeconds closes a session no call touched for that long;
	// SessionMaxSeconds closes any session that long after it opened.
	SessionIdleSeconds float64 `yaml:"session_idle_seconds"`
	SessionMaxSeconds  float64 `yaml:"session_max_seconds"`
}

// RuntimeHeadroomMiB is what an engine needs besides its session budget: the Go
// runtime, NATS buffers, the micro services' queues and the backends' clients. An
// engine's memory limit (GOMEMLIMIT) is the budget plus this; docs/operations.md sizes
// a pod from both.
const RuntimeHeadroomMiB = 128

// Bytes are the budget of sessions in bytes.
func (l Limits) Bytes() int64 { return int64(l.MemoryMiB) << 20 }

// ClientBytes is one client's share in bytes.
func (l Limits) ClientBytes() int64 { return int64(l.ClientMemoryMiB) << 20 }

// SessionBytes is one session's limit in bytes.
func (l Limits) SessionBytes() int64 { return int64(l.SessionMemoryMiB) << 20 }

// RequestUploadBytes is one overflow upload's limit in bytes: RequestUploadMiB, at most
// MemoryMiB (no upload can hold more than the whole budget).
func (l Limits) RequestUploadBytes() int64 { return int64(min(l.RequestUploadMiB, l.MemoryMiB)) << 20 }

// SessionIdle is the idle expiry of a session.
func (l Limits) SessionIdle() time.Duration { return seconds(l.SessionIdleSeconds) }

// SessionMax is the maximum lifetime of a session.
func (l Limits) SessionMax() time.Duration { return seconds(l.SessionMaxSeconds) }

// RuntimeMemoryLimit is the soft memory limit the binary gives the Go runtime (unless
// GOMEMLIMIT is set): the budget plus RuntimeHeadroomMiB, so the collector works
// harder before the process approaches its pod's limit instead of letting garbage
// double the heap.
func (l Limits) RuntimeMemoryLimit() int64 { return int64(l.MemoryMiB+RuntimeHeadroomMiB) << 20 }

// Embedded is the embedded NATS server, started when nats.url is empty.
type Embedded struct {
	Listen   string `yaml:"listen"`
	StoreDir string `yaml:"store_dir"`
	// PingIntervalSeconds and PingMax are the server's ping_interval and ping_max: how
	// soon it drops a half-open client, a holder's subscriptions included. 0 takes
	// nats-server's (2 minutes, 2).
	PingIntervalSeconds float64 `yaml:"ping_interval_seconds"`
	PingMax             int     `yaml:"ping_max"`
	// SyncIntervalSeconds and SyncAlways are the server's JetStream sync_interval: how
	// long an acknowledged write may sit unsynced (0: nats-server's 2 minutes), or
	// always synced before it is acknowledged.
	SyncIntervalSeconds float64 `yaml:"sync_interval_seconds"`
	SyncAlways          bool    `yaml:"sync_always"`
	// HTTPListen is where the server serves its HTTP monitoring (/varz, what doctor
	// reads); "" serves none.
	HTTPListen string `yaml:"http_listen"`
}

// Engine is the nats.engine block: role, rollout and the lease timings.
type Engine struct {
	Role                  Role    `yaml:"role"`
	RolloutID             string  `yaml:"rollout_id"`
	LeaseSeconds          float64 `yaml:"lease_seconds"`
	StandbyTimeoutSeconds float64 `yaml:"standby_timeout_seconds"`
	DrainSeconds          float64 `yaml:"drain_seconds"`
	LeaseReplicas         int     `yaml:"lease_replicas"`
	Standby               Standby `yaml:"standby"`
}

// Standby is nats.engine.standby: what a serving engine does when an engine of its own
// rollout (or, without one, any engine) holds the lease.
type Standby string

const (
	// StandbyOff refuses to start, naming the holder (exit 3): a second replica by
	// mistake fails.
	StandbyOff Standby = "off"
	// StandbyHot waits as a standby does (loaded, ready, serving nothing, no standby
	// timeout) and takes over a lease after the holder goes silent, with no boot.
	StandbyHot Standby = "hot"
)

// HotStandby reports whether this engine waits for a holder of its own rollout.
func (e Engine) HotStandby() bool { return e.Role == RoleServe && e.Standby == StandbyHot }

// Services holds one block per kernel service.
type Services struct {
	KeyValue      KeyValue      `yaml:"keyvalue"`
	ObjectStorage ObjectStorage `yaml:"object_storage"`
}

// KeyValue is the services.keyvalue block. Each option belongs to one adapter; setting
// it in the file for another adapter is an error, so a forgotten option never looks as
// if it took effect.
type KeyValue struct {
	Adapter KeyValueAdapter `yaml:"adapter"`
	// Path is the bbolt database file.
	Path string `yaml:"path"`
	// Bucket is the JetStream KV bucket.
	Bucket string `yaml:"bucket"`
	// Replicas are the JetStream KV bucket's replicas; 0 takes the lease's
	// (nats.engine.lease_replicas). Use KeyValueReplicas.
	Replicas int `yaml:"replicas"`
	// DSN is the PostgreSQL connection string (postgres:// URL or key=value form).
	DSN string `yaml:"dsn"`
	// Table is the PostgreSQL table, optionally schema-qualified.
	Table string `yaml:"table"`
}

// ObjectStorage is the services.object_storage block; options as for KeyValue.
type ObjectStorage struct {
	Adapter ObjectStorageAdapter `yaml:"adapter"`
	// Root is the directory of the fs adapter.
	Root string `yaml:"root"`
	// Bucket is the JetStream object store bucket.
	Bucket string `yaml:"bucket"`
	// Replicas are the object store bucket's replicas; 0 takes the lease's. Use
	// ObjectStorageReplicas.
	Replicas int `yaml:"replicas"`
}

// HTTP is the http block.
type HTTP struct {
	// Listen is host:port of the health, status and metrics server; "" disables it.
	Listen string `yaml:"listen"`
	// Pprof serves net/http/pprof's profiles under /debug/pprof/ on that server. Off by
	// default: a profile shows the process's code paths and costs CPU while it is taken.
	Pprof bool `yaml:"pprof"`
}

// Log is the log block.
type Log struct {
	Level string `yaml:"level"`
	// Format is json, console, or auto: console when standard error is a terminal,
	// JSON otherwise.
	Format string `yaml:"format"`
}

// LogFormatAuto picks the log format by where the log goes: console on a terminal,
// JSON otherwise.
const LogFormatAuto = "auto"

// Default returns the configuration an engine runs with when nothing is configured:
// role serve, embedded NATS server, JetStream backends, HTTP on 127.0.0.1:8080.
func Default() *Config {
	return &Config{
		NATS: NATS{
			Embedded:              Embedded{Listen: "127.0.0.1:4222", StoreDir: "data/nats"},
			ClientTimeoutSeconds:  10,
			MaxConcurrentRequests: 64,
			ConnectTimeoutSeconds: 5,
			Engine: Engine{
				Role:                  RoleServe,
				LeaseSeconds:          20,
				StandbyTimeoutSeconds: 900,
				DrainSeconds:          60,
				LeaseReplicas:         1,
				Standby:               StandbyOff,
			},
		},
		Services: Services{
			KeyValue: KeyValue{
				Adapter: KeyValueJetStream,
				Path:    DefaultBoltPath,
				Bucket:  DefaultKeyValueBucket,
				Table:   DefaultPostgresTable,
			},
			ObjectStorage: ObjectStorage{
				Adapter: ObjectStorageJetStream,
				Root:    DefaultObjectsRoot,
				Bucket:  DefaultObjectStorageBucket,
			},
		},
		HTTP:      HTTP{Listen: "127.0.0.1:8080"},
		Log:       Log{Level: "info", Format: LogFormatAuto},
		Telemetry: defaultTelemetry(),
		Limits: Limits{
			MemoryMiB:          256,
			ClientMemoryMiB:    64,
			SessionMemoryMiB:   64,
			RequestUploadMiB:   256,
			Sessions:           64,
			ClientSessions:     8,
			SessionIdleSeconds: 60,
			SessionMaxSeconds:  900,
		},
	}
}

// Path is the file the configuration was read from, "" when it holds the defaults (or
// was parsed from bytes or built in code).
func (c *Config) Path() string { return c.path }

func (c *Config) setOrigin(key string, src source) {
	m := maps.Clone(c.origins)
	if m == nil {
		m = make(map[string]source)
	}
	m[key] = src
	c.origins = m
}

// issue builds an Issue about key, pointing at where its value came from.
func (c *Config) issue(key, value, rule string) Issue {
	src := c.origins[key]
	return Issue{Key: key, Value: value, Rule: rule, Origin: src.what, Line: src.line}
}

// fromFile reports whether the file set key.
func (c *Config) fromFile(key string) bool { return c.origins[key].line > 0 }

// EmbeddedBroker reports whether the engine starts its own NATS server (nats.url empty).
func (n NATS) EmbeddedBroker() bool { return n.URL == "" }

// Servers splits nats.url into its server URLs; nil for the embedded server.
func (n NATS) Servers() []string {
	if n.URL == "" {
		return nil
	}
	parts := strings.Split(n.URL, ",")
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ClientTimeout is how long a client call waits for its reply.
func (n NATS) ClientTimeout() time.Duration { return seconds(n.ClientTimeoutSeconds) }

// ConnectTimeout is how long an engine tries to reach the broker at start before it
// gives up.
func (n NATS) ConnectTimeout() time.Duration { return seconds(n.ConnectTimeoutSeconds) }

// Lease is the lease period: renewals run every Lease/4, fencing after Lease/2, a
// contender takes over after a full Lease without a new revision.
func (e Engine) Lease() time.Duration { return seconds(e.LeaseSeconds) }

// StandbyTimeout is how long a standby waits for the lease before it stops the process.
func (e Engine) StandbyTimeout() time.Duration { return seconds(e.StandbyTimeoutSeconds) }

// Drain is how long a releasing engine keeps answering calls and sessions it received.
func (e Engine) Drain() time.Duration { return seconds(e.DrainSeconds) }

// KeyValueReplicas are the replicas the jetstream keyvalue adapter creates its bucket
// with: services.keyvalue.replicas, or the lease's when it is not set.
func (c *Config) KeyValueReplicas() int {
	return orLease(c.Services.KeyValue.Replicas, c.NATS.Engine.LeaseReplicas)
}

// ObjectStorageReplicas are the replicas the jetstream object_storage adapter creates
// its bucket with: services.object_storage.replicas, or the lease's when it is not set.
func (c *Config) ObjectStorageReplicas() int {
	return orLease(c.Services.ObjectStorage.Replicas, c.NATS.Engine.LeaseReplicas)
}

func orLease(replicas, lease int) int {
	if replicas == 0 {
		return lease
	}
	return replicas
}

// LeaseRolloutID is the rollout id the engine claims the lease with: the configured one
// in role serve, and empty in role auto (an auto engine never stands by, docs/decision.md)
// and in role client (which never claims).
func (e Engine) LeaseRolloutID() string {
	if e.Role == RoleServe {
		return e.RolloutID
	}
	return ""
}

// seconds converts float seconds to a Duration, saturating instead of overflowing so a
// huge (but valid) standby timeout means "practically forever" rather than negative.
func seconds(s float64) time.Duration {
	if math.IsNaN(s) || s <= 0 {
		return 0
	}
	ns := s * float64(time.Second)
	if ns >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ns)
}
