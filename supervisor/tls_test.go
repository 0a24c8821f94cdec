package supervisor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testpki"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// TestDialGivesUpAtOnceOnARefusedCertificate: a TLS handshake that fails on a
// certificate (the broker refuses the client's, or has none to check; the client
// refuses the broker's) ends the first connection at its first attempt, naming the
// certificate, instead of being retried until nats.connect_timeout_seconds.
func TestDialGivesUpAtOnceOnARefusedCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, err := testpki.NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	other, err := testpki.NewCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srvPair, err := ca.Server("broker")
	if err != nil {
		t.Fatal(err)
	}
	strange, err := other.Client("stranger")
	if err != nil {
		t.Fatal(err)
	}
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: srvPair.CertFile, KeyFile: srvPair.KeyFile, CaFile: ca.CertFile, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t, func(o *server.Options) { o.TLSConfig, o.TLS, o.TLSVerify = tc, true, true })
	url := "tls://" + srv.Addr()
	cases := []struct {
		name string
		opts []nats.Option
	}{
		{"no client certificate", []nats.Option{nats.RootCAs(ca.CertFile)}},
		{"a client certificate of another CA", []nats.Option{nats.RootCAs(ca.CertFile), nats.ClientCert(strange.CertFile, strange.KeyFile)}},
		{"a broker certificate the client does not trust", []nats.Option{nats.RootCAs(other.CertFile), nats.ClientCert(strange.CertFile, strange.KeyFile)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A bound far longer than the test: only giving up at once passes.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := Dial(ctx, ConnConfig{URL: url, Name: "test", Options: tc.opts, ConnectTimeout: time.Hour}, zap.NewNop())
			var ce *ConnectError
			if !errors.As(err, &ce) || ce.Ended != nil {
				t.Fatalf("Dial = %v, want a *ConnectError given up before any deadline", err)
			}
			if !errors.Is(err, ErrTLSRefused) || !strings.Contains(err.Error(), "certificate") {
				t.Fatalf("Dial = %v, want ErrTLSRefused naming the certificate", err)
			}
		})
	}
}
