package supervisor

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/nats-io/nats.go"
)

// ErrTLSRefused is a TLS handshake that failed on a certificate: the broker refused
// the client's (or wanted one and got none), or the client did not trust the broker's.
// No retry changes a certificate, so the first connection gives up at once on it.
var ErrTLSRefused = errors.New("TLS handshake refused")

// tlsRefusal returns err marked with ErrTLSRefused and what to check in the
// configuration when err is a certificate refusal; any other err, nil included, is
// returned as it is. A handshake that timed out or lost its connection is not a
// refusal: the broker may simply be slow or restarting.
func tlsRefusal(err error) error {
	if err == nil {
		return nil
	}
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		op       *net.OpError
	)
	var why string
	switch {
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &invalid):
		why = "the client does not trust the broker's certificate (nats.tls.ca_file)"
	case errors.As(err, &op) && op.Op == "remote error":
		// crypto/tls reports an alert the broker sent as a "remote error": under TLS
		// 1.3 the broker checks the client's certificate after the client has
		// finished its handshake, so this comes from the first read.
		why = "the broker refused the client certificate (nats.tls.cert_file, nats.tls.key_file) or the TLS settings"
	case errors.Is(err, nats.ErrTLS) && (errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)):
		// nats.go's words for a broker that hung up right after the handshake, which
		// is how nats-server refuses a missing or unverifiable client certificate
		// when its alert does not arrive first.
		why = "the broker closed the connection after the TLS handshake: it refused the client certificate (nats.tls.cert_file), or none was given"
	default:
		return err
	}
	return fmt.Errorf("%w: %s: %w", ErrTLSRefused, why, err)
}
