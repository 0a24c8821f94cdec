package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/natsauth"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/supervisor"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// This file is how an engine finds its broker and connects to it.

// connFlush bounds the flush of a connection as it closes: what was published leaves.
const connFlush = time.Second

// conns are the engine's connections to its broker, which connect dialled and the
// tree owns.
type conns struct {
	url     string
	found   string        // how an engine with no URL found another engine's broker, "" otherwise (refusal)
	opts    []nats.Option // the login and TLS of every connection (natsauth)
	client  *nats.Conn    // a client engine's only connection
	lease   *nats.Conn    // the lease's own, so a busy service connection never delays a renewal
	service *nats.Conn    // the connection every member uses
}

// connect is the one place the engine connects: it dials the connections role needs
// and returns c with them, a client's one or a serving or auto engine's lease and service connections,
// and hands each to the tree as it is made. It finds the broker first (brokerURL),
// unless c has it already: an auto engine that the lease refused connects again, as a
// client of the broker it found. With nats.url empty, a client that finds no server
// fails naming the address: it starts none itself.
func (e *Engine) connect(ctx context.Context, c conns, role config.Role) (conns, error) {
	if c.url == "" {
		// natsauth adds nats.credentials with the other logins.
		opts, err := natsauth.Options(e.cfg.NATS)
		if err != nil {
			return c, fmt.Errorf("engine: connect to NATS: %w", err)
		}
		c.opts = opts
		if c.url, c.found, err = e.brokerURL(ctx, opts); err != nil {
			return c, err
		}
	}
	names := []string{svcLease, svcService}
	if role == config.RoleClient {
		names = []string{svcClient}
	}
	for _, name := range names {
		nc, err := supervisor.Dial(ctx, e.connConfig(c.url, name, c.opts), e.log)
		if err != nil && name == svcClient && e.cfg.NATS.EmbeddedBroker() {
			return c, fmt.Errorf("engine: nats.url is empty, so this client looked for the NATS server of a serving engine at %s (nats.embedded.listen), and it starts none itself: %w",
				e.cfg.NATS.Embedded.Listen, err)
		}
		if err != nil {
			return c, err
		}
		flush := connFlush
		switch name {
		case svcLease:
			c.lease, flush = nc, 0 // nothing of the lease's waits to leave
		case svcService:
			c.service = nc
		case svcClient:
			c.client = nc
		}
		conn := supervisor.NewConn(name, nc, flush)
		e.tree.Add(name, conn)
	}
	return c, nil
}

// brokerURL is the broker the engine uses: nats.url when it is set. With nats.url
// empty, every engine first looks for a NATS server at nats.embedded.listen (where the
// embedded broker of an engine on this host listens) and uses it: a client and an auto
// engine as its clients, a serving engine to claim the lease through it, so it is
// refused naming the engine that serves (or stands by, or serves when none does)
// rather than starting a second broker. Finding none, a serving or auto engine takes
// the lock of nats.embedded.store_dir and starts the embedded broker; a lock another
// engine holds sends it to that engine's broker, named in the lock file, in the same
// way (a broker on a random port included), and is a *supervisor.StoreLockedError when
// that broker cannot be reached. Either way the engine never opens a store another
// broker holds. A client finding no server fails naming the address (connect): a
// client never keeps data on this host. found says how an engine with no URL came to
// another engine's broker, which a refusal of its claim names; "" when it uses
// nats.url or its own.
func (e *Engine) brokerURL(ctx context.Context, opts []nats.Option) (url, found string, err error) {
	n := e.cfg.NATS
	if !n.EmbeddedBroker() {
		return n.URL, "", nil
	}
	role := n.Engine.Role
	url, err = n.EmbeddedURL()
	if role == config.RoleClient {
		if err != nil {
			return "", "", fmt.Errorf("engine: a client engine starts no broker: %w", err)
		}
		return e.useBroker(url), "", nil
	}
	if err == nil { // port 0 names no address to look at: the lock says where a broker is
		answered, err := supervisor.Probe(ctx, e.connConfig(url, "probe", opts))
		if err != nil {
			return "", "", fmt.Errorf("engine: nats.url is empty, so this %s engine looked for a NATS server at %s (nats.embedded.listen): %w", role, n.Embedded.Listen, err)
		}
		if answered {
			e.log.Info("nats.url is empty and a NATS server answers at nats.embedded.listen: using it", zap.String("url", url))
			return e.useBroker(url), fmt.Sprintf("listening at nats.embedded.listen %s", n.Embedded.Listen), nil
		}
		e.log.Info("nats.url is empty and no NATS server answers at nats.embedded.listen: starting the embedded one", zap.String("url", url))
	}
	login, err := natsauth.LoginOf(n)
	if err != nil {
		return "", "", fmt.Errorf("engine: embedded broker: %w", err)
	}
	b, err := supervisor.NewBroker(n.Embedded.Listen, n.Embedded.StoreDir, e.log, supervisor.BrokerAuth(login))
	if err != nil {
		return "", "", fmt.Errorf("engine: %w", err)
	}
	emb := n.Embedded
	if err := b.Configure(supervisor.BrokerSettings{PingInterval: emb.PingInterval(), PingMax: emb.PingMax,
		SyncInterval: emb.SyncInterval(), SyncAlways: emb.SyncAlways, HTTPListen: emb.HTTPListen}); err != nil {
		return "", "", fmt.Errorf("engine: %w", err)
	}
	if err := b.Lock(e.InstanceID()); err != nil {
		// The lock's holder names its broker: that one is used when it answers.
		locked, ok := lockHolder(err)
		if !ok {
			return "", "", fmt.Errorf("engine: embedded broker: %w", err)
		}
		if answered, perr := supervisor.Probe(ctx, e.connConfig(locked.Holder.URL, "probe", opts)); perr != nil || !answered {
			e.log.Warn("the store directory's lock names a broker that does not take this engine", zap.String("lock", locked.Path),
				zap.String("holder", locked.Holder.String()), zap.Error(perr))
			return "", "", fmt.Errorf("engine: embedded broker: %w", err)
		}
		e.log.Info("another engine holds the store directory's lock: using its broker", zap.String("lock", locked.Path),
			zap.String("holder", locked.Holder.String()))
		return e.useBroker(locked.Holder.URL), fmt.Sprintf("named by the lock %s of the store directory, held by %s", locked.Path, locked.Holder), nil
	}
	e.mu.Lock()
	e.broker = b
	e.mu.Unlock()
	e.tree.Add(svcBroker, b)
	url, err = b.URL(ctx)
	if err != nil {
		return "", "", err
	}
	return e.useBroker(url), "", nil
}

// lockHolder is the lock error err of the store directory when its file names the
// holder's broker.
func lockHolder(err error) (*supervisor.StoreLockedError, bool) {
	var locked *supervisor.StoreLockedError
	if !errors.As(err, &locked) || locked.Holder == nil || locked.Holder.URL == "" {
		return nil, false
	}
	return locked, true
}

// refusal adds to a refused claim (err) how this engine, with no URL, came to claim
// through another engine's broker instead of starting its own (found, "" when it
// did not).
func refusal(err error, found string) error {
	var already *lease.AlreadyServingError
	if found == "" || !errors.As(err, &already) {
		return err
	}
	return fmt.Errorf("%w (nats.url is empty and this engine claimed through the broker %s, which it does not start twice)", err, found)
}

// closeBroker lets the store directory's lock go once the broker is out of the tree.
func (e *Engine) closeBroker() {
	e.mu.Lock()
	b := e.broker
	e.broker = nil
	e.mu.Unlock()
	if b == nil {
		return
	}
	if err := b.Close(); err != nil {
		e.log.Warn("letting the store directory's lock go", zap.Error(err))
	}
}

// useBroker records url as the broker of the engine.
func (e *Engine) useBroker(url string) string {
	e.mu.Lock()
	e.natsURL = url
	e.mu.Unlock()
	return url
}

// connConfig is the connection purpose (its name at the broker: connName) to url.
func (e *Engine) connConfig(url, purpose string, opts []nats.Option) supervisor.ConnConfig {
	return supervisor.ConnConfig{
		URL:            url,
		Name:           connName(purpose),
		Options:        opts,
		OnAsyncError:   e.metrics.AsyncError,
		Timeout:        e.cfg.NATS.ClientTimeout(),
		ConnectTimeout: e.cfg.NATS.ConnectTimeout(),
	}
}

// connName is the name a connection shows the broker (connz, server logs), as the
// Python engine names its own (<role>@<host>), so one account's connections read the
// same whichever engine made them: abi-engine@<host> serves the services,
// abi-engine-ownership@<host> holds the lease, and the client and probe connections,
// which the Python engine does not have, follow the same pattern.
func connName(purpose string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	switch purpose {
	case "service":
		return "abi-engine@" + host
	case "lease":
		return "abi-engine-ownership@" + host
	}
	return "abi-engine-" + purpose + "@" + host
}
