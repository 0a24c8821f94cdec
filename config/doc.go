// Package config is the configuration of abi-engine: the YAML file, the environment
// variables and command-line overrides that win over it, the rules every value must
// meet, and where each service keeps its data (the shared-backend check of the ADR).
// It imports nothing else of this module but internal/redact (every message hides the
// password or token of a URL and connection string) and opens no connection, so every
// configuration error is found before the engine touches the broker, the lease or a
// backend.
//
// # Where the configuration comes from
//
// Load reads, in order, each later source winning over the earlier ones:
//
//  1. the defaults below;
//  2. the file given with --config, or else abi-engine.yaml in the working directory
//     when it exists (a --config file that does not exist is an error);
//  3. the environment: ABI_ENGINE_ROLE sets nats.engine.role, ABI_ROLLOUT_ID sets
//     nats.engine.rollout_id, ABI_NATS_URL sets nats.url, ABI_ENGINE_STANDBY sets
//     nats.engine.standby, ABI_HTTP_LISTEN sets http.listen and
//     ABI_NATS_EMBEDDED_LISTEN sets nats.embedded.listen. A variable that is unset or
//     empty keeps the file's value (so ABI_HTTP_LISTEN cannot turn HTTP off: the file
//     or --http "" does);
//  4. the flags of abi-engine run: --role, --nats and --http.
//
// The file must be a regular file of at most MaxFileSize bytes (1 MiB): a directory, a
// device such as /dev/zero or a named pipe is refused before it is read.
//
// The result is validated as a whole and every problem is reported at once, each naming
// its key, its value, the rule it breaks and where the value came from (a line of the
// file, an environment variable or a flag). The file is decoded strictly: a key that is
// not listed below is an error naming the key and its line, and so is a key set twice.
// A key written without a value ("rollout_id:") keeps its default; write "" for an
// empty string, e.g. `listen: ""` to turn HTTP off. Seconds are numbers and may have a
// fraction (lease_seconds: 2.5). The first 20 problems of the document are listed and the
// others counted, and a key or value of more than 256 bytes is cut in messages.
//
// # Keys
//
// nats.url (default ""): empty starts an embedded NATS server with JetStream, for
// development on one machine. Otherwise a comma-separated list of server URLs, each
// nats://, tls://, ws:// or wss:// with a host and, optionally, a port from 1 to 65535
// (nats://n1:4222,nats://n2:4222).
//
// nats.embedded.listen (default "127.0.0.1:4222"): host:port of the embedded server, port
// 0 to 65535 (0: any free port). Read only when nats.url is empty.
//
// nats.embedded.store_dir (default "data/nats"): directory of the embedded server's
// JetStream store; must not be empty. Read only when nats.url is empty.
//
// nats.embedded.ping_interval_seconds (default 0) and nats.embedded.ping_max (default
// 0): the embedded server's ping_interval and ping_max, 0 for nats-server's 2 minutes
// and 2. A half-open client (a holder cut off) keeps its subscriptions for
// ping_interval x (ping_max + 1); `abi-engine doctor` advises at most the lease.
//
// nats.embedded.sync_interval_seconds (default 0) and nats.embedded.sync_always (default
// false): the embedded server's JetStream sync_interval, 0 for nats-server's 2 minutes,
// or every write synced before it is acknowledged; not both.
//
// nats.embedded.http_listen (default ""): host:port where the embedded server serves
// its HTTP monitoring (/varz, which `abi-engine doctor` reads), without a login; ""
// serves none. These five keys are read only when the engine starts the embedded
// server.
//
// nats.credentials (default ""): path of a NATS .creds file; empty connects without one.
//
// nats.tls.ca_file, nats.tls.cert_file, nats.tls.key_file (default ""): PEM files of
// the CAs the server's certificate is verified against (a private CA), and of the client
// certificate and its key for a server that verifies clients (mTLS); cert_file and
// key_file go together. nats.tls.insecure_skip_verify (default false) accepts any server
// certificate, for a test bench only. Any of them makes the connection TLS; with
// nats.url empty (the embedded broker, which listens without TLS) they are an error.
//
// nats.nkey_seed_file, nats.token_file, nats.user with nats.password_file (default ""):
// the other ways to log in besides nats.credentials; at most one of the four is set. Each
// names a file holding the secret (an nkey user seed, a token, the user's password), read
// when the engine connects; its content is never printed. Kubernetes mounts them from a
// Secret. The embedded broker, when the engine starts it, requires the same login, so a
// development setup rehearses the production one.
//
// nats.jwt_secret_file (default ""): a file holding the HS256 secret of the service
// tokens (header Nats-Auth-Token, a JWT with the caller in `sub`) that the Python
// clients send. With it, every call of either protocol must carry a valid token, else
// it is refused UNAUTHENTICATED and nothing runs; without it, JSON calls need none and
// protobuf calls are refused. The same secret as the Python engines of the account;
// its content (white space around it removed) is never printed.
//
// nats.client_timeout_seconds (default 10): how long a client call waits for its reply;
// a finite number greater than 0.
//
// nats.connect_timeout_seconds (default 5): how long an engine tries to reach the broker
// at start (a broker that is not there, refuses the credentials, a credentials file
// that cannot be read) before it gives up, naming the address and the reason; a finite
// number greater than 0. Once connected, an engine reconnects for ever.
//
// nats.jetstream.domain (default ""): the JetStream domain that holds the lease bucket
// ABI_ENGINE, its epoch and the jetstream adapters' buckets; "" is the JetStream of the
// server the engine is connected to. Letters, digits, '_' and '-'. Every engine of an
// account must name the same one: on a hub with leaf nodes that run JetStream in domains
// of their own, engines on different leaf nodes would otherwise each take a lease of
// their own and both serve.
//
// nats.max_concurrent_requests (default 64): calls each service handles at once; a whole
// number from 1 to 4096.
//
// nats.discovery (default: absent, off): the module registry the serving engine hosts
// (docs/discovery.md). `discovery: {}` turns it on with the defaults:
//   - nats.discovery.project (default "default"): 1 to 64 letters, digits, '_' or '-';
//     the registry's subjects abi.discovery.<project>.v1.* and bucket ABI_DISCOVERY_<project>.
//   - nats.discovery.lease_seconds (default 20): a module instance's membership lease, a
//     finite number from 1 to 300.
//
// nats.engine.role (default serve): serve, client or auto. serve takes the lease, serves
// the kernel services and hosts the jobs, and stands by while an engine of another
// rollout serves. client never touches the lease, serves nothing and opens no backend.
// auto serves when no engine does and is a client otherwise; it claims with an empty
// rollout id, so it never stands by.
//
// nats.engine.rollout_id (default ""): the deploy this engine belongs to, e.g. the image
// tag; usually set with ABI_ROLLOUT_ID. Empty, or up to 128 characters matching
// ^([A-Za-z0-9_][A-Za-z0-9_.:-]{0,127})?$. A serving engine whose rollout differs from
// the holder's stands by and takes over at the handover.
//
// nats.engine.lease_seconds (default 20): the lease period, a finite number from 1 to
// 300. The holder renews every quarter of it and stops serving (fences) after half of it
// without a successful renewal; a contender takes over after a full period without one.
//
// nats.engine.standby_timeout_seconds (default 900): how long a standby waits for the
// lease before it stops the process; a finite number greater than 0.
//
// nats.engine.drain_seconds (default 60): how long a releasing engine keeps answering the
// calls and sessions it has received; a finite number, 0 or more (0 closes them at once).
//
// nats.engine.standby (default off): off or hot. With off, a serving engine that finds
// an engine of its own rollout (or, with no rollout id, any engine) holding the lease
// refuses to start, naming it (exit 3). With hot it waits as a standby does, with no
// standby timeout: loaded and ready, serving nothing, it takes over a lease period after
// the holder stops renewing, with no boot. A hot standby needs shared backends, like a
// rollout.
//
// nats.engine.lease_replicas (default 1): replicas of the lease bucket ABI_ENGINE, a whole
// number from 1 to 5; use 3 on a cluster. An existing lease bucket with other replicas
// is refused. It is also the default replicas of the jetstream services' buckets.
//
// services.keyvalue.adapter (default jetstream): memory, bbolt, jetstream or postgres.
// Options, each read by one adapter only (setting one in the file for another adapter
// is an error):
//   - path (bbolt; default "data/kv.db"): the database file; must not be empty.
//   - bucket (jetstream; default "ABI_KV"): the KV bucket; letters, digits, '_' and '-',
//     and not ABI_ENGINE, the lease's bucket.
//   - replicas (jetstream; default nats.engine.lease_replicas): the replicas the engine
//     creates the bucket with, a whole number from 1 to 5. A bucket that exists keeps
//     its own.
//   - dsn (postgres; required): the connection string, a postgres:// URL or key=value
//     form as pgx accepts it. The password may be left out and given by PGPASSWORD or a
//     .pgpass file, which pgx reads.
//   - table (postgres; default "abi_keyvalue"): the table, created in the connection's
//     search path; lowercase letters, digits and '_', not starting with a digit, at most
//     63 characters.
//
// services.object_storage.adapter (default jetstream): memory, fs or jetstream. Options:
//   - root (fs; default "data/objects"): the directory objects are stored under; must
//     not be empty.
//   - bucket (jetstream; default "ABI_OBJECTS"): the object store bucket; letters,
//     digits, '_' and '-'.
//   - replicas (jetstream; default nats.engine.lease_replicas): as for keyvalue.
//
// http.listen (default "127.0.0.1:8080"): host:port of the health, readiness, status and
// metrics server, port 0 to 65535 (0: any free port); "" turns it off.
//
// http.pprof (default false): true also serves net/http/pprof's profiles under
// /debug/pprof/ on that server (docs/performance.md has the recipe); it needs
// http.listen.
//
// limits.memory_mib (default 256): the memory every transfer session and parked reply
// hold together, in MiB, 16 to 1048576; beyond it a call is refused RESOURCE_EXHAUSTED
// (retryable). limits.client_memory_mib (default 64) is one client's share of it, at
// most limits.memory_mib, and limits.session_memory_mib (default 64) one session's (the
// largest object a transfer moves; PAYLOAD_TOO_LARGE beyond), at most the client's share.
// limits.request_upload_mib (default 256; cut to limits.memory_mib) bounds one overflow
// upload, the largest request a protobuf call sends through abi.rpc.overflow
// (PAYLOAD_TOO_LARGE beyond); it holds budget while it waits, like any session, so the
// client's share bounds it too.
// A client is the connection a call comes from. limits.sessions (default 64) bounds the
// sessions open at once, 1 to 4096, and limits.client_sessions (default 8) one client's,
// 1 to limits.sessions. limits.session_idle_seconds (default 60) closes a session no call
// touched for that long; limits.session_max_seconds (default 900), at least the idle
// time, closes any session that long after it opened. The binary gives the Go runtime a
// soft memory limit of limits.memory_mib plus 128 MiB unless GOMEMLIMIT is set;
// docs/operations.md sizes a pod from it.
//
// log.level (default info): debug, info, warn or error.
//
// log.format (default auto): json, console, or auto: console when standard error is a
// terminal, JSON otherwise.
//
// telemetry.otlp_endpoint (default ""): host:port (port 4318 by convention) or an
// http:// or https:// URL of an OTLP/HTTP collector to export traces to; "" turns
// tracing off. A call's span continues the W3C traceparent of its request.
//
// telemetry.otlp_insecure (default false): send to a host:port endpoint over plain HTTP.
//
// telemetry.sample_ratio (default 1): the share, 0 to 1, of the traces started on the
// engine that are recorded; a caller's sampling decision wins for its own traces.
//
// telemetry.service_name (default "abi-engine"): the service.name of the spans.
//
// # The shared-backend check
//
// A serving engine with a rollout id hands over to the next rollout without downtime:
// both engines serve for a moment, so both must reach the same data. Such an engine is
// refused (*LocalBackendsError, also reported by Validate and Load) when a service keeps
// its data on this host: keyvalue on memory ("this process") or bbolt ("file at
// data/kv.db"), object_storage on memory or fs ("files under data/objects"), and any
// engine hosting the embedded NATS server, whose store (with every jetstream-backed
// service in it) is on this host too. The jetstream adapters against a shared NATS server
// and postgres pass. Local backends stay valid for development and single-host setups,
// which deploy without a rollout id; role client and role auto never fail the check.
package config
