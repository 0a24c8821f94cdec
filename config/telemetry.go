package config

import (
	"math"
	"net/url"
	"strconv"
	"strings"
)

// Telemetry is the telemetry block: OpenTelemetry traces, exported over OTLP/HTTP. It
// is off by default (no endpoint); the engine still continues a caller's trace context
// into its replies' spans only when it exports them.
type Telemetry struct {
	// OTLPEndpoint is host:port, or an http(s):// URL, of an OTLP/HTTP collector
	// (port 4318 by convention); "" turns tracing off.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// OTLPInsecure sends to a host:port endpoint over plain HTTP instead of HTTPS.
	OTLPInsecure bool `yaml:"otlp_insecure"`
	// SampleRatio is the share of the traces started here that are recorded, 0 to 1;
	// a caller's sampling decision wins for the traces it started.
	SampleRatio float64 `yaml:"sample_ratio"`
	// ServiceName is the service.name of the spans.
	ServiceName string `yaml:"service_name"`
}

// Tracing reports whether the engine exports traces.
func (t Telemetry) Tracing() bool { return t.OTLPEndpoint != "" }

const (
	keyTelemetryEndpoint = "telemetry.otlp_endpoint"
	keyTelemetrySample   = "telemetry.sample_ratio"
	keyTelemetryService  = "telemetry.service_name"
	ruleOTLPEndpoint     = `must be "" (tracing off), host:port or an http:// or https:// URL of an OTLP/HTTP collector`
	ruleSampleRatio      = "must be a number from 0 to 1"
	ruleServiceName      = "must not be empty"
)

func defaultTelemetry() Telemetry { return Telemetry{SampleRatio: 1, ServiceName: "abi-engine"} }

// checkTelemetry checks the telemetry block.
func (c *Config) checkTelemetry(issues []Issue) []Issue {
	t := c.Telemetry
	if t.OTLPEndpoint != "" && !validEndpoint(t.OTLPEndpoint) {
		issues = append(issues, c.issue(keyTelemetryEndpoint, strconv.Quote(t.OTLPEndpoint), ruleOTLPEndpoint))
	}
	if math.IsNaN(t.SampleRatio) || t.SampleRatio < 0 || t.SampleRatio > 1 {
		issues = append(issues, c.issue(keyTelemetrySample, strconv.FormatFloat(t.SampleRatio, 'g', -1, 64), ruleSampleRatio))
	}
	if strings.TrimSpace(t.ServiceName) == "" {
		issues = append(issues, c.issue(keyTelemetryService, strconv.Quote(t.ServiceName), ruleServiceName))
	}
	return issues
}

func validEndpoint(s string) bool {
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		u, err := url.Parse(s)
		return err == nil && u.Host != ""
	}
	return validListen(s)
}
