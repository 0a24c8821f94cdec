package config

import (
	"cmp"
	"fmt"
	"math"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/abi-engine/engine/internal/redact"
)

// Issue is one thing wrong with a configuration.
type Issue struct {
	// Key is the dotted key path, e.g. "nats.engine.lease_seconds"; "" for the document
	// as a whole (a YAML syntax error).
	Key string
	// Value is the offending value as Go would print it (strings quoted, so an empty
	// string reads ""); empty when there is no single value to show (an unknown key).
	Value string
	// Rule says what the value must be.
	Rule string
	// Origin says where the value came from: "line 7" of the file, "environment variable
	// ABI_ROLLOUT_ID", "flag --role"; empty for a default or a value set in code.
	Origin string
	// Line is the line in the file, 0 when the problem is not tied to one.
	Line int
}

func (i Issue) String() string {
	var b strings.Builder
	b.WriteString(shorten(i.Key, maxShown))
	if i.Key == "" {
		b.WriteString("the document")
	}
	if i.Value != "" {
		// Redacted before it is cut, as quote does.
		b.WriteString(" = ")
		b.WriteString(shorten(redact.String(i.Value), maxShown))
	}
	if i.Origin != "" {
		b.WriteString(" (")
		b.WriteString(i.Origin)
		b.WriteString(")")
	}
	b.WriteString(": ")
	b.WriteString(shorten(redact.String(i.Rule), maxRule))
	// A value may be a URL or a connection string with a password, and a rule may quote
	// one: what an Issue says is redacted, whatever holds it.
	return redact.String(b.String())
}

// Error lists every problem found in a configuration, so one run of
// `abi-engine config check` reports them all. When the shared-backend check failed too,
// errors.As finds its *LocalBackendsError through Unwrap.
type Error struct {
	// Path is the file the configuration came from, "" when none.
	Path   string
	Issues []Issue

	local *LocalBackendsError
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("invalid configuration")
	if e.Path != "" {
		b.WriteString(" in ")
		b.WriteString(e.Path)
	}
	if len(e.Issues) == 1 {
		b.WriteString(": ")
		b.WriteString(e.Issues[0].String())
		return b.String()
	}
	fmt.Fprintf(&b, ", %d problems:", len(e.Issues))
	for _, is := range e.Issues {
		b.WriteString("\n  ")
		b.WriteString(is.String())
	}
	return b.String()
}

// Unwrap returns the *LocalBackendsError among the issues, if any.
func (e *Error) Unwrap() error {
	if e.local == nil {
		return nil
	}
	return e.local
}

// Key paths, as written in the YAML.
const (
	keyNATSURL         = "nats.url"
	keyEmbeddedListen  = "nats.embedded.listen"
	keyEmbeddedStore   = "nats.embedded.store_dir"
	keyClientTimeout   = "nats.client_timeout_seconds"
	keyMaxConcurrent   = "nats.max_concurrent_requests"
	keyConnectTimeout  = "nats.connect_timeout_seconds"
	keyRole            = "nats.engine.role"
	keyRolloutID       = "nats.engine.rollout_id"
	keyLeaseSeconds    = "nats.engine.lease_seconds"
	keyStandbyTimeout  = "nats.engine.standby_timeout_seconds"
	keyDrainSeconds    = "nats.engine.drain_seconds"
	keyLeaseReplicas   = "nats.engine.lease_replicas"
	keyStandby         = "nats.engine.standby"
	keyJSDomain        = "nats.jetstream.domain"
	keyKVAdapter       = "services.keyvalue.adapter"
	keyKVPath          = "services.keyvalue.path"
	keyKVBucket        = "services.keyvalue.bucket"
	keyKVReplicas      = "services.keyvalue.replicas"
	keyKVDSN           = "services.keyvalue.dsn"
	keyKVTable         = "services.keyvalue.table"
	keyObjAdapter      = "services.object_storage.adapter"
	keyObjRoot         = "services.object_storage.root"
	keyObjBucket       = "services.object_storage.bucket"
	keyObjReplicas     = "services.object_storage.replicas"
	keyHTTPListen      = "http.listen"
	keyHTTPPprof       = "http.pprof"
	keyTLSCA           = "nats.tls.ca_file"
	keyTLSCert         = "nats.tls.cert_file"
	keyTLSKey          = "nats.tls.key_file"
	keyNKeySeed        = "nats.nkey_seed_file"
	keyTokenFile       = "nats.token_file"
	keyUser            = "nats.user"
	keyPasswordFile    = "nats.password_file"
	keyJWTSecretFile   = "nats.jwt_secret_file"
	keyLimitsMemory    = "limits.memory_mib"
	keyLimitsClient    = "limits.client_memory_mib"
	keyLimitsSession   = "limits.session_memory_mib"
	keyLimitsRequest   = "limits.request_upload_mib"
	keyLimitsSessions  = "limits.sessions"
	keyLimitsClientSes = "limits.client_sessions"
	keyLimitsIdle      = "limits.session_idle_seconds"
	keyLimitsMax       = "limits.session_max_seconds"
	keyLogLevel        = "log.level"
	keyLogFormat       = "log.format"
	ruleRole           = "must be serve, client or auto"
	ruleRolloutID      = "must match ^([A-Za-z0-9_][A-Za-z0-9_.:-]{0,127})?$: empty, or up to 128 letters, digits, '_', '.', ':' and '-' not starting with '.', ':' or '-'"
	ruleLeaseSeconds   = "must be a finite number of seconds from 1 to 300"
	rulePositiveSecs   = "must be a finite number of seconds greater than 0"
	ruleDrainSeconds   = "must be a finite number of seconds, 0 or more (0 closes sessions at once)"
	ruleLeaseReplicas  = "must be a whole number from 1 to 5"
	ruleStandby        = "must be off or hot"
	ruleJSDomain       = `must be "" (the JetStream of the server the engine is connected to) or a JetStream domain name: letters, digits, '_' and '-'`
	ruleReplicas       = "must be a whole number from 1 to 5 (leave it out to take nats.engine.lease_replicas)"
	ruleMaxConcurrent  = "must be a whole number from 1 to 4096"
	ruleKVAdapter      = "must be memory, bbolt, jetstream or postgres"
	ruleObjAdapter     = "must be memory, fs or jetstream"
	ruleLogLevel       = "must be debug, info, warn or error"
	ruleLogFormat      = "must be json, console or auto"
	ruleHTTPListen     = `must be "" (HTTP off) or host:port with a port from 0 to 65535`
	ruleHTTPPprof      = `needs http.listen: the profiles are served on the HTTP server, which "" turns off`
	ruleEmbeddedListen = "must be host:port with a port from 0 to 65535"
	ruleStoreDir       = "must not be empty: the embedded server keeps its JetStream store there"
	ruleBucket         = "must be a JetStream bucket name: one or more letters, digits, '_' or '-'"
	ruleTable          = "must be a PostgreSQL table name: lowercase letters, digits and '_', not starting with a digit, at most 63 characters"
)

var (
	rolloutIDPattern = regexp.MustCompile(`^([A-Za-z0-9_][A-Za-z0-9_.:-]{0,127})?$`)
	bucketPattern    = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	// The postgres backend creates the table in the connection's search path and quotes
	// nothing, so only names that need no quoting are accepted.
	tablePattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)
)

// Validate checks every rule of the package documentation and then the shared-backend
// check (CheckSharedBackends). It returns nil or an *Error listing every problem.
func (c *Config) Validate() error {
	return c.result(c.check(nil))
}

// result turns a list of issues into nil or an *Error, adding the shared-backend check
// when the keys it depends on are themselves valid.
func (c *Config) result(issues []Issue) error {
	var local *LocalBackendsError
	if !touchesSharedCheck(issues) {
		if local = c.localBackendsError(); local != nil {
			key, val := keyRolloutID, strconv.Quote(c.NATS.Engine.RolloutID)
			if c.NATS.Engine.RolloutID == "" {
				key, val = keyStandby, strconv.Quote(string(StandbyHot))
			}
			issues = append(issues, c.issue(key, val, local.reason()))
		}
	}
	if len(issues) == 0 {
		return nil
	}
	// Problems in the file come first, in the order of their lines; the others (from the
	// environment, flags, defaults) keep the order of the keys.
	slices.SortStableFunc(issues, func(a, b Issue) int {
		return cmp.Compare(lineOrder(a.Line), lineOrder(b.Line))
	})
	return &Error{Path: c.path, Issues: issues, local: local}
}

// touchesSharedCheck reports whether an issue concerns a key the shared-backend check
// reads; a verdict about backends that are themselves misconfigured would only confuse.
func touchesSharedCheck(issues []Issue) bool {
	for _, is := range issues {
		switch {
		case is.Key == "", is.Key == keyRole, is.Key == keyRolloutID, is.Key == keyNATSURL,
			is.Key == "nats", is.Key == "nats.engine", is.Key == "nats.embedded", is.Key == keyEmbeddedStore,
			strings.HasPrefix(is.Key, "services"):
			return true
		}
	}
	return false
}

// check appends the field rules' issues to issues.
func (c *Config) check(issues []Issue) []Issue {
	bad := func(key, value, rule string) {
		issues = append(issues, c.issue(key, value, rule))
	}
	q := strconv.Quote

	n := c.NATS
	if rule := natsURLRule(n.URL); rule != "" {
		bad(keyNATSURL, q(redact.URLList(n.URL)), rule)
	}
	if !validListen(n.Embedded.Listen) {
		bad(keyEmbeddedListen, q(n.Embedded.Listen), ruleEmbeddedListen)
	}
	if strings.TrimSpace(n.Embedded.StoreDir) == "" {
		bad(keyEmbeddedStore, q(n.Embedded.StoreDir), ruleStoreDir)
	}
	if !finite(n.ClientTimeoutSeconds) || n.ClientTimeoutSeconds <= 0 {
		bad(keyClientTimeout, num(n.ClientTimeoutSeconds), rulePositiveSecs)
	}
	if n.MaxConcurrentRequests < 1 || n.MaxConcurrentRequests > 4096 {
		bad(keyMaxConcurrent, strconv.Itoa(n.MaxConcurrentRequests), ruleMaxConcurrent)
	}
	if !finite(n.ConnectTimeoutSeconds) || n.ConnectTimeoutSeconds <= 0 {
		bad(keyConnectTimeout, num(n.ConnectTimeoutSeconds), rulePositiveSecs)
	}
	if d := n.JetStream.Domain; d != "" && !bucketPattern.MatchString(d) {
		// A domain is one subject token of $JS.<domain>.API: no dot, space or wildcard.
		bad(keyJSDomain, q(d), ruleJSDomain)
	}
	issues = c.checkDiscovery(issues)

	e := n.Engine
	switch e.Role {
	case RoleServe, RoleClient, RoleAuto:
	default:
		bad(keyRole, q(string(e.Role)), ruleRole)
	}
	if !rolloutIDPattern.MatchString(e.RolloutID) {
		bad(keyRolloutID, q(e.RolloutID), ruleRolloutID)
	}
	if !finite(e.LeaseSeconds) || e.LeaseSeconds < 1 || e.LeaseSeconds > 300 {
		bad(keyLeaseSeconds, num(e.LeaseSeconds), ruleLeaseSeconds)
	}
	if !finite(e.StandbyTimeoutSeconds) || e.StandbyTimeoutSeconds <= 0 {
		bad(keyStandbyTimeout, num(e.StandbyTimeoutSeconds), rulePositiveSecs)
	}
	if !finite(e.DrainSeconds) || e.DrainSeconds < 0 {
		bad(keyDrainSeconds, num(e.DrainSeconds), ruleDrainSeconds)
	}
	if e.LeaseReplicas < 1 || e.LeaseReplicas > 5 {
		bad(keyLeaseReplicas, strconv.Itoa(e.LeaseReplicas), ruleLeaseReplicas)
	}
	if e.Standby != StandbyOff && e.Standby != StandbyHot {
		bad(keyStandby, q(string(e.Standby)), ruleStandby)
	}

	issues = c.checkAuth(issues)
	issues = c.checkKeyValue(issues)
	issues = c.checkObjectStorage(issues)
	issues = c.checkLimits(issues)

	if c.HTTP.Listen != "" && !validListen(c.HTTP.Listen) {
		bad(keyHTTPListen, q(c.HTTP.Listen), ruleHTTPListen)
	}
	if c.HTTP.Pprof && c.HTTP.Listen == "" {
		bad(keyHTTPPprof, "true", ruleHTTPPprof)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad(keyLogLevel, q(c.Log.Level), ruleLogLevel)
	}
	switch c.Log.Format {
	case "json", "console", LogFormatAuto:
	default:
		bad(keyLogFormat, q(c.Log.Format), ruleLogFormat)
	}
	return c.checkTelemetry(issues)
}

// option is one adapter option: its key, value, the adapter that reads it, and the rule
// its value must meet when that adapter is chosen ("" when it is valid). A number's
// value is shown as it is, a string's quoted.
type option struct {
	key, value, adapter string
	rule                func(string) string
	number              bool
}

func (o option) shown() string {
	if o.number {
		return o.value
	}
	return strconv.Quote(o.value)
}

// checkOptions applies the rule of each option of the chosen adapter, and refuses an
// option the file sets for another adapter (its origin is the file, not a default).
func (c *Config) checkOptions(issues []Issue, adapterKey, adapter string, opts []option) []Issue {
	for _, o := range opts {
		if o.adapter != adapter {
			if c.fromFile(o.key) {
				issues = append(issues, c.issue(o.key, o.shown(),
					fmt.Sprintf("only the %s adapter reads it, and %s is %q: remove it or change the adapter", o.adapter, adapterKey, adapter)))
			}
			continue
		}
		if rule := o.rule(o.value); rule != "" {
			issues = append(issues, c.issue(o.key, o.shown(), rule))
		}
	}
	return issues
}

func (c *Config) checkKeyValue(issues []Issue) []Issue {
	kv := c.Services.KeyValue
	switch kv.Adapter {
	case KeyValueMemory, KeyValueBolt, KeyValueJetStream, KeyValuePostgres:
	default:
		issues = append(issues, c.issue(keyKVAdapter, strconv.Quote(string(kv.Adapter)), ruleKVAdapter))
		return issues
	}
	return c.checkOptions(issues, keyKVAdapter, string(kv.Adapter), []option{
		{keyKVPath, kv.Path, string(KeyValueBolt), notEmpty("the bbolt database file"), false},
		{keyKVBucket, kv.Bucket, string(KeyValueJetStream), func(v string) string {
			if !bucketPattern.MatchString(v) {
				return ruleBucket
			}
			if v == leaseBucket {
				return "must not be " + leaseBucket + ", the bucket of the engine lease"
			}
			return ""
		}, false},
		{keyKVReplicas, strconv.Itoa(kv.Replicas), string(KeyValueJetStream), c.replicasRule(keyKVReplicas), true},
		{keyKVDSN, kv.DSN, string(KeyValuePostgres), func(v string) string {
			if strings.TrimSpace(v) == "" {
				return "is required by the postgres adapter: the PostgreSQL connection string, postgres://user@host:5432/db or key=value form"
			}
			return ""
		}, false},
		{keyKVTable, kv.Table, string(KeyValuePostgres), match(tablePattern, ruleTable), false},
	})
}

func (c *Config) checkObjectStorage(issues []Issue) []Issue {
	obj := c.Services.ObjectStorage
	switch obj.Adapter {
	case ObjectStorageMemory, ObjectStorageFS, ObjectStorageJetStream:
	default:
		issues = append(issues, c.issue(keyObjAdapter, strconv.Quote(string(obj.Adapter)), ruleObjAdapter))
		return issues
	}
	return c.checkOptions(issues, keyObjAdapter, string(obj.Adapter), []option{
		{keyObjRoot, obj.Root, string(ObjectStorageFS), notEmpty("the directory objects are stored under"), false},
		{keyObjBucket, obj.Bucket, string(ObjectStorageJetStream), match(bucketPattern, ruleBucket), false},
		{keyObjReplicas, strconv.Itoa(obj.Replicas), string(ObjectStorageJetStream), c.replicasRule(keyObjReplicas), true},
	})
}

// replicasRule checks a service's replicas: unset (0 by default) takes the lease's;
// set, it must be 1 to 5, JetStream's limit.
func (c *Config) replicasRule(key string) func(string) string {
	return func(v string) string {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			return ruleReplicas
		case n == 0 && !c.fromFile(key):
			return ""
		case n < 1 || n > 5:
			return ruleReplicas
		}
		return ""
	}
}

func notEmpty(what string) func(string) string {
	return func(v string) string {
		if strings.TrimSpace(v) == "" {
			return "must not be empty: " + what
		}
		return ""
	}
}

func match(re *regexp.Regexp, rule string) func(string) string {
	return func(v string) string {
		if !re.MatchString(v) {
			return rule
		}
		return ""
	}
}

func lineOrder(line int) int {
	if line == 0 {
		return math.MaxInt
	}
	return line
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// validListen accepts host:port with a numeric port 0..65535 and a host without spaces
// (empty host = every interface).
func validListen(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || strings.ContainsAny(host, " \t\r\n") {
		return false
	}
	p, err := strconv.Atoi(port)
	return err == nil && p >= 0 && p <= 65535 && port == strconv.Itoa(p)
}

var natsSchemes = map[string]bool{"nats": true, "tls": true, "ws": true, "wss": true}

// showPart quotes an element of the list s that is not a URL, its user info masked.
// An element with no @ in a list with one may be the first half of a password a comma
// cut in two (nats.go splits the list at commas): all of it after the scheme is masked.
func showPart(s, part string) string {
	if !strings.Contains(part, "@") && strings.Contains(s, "@") {
		scheme, _, ok := strings.Cut(part, "://")
		if !ok {
			return quote(redact.Mask)
		}
		return quote(scheme + "://" + redact.Mask)
	}
	return quote(redact.URLList(part))
}

// withScheme is an element of nats.url with nats:// before it when it has no scheme,
// as nats.go and the NATS tools read host:port.
func withScheme(part string) string {
	if part == "" || strings.Contains(part, "://") {
		return part
	}
	return "nats://" + part
}

// withNATSSchemes is nats.url with nats:// before every element that has none, so that
// everything reading it later (the log, status, doctor) sees the URL nats.go dials.
func withNATSSchemes(s string) string {
	parts := strings.Split(s, ",")
	changed := false
	for i, part := range parts {
		if p := strings.TrimSpace(part); p != "" && !strings.Contains(p, "://") {
			parts[i], changed = withScheme(p), true
		}
	}
	if !changed {
		return s
	}
	return strings.Join(parts, ",")
}

// natsURLRule returns "" when s is a valid nats.url, else the rule naming the first
// element that breaks it.
func natsURLRule(s string) string {
	if s == "" {
		return ""
	}
	const rule = `must be "" (embedded server) or a comma-separated list of nats://, tls://, ws:// or wss:// URLs with a host`
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return rule + "; the list has an empty element"
		}
		u, err := url.Parse(withScheme(part))
		if err != nil || !natsSchemes[strings.ToLower(u.Scheme)] || u.Hostname() == "" {
			return fmt.Sprintf("%s; %s is not one", rule, showPart(s, part))
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return fmt.Sprintf("%s; %s has a port outside 1..65535", rule, showPart(s, part))
			}
		}
	}
	return ""
}
