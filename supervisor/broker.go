package supervisor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/zap"
)

// Broker is an embedded nats-server with JetStream, the development default when no
// NATS URL is configured. Its data lives in StoreDir, so it is local storage. It holds
// the store directory's lock (storelock.go) from before its nats-server starts until
// it stops for good, so no second broker ever opens the same files.
type Broker struct {
	listen   string
	storeDir string
	auth     BrokerAuth
	log      *zap.Logger

	mu       sync.Mutex
	settings BrokerSettings // set by Configure, read by each Serve
	lock     *StoreLock     // held across restarts; let go by a stop (Serve's ctx ends) or Close
	instance string         // who the lock file names
	url      string
	// monitorURL is where the running server serves /varz; "" without HTTPListen.
	monitorURL string
	ready      chan struct{} // closed once the server accepts connections
	err        error         // why it could not start, when ready is closed without a URL
}

// BrokerAuth is the one login the embedded broker requires, the engine's own (its
// nats.token_file, nats.user and password, or nkey), so a development setup rehearses
// production's. The zero value requires none.
type BrokerAuth struct {
	Token, User, Password string
	NKey                  string // a user's public nkey (U...)
}

// NewBroker validates the listen address ("host:port"; port 0 picks a free one). auth,
// when given, is the login the broker requires.
func NewBroker(listen, storeDir string, log *zap.Logger, auth ...BrokerAuth) (*Broker, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("supervisor: embedded broker listen address %q: %w", listen, err)
	}
	if _, err := strconv.Atoi(port); err != nil {
		return nil, fmt.Errorf("supervisor: embedded broker listen address %q: port %q is not a number", listen, port)
	}
	_ = host
	if storeDir == "" {
		return nil, errors.New("supervisor: embedded broker needs a store directory")
	}
	b := &Broker{listen: listen, storeDir: storeDir, log: log.Named("nats-server"), ready: make(chan struct{})}
	for _, a := range auth {
		b.auth = a
	}
	return b, nil
}

func (b *Broker) String() string { return "embedded nats-server" }

// EmbeddedServerName is the embedded server's name, as its INFO and varz give it: how
// doctor knows the broker it checks is an engine's own, whose settings are keys of
// nats.embedded.
const EmbeddedServerName = "abi-engine-embedded"

// BrokerSettings are the embedded server's settings that bear on the lease (what
// `abi-engine doctor` checks of any broker). The zero value keeps nats-server's
// defaults and serves no monitoring.
type BrokerSettings struct {
	// PingInterval and PingMax bound how long a half-open client keeps its
	// subscriptions: PingInterval x (PingMax + 1). 0 for nats-server's.
	PingInterval time.Duration
	PingMax      int
	// SyncInterval is how long an acknowledged JetStream write may sit unsynced (0 for
	// nats-server's); SyncAlways syncs every write before it is acknowledged.
	SyncInterval time.Duration
	SyncAlways   bool
	// HTTPListen is host:port of the server's HTTP monitoring (/varz); "" for none.
	HTTPListen string
}

// Configure sets the server's settings; call it before Serve. A restart keeps them.
func (b *Broker) Configure(s BrokerSettings) error {
	if s.HTTPListen != "" {
		_, port, err := net.SplitHostPort(s.HTTPListen)
		if err != nil {
			return fmt.Errorf("supervisor: embedded broker monitoring address %q: %w", s.HTTPListen, err)
		}
		if _, err := strconv.Atoi(port); err != nil {
			return fmt.Errorf("supervisor: embedded broker monitoring address %q: port %q is not a number", s.HTTPListen, port)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.settings = s
	return nil
}

// MonitorURL is where the running server serves its HTTP monitoring
// (http://host:port), "" when it serves none or has not started.
func (b *Broker) MonitorURL() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.monitorURL
}

// Lock takes the lock of the store directory now, naming instance as its holder, so
// the caller learns that another broker holds it (a *StoreLockedError) before it
// starts this one. Serve takes it when Lock was not called.
func (b *Broker) Lock(instance string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.instance = instance
	return b.lockLocked()
}

func (b *Broker) lockLocked() error {
	if b.lock != nil {
		return nil
	}
	l, err := LockStore(b.storeDir, b.instance)
	if err != nil {
		return err
	}
	b.lock = l
	return nil
}

// Close lets the store directory's lock go, for a broker that will not be served
// again: one stopped while suture waited to restart it, or never served. It must not
// be called while Serve runs.
func (b *Broker) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.unlockLocked()
}

func (b *Broker) unlockLocked() error {
	if b.lock == nil {
		return nil
	}
	err := b.lock.Unlock()
	b.lock = nil
	return err
}

// URL waits until the broker accepts connections and returns its client URL.
func (b *Broker) URL(ctx context.Context) (string, error) {
	select {
	case <-b.ready:
	case <-ctx.Done():
		return "", fmt.Errorf("supervisor: waiting for the embedded broker: %w", ctx.Err())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.url == "" {
		return "", b.err
	}
	return b.url, nil
}

// Serve implements suture.Service: it runs the server until ctx ends. A restart keeps
// the port it first got, so clients reconnect to the same address, and the store
// directory's lock, which a stop lets go once the server has shut down.
func (b *Broker) Serve(ctx context.Context) error {
	host, portStr, _ := net.SplitHostPort(b.listen)
	port, _ := strconv.Atoi(portStr)
	b.mu.Lock()
	if ctx.Err() != nil {
		// Stopped before it started (a tree stopped while the engine loaded).
		err := b.unlockLocked()
		b.mu.Unlock()
		return errors.Join(ctx.Err(), err)
	}
	if err := b.lockLocked(); err != nil {
		b.mu.Unlock()
		return b.fail(fmt.Errorf("supervisor: embedded broker on %s: %w", b.listen, err))
	}
	b.mu.Unlock()
	// Registered first, so it runs after the server's shutdown below: the files are
	// let go before the lock is. A failure keeps the lock for suture's restart.
	defer func() {
		if ctx.Err() != nil {
			b.mu.Lock()
			if err := b.unlockLocked(); err != nil {
				b.log.Warn("letting the store directory's lock go", zap.Error(err))
			}
			b.mu.Unlock()
		}
	}()
	b.mu.Lock()
	if b.url != "" {
		// Restarted by the supervisor: come back where clients reconnect.
		_, p, _ := net.SplitHostPort(b.url[len("nats://"):])
		port, _ = strconv.Atoi(p)
	}
	set := b.settings
	monitorPort := -1 // none
	if set.HTTPListen != "" {
		monitorPort = portOf(set.HTTPListen)
		if b.monitorURL != "" {
			// Restarted: monitoring comes back where it was, as the client port does.
			monitorPort = portOf(b.monitorURL[len("http://"):])
		}
	}
	b.mu.Unlock()
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName: EmbeddedServerName,
		Host:       host,
		Port:       port,
		NoSigs:     true,
		JetStream:  true,
		StoreDir:   b.storeDir,
		// Zero values are nats-server's defaults.
		PingInterval: set.PingInterval,
		MaxPingsOut:  set.PingMax,
		SyncInterval: set.SyncInterval,
		SyncAlways:   set.SyncAlways,
	}
	if set.HTTPListen != "" {
		opts.HTTPHost, _, _ = net.SplitHostPort(set.HTTPListen)
		opts.HTTPPort = monitorPort
		if monitorPort == 0 {
			opts.HTTPPort = server.RANDOM_PORT
		}
	}
	a := b.auth
	opts.Authorization, opts.Username, opts.Password = a.Token, a.User, a.Password
	if a.NKey != "" {
		opts.Nkeys = []*server.NkeyUser{{Nkey: a.NKey}}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return b.fail(fmt.Errorf("supervisor: embedded broker: %w", err))
	}
	// nats-server reports what stops its start (the port in use, a store directory it
	// cannot use) as a fatal log line and then never gets ready: catch it, to report
	// that cause at once rather than a timeout.
	fatal := make(chan string, 1)
	srv.SetLoggerV2(zapServerLogger{s: b.log.Sugar(), fatal: fatal}, false, false, false)
	go srv.Start()
	defer func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	}()
	if err := waitReady(ctx, srv, fatal); err != nil {
		return b.fail(fmt.Errorf("supervisor: embedded broker on %s (store %s): %w", b.listen, b.storeDir, err))
	}
	addr := srv.Addr().(*net.TCPAddr)
	url := fmt.Sprintf("nats://%s", net.JoinHostPort(addr.IP.String(), strconv.Itoa(addr.Port)))
	b.mu.Lock()
	// Recorded before anyone is told the broker is ready, so whoever finds the lock
	// taken from then on finds the broker behind it.
	if err := b.lock.SetURL(url); err != nil {
		// The lock holds without it; an engine that finds it taken cannot name the
		// broker, only the process.
		b.log.Warn("recording the broker's URL in the store directory's lock file", zap.Error(err))
	}
	b.url = url
	if a := srv.MonitorAddr(); a != nil {
		b.monitorURL = "http://" + net.JoinHostPort(a.IP.String(), strconv.Itoa(a.Port))
	}
	b.err = nil
	select {
	case <-b.ready:
	default:
		close(b.ready)
	}
	b.mu.Unlock()
	fields := []zap.Field{zap.String("url", url), zap.String("store_dir", b.storeDir)}
	if b.monitorURL != "" {
		fields = append(fields, zap.String("monitor", b.monitorURL))
	}
	b.log.Info("embedded nats-server ready", fields...)
	<-ctx.Done()
	return ctx.Err()
}

// readyTimeout bounds the start of the embedded broker when it reports nothing.
const readyTimeout = 10 * time.Second

// waitReady waits until srv accepts connections, or reports why it cannot.
func waitReady(ctx context.Context, srv *server.Server, fatal <-chan string) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		select {
		case msg := <-fatal:
			return errors.New(msg)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if srv.ReadyForConnections(20 * time.Millisecond) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("it did not accept connections within %s", readyTimeout)
		}
	}
}

func (b *Broker) fail(err error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.err = err
	if b.url == "" {
		select {
		case <-b.ready:
		default:
			close(b.ready)
		}
	}
	return err
}

// zapServerLogger adapts nats-server's logger to zap. A fatal message is also handed to
// fatal, when it has room: the first one says why the server stops.
type zapServerLogger struct {
	s     *zap.SugaredLogger
	fatal chan<- string
}

func (l zapServerLogger) Noticef(format string, v ...any) { l.s.Debugf(format, v...) } // the banner and routine lines
func (l zapServerLogger) Warnf(format string, v ...any)   { l.s.Warnf(format, v...) }
func (l zapServerLogger) Errorf(format string, v ...any)  { l.s.Errorf(format, v...) }
func (l zapServerLogger) Debugf(format string, v ...any)  { l.s.Debugf(format, v...) }
func (l zapServerLogger) Tracef(format string, v ...any)  { l.s.Debugf(format, v...) }

func (l zapServerLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.s.Error(msg)
	select {
	case l.fatal <- msg:
	default:
	}
}

// portOf is the port of a host:port Configure accepted.
func portOf(hostport string) int {
	_, p, _ := net.SplitHostPort(hostport)
	port, _ := strconv.Atoi(p)
	return port
}
