package config

import (
	"regexp"
	"strconv"
	"time"
)

// Discovery is the nats.discovery block: the module registry the serving engine hosts
// (docs/discovery.md). Absent (nil) means off, as in the Python engine; present, even
// empty, means on with the defaults below.
type Discovery struct {
	// Project names the registry: its subjects abi.discovery.<project>.v1.<operation>
	// and its bucket ABI_DISCOVERY_<project>. Default "default".
	Project string `yaml:"project"`
	// LeaseSeconds is a module instance's membership lease: a register or renew keeps
	// it for this long. Default 20, from 1 to 300.
	LeaseSeconds float64 `yaml:"lease_seconds"`
}

// Discovery defaults, the Python engine's.
const (
	DefaultDiscoveryProject      = "default"
	DefaultDiscoveryLeaseSeconds = 20
)

// discoveryProjectPattern is the Python engine's rule for a project name; it keeps the
// project a single subject token and a valid bucket name.
var discoveryProjectPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidDiscoveryProject reports whether project may name a discovery registry.
func ValidDiscoveryProject(project string) bool { return discoveryProjectPattern.MatchString(project) }

// UnmarshalYAML fills the defaults before the keys that are set, so `discovery: {}`
// turns discovery on with them.
func (d *Discovery) UnmarshalYAML(unmarshal func(any) error) error {
	type plain Discovery
	v := plain{Project: DefaultDiscoveryProject, LeaseSeconds: DefaultDiscoveryLeaseSeconds}
	if err := unmarshal(&v); err != nil {
		return err
	}
	*d = Discovery(v)
	return nil
}

// Lease is LeaseSeconds as a duration.
func (d Discovery) Lease() time.Duration { return seconds(d.LeaseSeconds) }

const (
	keyDiscoveryProject = "nats.discovery.project"
	keyDiscoveryLease   = "nats.discovery.lease_seconds"

	ruleDiscoveryProject = "must be 1 to 64 letters, digits, '_' or '-'"
	ruleDiscoveryLease   = "must be a finite number of seconds from 1 to 300"
)

// checkDiscovery appends the issues of the nats.discovery block, if it is set.
func (c *Config) checkDiscovery(issues []Issue) []Issue {
	d := c.NATS.Discovery
	if d == nil {
		return issues
	}
	if !ValidDiscoveryProject(d.Project) {
		issues = append(issues, c.issue(keyDiscoveryProject, strconv.Quote(d.Project), ruleDiscoveryProject))
	}
	if !finite(d.LeaseSeconds) || d.LeaseSeconds < 1 || d.LeaseSeconds > 300 {
		issues = append(issues, c.issue(keyDiscoveryLease, num(d.LeaseSeconds), ruleDiscoveryLease))
	}
	return issues
}
