package config

import (
	"fmt"
	"net"
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
