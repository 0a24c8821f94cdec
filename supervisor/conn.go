package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/abi-engine/engine/internal/redact"
	"github.com/nats-io/nats.go"
	"github.com/thejerf/suture/v4"
	"go.uber.org/zap"
)

// ConnConfig describes one NATS connection of the engine.
type ConnConfig struct {
	URL         string // comma-separated list
	Name        string // shown by the server, e.g. "abi-engine-ownership@<host>"
	Credentials string // .creds file, optional
	// Options are more nats.go options: the login and TLS (internal/natsauth).
	Options []nats.Option
	// OnAsyncError, when set, hears every asynchronous error of the connection (a
	// slow consumer, a permissions violation) after it is logged; sub may be nil.
	OnAsyncError func(sub *nats.Subscription, err error)
	Timeout      time.Duration
	// ConnectTimeout bounds the first connection: Dial gives up once it has tried this
	// long (0: until ctx ends).
	ConnectTimeout time.Duration
}

// retryWait is the pause between two attempts of the first connection.
const retryWait = 500 * time.Millisecond

// ConnectError is a first connection that did not succeed: the address tried and the
// reason of its last attempt. errors.Is finds in it the reason (nats.ErrAuthorization,
// fs.ErrNotExist for a missing credentials file, nats.ErrNoServers for a refused TCP
// connection) and, when Dial gave up on time or was cancelled, the context's error.
type ConnectError struct {
	URL    string
	Reason error
	// Tried is how long Dial tried.
	Tried time.Duration
	// Ended is the context's error when Dial stopped trying because of it; nil when the
	// reason was one no retry changes.
	Ended error
}

func (e *ConnectError) Error() string {
	msg := fmt.Sprintf("cannot connect to NATS at %s: %s", redact.String(e.URL), redact.String(describe(e.Reason)))
	switch {
	case errors.Is(e.Ended, context.DeadlineExceeded):
		msg += fmt.Sprintf(" (gave up after %s)", e.Tried.Round(time.Millisecond))
	case e.Ended != nil:
		msg += fmt.Sprintf(" (%v after %s)", e.Ended, e.Tried.Round(time.Millisecond))
	}
	return msg
}

func (e *ConnectError) Unwrap() []error {
	if e.Ended == nil {
		return []error{e.Reason}
	}
	return []error{e.Reason, e.Ended}
}

// describe says what a failed attempt means, in the words of nats.go where they are
// clear: it reports a refused TCP connection as "no servers available".
func describe(err error) string {
	if errors.Is(err, nats.ErrNoServers) {
		return "connection refused (nothing accepts connections at that address)"
	}
	return err.Error()
}

// permanent reports an attempt that no retry can turn into a connection: the server
// refused the credentials or a certificate (tlsRefusal), or the credentials file
// cannot be read.
func permanent(err error) bool {
	var pathErr *fs.PathError
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.As(err, &pathErr) || errors.Is(err, ErrTLSRefused)
}

// Dial connects to NATS. The first connection is tried until cfg.ConnectTimeout has
// passed or ctx ends, and at once given up on a reason no retry changes (the server
// refused the credentials, the credentials file cannot be read): the error is a
// *ConnectError naming the address and the reason. Once connected, the connection
// reconnects for ever: a broker that goes away is the lease's business (it fences),
// not a reason to give up.
func Dial(ctx context.Context, cfg ConnConfig, log *zap.Logger) (*nats.Conn, error) {
	log = log.With(zap.String("connection", cfg.Name))
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.PingInterval(5 * time.Second),
		nats.MaxPingsOutstanding(2),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil {
				// nats.go reports its own Close as a disconnection without an error: the
				// engine closed the connection, which is nothing to warn about.
				log.Debug("nats connection closed")
				return
			}
			log.Warn("nats disconnected", zap.Error(err))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", zap.String("url", redact.String(nc.ConnectedUrl())))
		}),
		// Without it nats.go writes asynchronous errors (a slow consumer, a permissions
		// violation) as bare lines to standard error, in the middle of the JSON log.
		// micro's AddService chains the handler it finds, so services keep it.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			fields := []zap.Field{zap.Error(err)}
			if sub != nil {
				fields = append(fields, zap.String("subject", sub.Subject))
			}
			log.Warn("nats: asynchronous error", fields...)
			if cfg.OnAsyncError != nil {
				cfg.OnAsyncError(sub, err)
			}
		}),
	}
	if cfg.Credentials != "" {
		opts = append(opts, nats.UserCredentials(cfg.Credentials))
	}
	opts = append(opts, cfg.Options...)
	start := time.Now()
	if cfg.ConnectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.ConnectTimeout)
		defer cancel()
	}
	for {
		attempt := opts
		// An attempt never outlasts the bound: nats.go's own dial timeout is 2 s, and
		// the configured one may be longer.
		if t := attemptTimeout(ctx, cfg.Timeout); t > 0 {
			attempt = append(attempt[:len(attempt):len(attempt)], nats.Timeout(t))
		}
		nc, err := nats.Connect(cfg.URL, attempt...)
		if err == nil {
			return nc, nil
		}
		err = tlsRefusal(err)
		if permanent(err) {
			return nil, &ConnectError{URL: cfg.URL, Reason: err, Tried: time.Since(start)}
		}
		log.Warn("cannot connect to nats; retrying", zap.String("url", redact.String(cfg.URL)), zap.String("error", redact.String(describe(err))))
		select {
		case <-ctx.Done():
			return nil, &ConnectError{URL: cfg.URL, Reason: err, Tried: time.Since(start), Ended: ctx.Err()}
		case <-time.After(retryWait):
		}
	}
}

// attemptTimeout is the dial timeout of one attempt: the configured one, cut to what is
// left of ctx.
func attemptTimeout(ctx context.Context, configured time.Duration) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return configured
	}
	left := time.Until(dl)
	if left <= 0 {
		left = time.Millisecond
	}
	if configured > 0 && configured < left {
		return configured
	}
	return left
}

// Probe tries one connection to cfg.URL, the way an engine with no URL looks for a
// NATS server on this host: true when a server answered, false when nothing accepts
// connections at the address, and a *ConnectError when something there would not take
// us (the credentials, TLS) or did not answer in time.
func Probe(ctx context.Context, cfg ConnConfig) (bool, error) {
	if cfg.ConnectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.ConnectTimeout)
		defer cancel()
	}
	opts := []nats.Option{nats.Name(cfg.Name), nats.NoReconnect()}
	if t := attemptTimeout(ctx, cfg.Timeout); t > 0 {
		opts = append(opts, nats.Timeout(t))
	}
	if cfg.Credentials != "" {
		opts = append(opts, nats.UserCredentials(cfg.Credentials))
	}
	opts = append(opts, cfg.Options...)
	start := time.Now()
	nc, err := nats.Connect(cfg.URL, opts...)
	err = tlsRefusal(err)
	switch {
	case err == nil:
		nc.Close()
		return true, nil
	case errors.Is(err, nats.ErrNoServers):
		return false, nil
	}
	return false, &ConnectError{URL: cfg.URL, Reason: err, Tried: time.Since(start)}
}

// Conn is a NATS connection as a suture service, so the tree that holds it owns it.
// Dial makes the connection (its errors belong to whoever asked for it); the tree then
// holds it until its Serve's ctx ends, and Serve returns only once it is closed,
// flushed first (up to Flush) so that what was published leaves. nats.go reconnects a
// connection by itself: a connection closed from elsewhere ends the service, which has
// nothing to restart.
type Conn struct {
	name   string
	nc     *nats.Conn
	flush  time.Duration
	closed chan struct{}
}

// NewConn puts nc under the service; name says what it is for ("lease", "service").
func NewConn(name string, nc *nats.Conn, flush time.Duration) *Conn {
	c := &Conn{name: name, nc: nc, flush: flush, closed: make(chan struct{})}
	var once sync.Once
	nc.SetClosedHandler(func(*nats.Conn) { once.Do(func() { close(c.closed) }) })
	return c
}

func (c *Conn) String() string { return "nats " + c.name }

// Serve implements suture.Service.
func (c *Conn) Serve(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-c.closed:
		return fmt.Errorf("supervisor: the %s connection was closed: %w", c.name, suture.ErrDoNotRestart)
	}
	if c.flush > 0 {
		_ = c.nc.FlushTimeout(c.flush) // a connection that is away has nothing to flush
	}
	c.nc.Close()
	return ctx.Err()
}
