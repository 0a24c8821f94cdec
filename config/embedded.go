package config

import (
	"fmt"
	"net"
	"strconv"
	"time"
)

// EmbeddedURL is where the embedded broker listening on nats.embedded.listen is reached
// from this host: the URL a client, an auto engine, `abi-engine status` and `call` look
// for a NATS server at when nats.url is empty. An address on every interface is reached
// on 127.0.0.1. Port 0 (the embedded broker picks one) names no address to look at.
func (n NATS) EmbeddedURL() (string, error) {
	host, port, err := net.SplitHostPort(n.Embedded.Listen)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", keyEmbeddedListen, n.Embedded.Listen, err)
	}
	if port == "0" {
		return "", fmt.Errorf("%s is empty and %s %s lets the embedded broker pick a random port: "+
			"there is no address to look for a NATS server at; set %s (or %s)", keyNATSURL, keyEmbeddedListen, n.Embedded.Listen, keyNATSURL, EnvNATSURL)
	}
	switch host {
	case "", "0.0.0.0", "::":
		host = "127.0.0.1"
	}
	return "nats://" + net.JoinHostPort(host, port), nil
}

const (
	keyEmbeddedPing       = "nats.embedded.ping_interval_seconds"
	keyEmbeddedPingMax    = "nats.embedded.ping_max"
	keyEmbeddedSync       = "nats.embedded.sync_interval_seconds"
	keyEmbeddedSyncAlways = "nats.embedded.sync_always"
	keyEmbeddedHTTP       = "nats.embedded.http_listen"
	ruleEmbeddedSecs      = "must be a finite number of seconds, 0 or more (0: nats-server's default, 2 minutes)"
	ruleEmbeddedPingMax   = "must be a whole number from 0 to 100 (0: nats-server's default, 2)"
	ruleEmbeddedHTTP      = `must be "" (no monitoring) or host:port with a port from 0 to 65535`
	ruleEmbeddedSyncBoth  = "cannot be set together with nats.embedded.sync_always: true (every write is synced); set one"
)

// checkEmbedded checks the embedded broker's settings.
func (c *Config) checkEmbedded(issues []Issue) []Issue {
	e := c.NATS.Embedded
	bad := func(key, value, rule string) { issues = append(issues, c.issue(key, value, rule)) }
	if !finite(e.PingIntervalSeconds) || e.PingIntervalSeconds < 0 {
		bad(keyEmbeddedPing, num(e.PingIntervalSeconds), ruleEmbeddedSecs)
	}
	if e.PingMax < 0 || e.PingMax > 100 {
		bad(keyEmbeddedPingMax, strconv.Itoa(e.PingMax), ruleEmbeddedPingMax)
	}
	if !finite(e.SyncIntervalSeconds) || e.SyncIntervalSeconds < 0 {
		bad(keyEmbeddedSync, num(e.SyncIntervalSeconds), ruleEmbeddedSecs)
	} else if e.SyncAlways && e.SyncIntervalSeconds > 0 {
		bad(keyEmbeddedSync, num(e.SyncIntervalSeconds), ruleEmbeddedSyncBoth)
	}
	if e.HTTPListen != "" && !validListen(e.HTTPListen) {
		bad(keyEmbeddedHTTP, strconv.Quote(e.HTTPListen), ruleEmbeddedHTTP)
	}
	return issues
}

// EmbeddedMonitorURL is where the embedded broker's HTTP monitoring
// (nats.embedded.http_listen) is reached from this host; "" when it serves none or its
// port is 0 (picked at start, so no address to look at). An address on every
// interface is reached on 127.0.0.1.
func (n NATS) EmbeddedMonitorURL() string {
	host, port, err := net.SplitHostPort(n.Embedded.HTTPListen)
	if err != nil || port == "0" {
		return ""
	}
	switch host {
	case "", "0.0.0.0", "::":
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// PingInterval is nats.embedded.ping_interval_seconds, 0 for nats-server's default.
func (e Embedded) PingInterval() time.Duration { return seconds(e.PingIntervalSeconds) }

// SyncInterval is nats.embedded.sync_interval_seconds, 0 for nats-server's default.
func (e Embedded) SyncInterval() time.Duration { return seconds(e.SyncIntervalSeconds) }
