package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/natsauth"
	"github.com/abi-engine/engine/internal/natscontext"
)

// EnvNATSContext names the natscli context when --context is not given, as for nats.
const EnvNATSContext = "NATS_CONTEXT"

// connFlags are the connection flags every command that talks to a broker takes, the
// same everywhere: where the broker is, how to log in, TLS, and the service tokens'
// secret. What they name wins over a natscli context, which wins over the
// configuration (environment and file); where nothing names the broker, the natscli
// context selected with nats context select stands in for the defaults
// (docs/operations.md, "Connection flags").
type connFlags struct {
	config, nats, context                 string
	creds, nkey, token                    string
	user, password, passwordFile          string
	tlsCert, tlsKey, tlsCA, jwtSecretFile string
}

func (f *connFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&f.config, "config", "c", "", "configuration file (default: abi-engine.yaml in the working directory, if any)")
	fl.StringVar(&f.nats, "nats", "", "NATS server URLs, comma-separated (default: the context's url, else ABI_NATS_URL, else nats.url, else the embedded broker's address)")
	fl.StringVar(&f.context, "context", "", "natscli context to connect with: its url, login and TLS (default: NATS_CONTEXT)")
	fl.StringVar(&f.creds, "creds", "", "user credentials (.creds) file")
	fl.StringVar(&f.nkey, "nkey", "", "file holding a user nkey seed")
	fl.StringVar(&f.token, "token", "", "token to log in with")
	fl.StringVar(&f.user, "user", "", "user to log in as (with --password or --password-file)")
	fl.StringVar(&f.password, "password", "", "the password of --user")
	fl.StringVar(&f.passwordFile, "password-file", "", "file holding the password of --user")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "client certificate (PEM), with --tls-key")
	fl.StringVar(&f.tlsKey, "tls-key", "", "the key (PEM) of --tls-cert")
	fl.StringVar(&f.tlsCA, "tls-ca", "", "CA certificates (PEM) to verify the server against")
	fl.StringVar(&f.jwtSecretFile, "jwt-secret-file", "", "file holding the HS256 secret service tokens are signed with (default: ABI_JWT_SECRET_FILE, else nats.jwt_secret_file)")
}

// loginSource is where a login came from.
type loginSource int

const (
	fromConfig loginSource = iota
	fromContext
	fromFlags
)

// login is one way to log in, and where it came from for messages.
type login struct {
	source                 loginSource
	from                   string // how messages name source: "flags", "natscli context \"x\"", "the configuration"
	creds, nkey, tokenFile string
	user, passwordFile     string
	token, password        string // given as such, not in a file
}

func (l login) set() bool {
	return l.creds != "" || l.nkey != "" || l.tokenFile != "" || l.token != "" || l.user != ""
}

// describe names the login for an error the broker's refusal causes: never a secret.
func (l login) describe() string {
	switch {
	case l.user != "":
		return fmt.Sprintf("user %q (from %s)", l.user, l.from)
	case l.creds != "":
		return fmt.Sprintf("credentials %s (from %s)", l.creds, l.from)
	case l.nkey != "":
		return fmt.Sprintf("nkey seed %s (from %s)", l.nkey, l.from)
	case l.token != "", l.tokenFile != "":
		return "a token (from " + l.from + ")"
	}
	return "no login"
}

// connection is the configuration a command reads and how it reaches the broker.
type connection struct {
	cfg    *config.Config
	broker brokerSettings
}

// resolve reads the configuration (as a client's when asClient, so a serving engine's
// shared-backend check cannot refuse a command that only reads), lays the natscli
// context and the flags over it, and returns how to reach the broker. Every error is a
// usage error naming the flag, the context or the key that is wrong.
func (c *cli) resolve(cmd *cobra.Command, f *connFlags, asClient bool) (connection, error) {
	changed := cmd.Flags().Changed
	if err := f.check(changed); err != nil {
		return connection{}, usageError(&flagError{err})
	}
	var overrides []config.Override
	if asClient {
		overrides = append(overrides, config.RoleFlag(string(config.RoleClient)))
	}
	if changed("nats") {
		overrides = append(overrides, config.NATSURLFlag(f.nats))
	}
	cfg, err := config.Load(f.config, c.env, overrides...)
	if err != nil {
		return connection{}, usageError(err)
	}
	nctx, err := c.natsContext(f, cfg, changed("nats"))
	if err != nil {
		return connection{}, usageError(err)
	}
	n := cfg.NATS
	l := login{source: fromConfig, from: "the configuration", creds: n.Credentials, nkey: n.NKeySeedFile, tokenFile: n.TokenFile, user: n.User, passwordFile: n.PasswordFile}
	var extra []nats.Option
	if nctx != nil {
		if nctx.URL != "" && !changed("nats") {
			if err := cfg.Apply(config.NATSURLFrom(fmt.Sprintf("natscli context %q", nctx.Name), nctx.URL)); err != nil {
				return connection{}, usageError(err)
			}
			n.URL = cfg.NATS.URL
		}
		if nctx.HasLogin() {
			l = contextLogin(nctx)
		}
		// A context's certificate comes with its key (natscontext checks), so each
		// field can be taken on its own.
		n.TLS.CAFile, n.TLS.CertFile, n.TLS.KeyFile = or(nctx.CA, n.TLS.CAFile), or(nctx.Cert, n.TLS.CertFile), or(nctx.Key, n.TLS.KeyFile)
		n.JetStream.Domain = or(nctx.JetStreamDomain, n.JetStream.Domain)
		if nctx.TLSFirst {
			extra = append(extra, nats.TLSHandshakeFirst())
		}
		if nctx.InboxPrefix != "" {
			extra = append(extra, nats.CustomInboxPrefix(nctx.InboxPrefix))
		}
	}
	if fl := f.login(); fl.set() {
		l = fl
		if f.passwordFile != "" {
			// Read now, so an empty or missing file is named as the flag.
			if l.password, err = config.ReadSecret(f.passwordFile); err != nil {
				return connection{}, usageError(&flagError{fmt.Errorf("--password-file %s: %w", f.passwordFile, err)})
			}
			l.passwordFile = ""
		}
	}
	if changed("tls-cert") {
		n.TLS.CertFile, n.TLS.KeyFile = f.tlsCert, f.tlsKey
	}
	if changed("tls-ca") {
		n.TLS.CAFile = f.tlsCA
	}
	if changed("jwt-secret-file") {
		n.JWTSecretFile = f.jwtSecretFile
	}
	if err := checkFiles(f, nctx, l, n.TLS); err != nil {
		return connection{}, usageError(err)
	}
	opts, err := l.options(n)
	if err != nil {
		return connection{}, usageError(err)
	}
	url := n.URL
	if url == "" {
		if url, err = embeddedURL(n.Embedded.Listen); err != nil {
			return connection{}, usageError(err)
		}
	}
	cfg.NATS = n
	return connection{cfg: cfg, broker: brokerSettings{
		URL: url, Options: append(opts, extra...), Timeout: n.ClientTimeout(), JWTSecretFile: n.JWTSecretFile,
		Domain: n.JetStream.Domain, Login: l.describe(),
	}}, nil
}

// natsContext is the natscli context to lay over the configuration: --context, else
// NATS_CONTEXT (explicit: over the environment), else, where nothing names the broker
// (no --nats, no ABI_NATS_URL, no configuration file), the context nats context select
// chose, as nats would use it; nil for none. The selected context is not read where
// something else names the broker, so its login is never sent to another broker.
func (c *cli) natsContext(f *connFlags, cfg *config.Config, urlFlag bool) (*natscontext.Context, error) {
	name := f.context
	if name == "" {
		name = c.env(EnvNATSContext)
	}
	explicit := name != ""
	if !explicit && (cfg.Path() != "" || urlFlag || c.env(config.EnvNATSURL) != "") {
		return nil, nil
	}
	dirs, err := natscontext.DirsFrom(c.env)
	switch {
	case err != nil && !explicit:
		return nil, nil // nowhere to look for a selected one
	case err != nil:
		return nil, fmt.Errorf("--context %s: %w", name, err)
	}
	if !explicit {
		if name, err = dirs.Selected(); err != nil || name == "" {
			return nil, err
		}
	}
	ctx, err := dirs.Load(name, c.env("HOME"))
	if err != nil && !explicit {
		return nil, fmt.Errorf("the natscli context selected with nats context select: %w; select another, or name the broker with --nats, --context or a configuration file", err)
	}
	return ctx, err
}

func contextLogin(x *natscontext.Context) login {
	l := login{source: fromContext, from: fmt.Sprintf("natscli context %q", x.Name)}
	// natscli's order, when a context names several.
	switch {
	case x.User != "":
		l.user, l.password = x.User, x.Password
	case x.Creds != "":
		l.creds = x.Creds
	case x.NKey != "":
		l.nkey = x.NKey
	default:
		l.token = x.Token
	}
	return l
}

// check refuses flags that do not go together, before anything is read.
func (f *connFlags) check(changed func(string) bool) error {
	var ways []string
	for _, w := range []string{"creds", "nkey", "token", "user"} {
		if changed(w) {
			ways = append(ways, "--"+w)
		}
	}
	switch {
	case len(ways) > 1:
		return fmt.Errorf("%s and %s: give one way to log in", ways[0], ways[1])
	case changed("user") && !changed("password") && !changed("password-file"):
		return errors.New("--user needs --password or --password-file")
	case (changed("password") || changed("password-file")) && !changed("user"):
		return errors.New("--password and --password-file need --user")
	case changed("password") && changed("password-file"):
		return errors.New("--password and --password-file: give one")
	case changed("tls-cert") != changed("tls-key"):
		return errors.New("--tls-cert and --tls-key go together: a client certificate needs its key")
	}
	return nil
}

func (f *connFlags) login() login {
	return login{source: fromFlags, from: "flags", creds: f.creds, nkey: f.nkey, token: f.token, user: f.user, password: f.password, passwordFile: f.passwordFile}
}

// options are the nats.go options of the login l and the TLS of n.
func (l login) options(n config.NATS) ([]nats.Option, error) {
	n.Credentials, n.NKeySeedFile, n.TokenFile, n.User, n.PasswordFile = l.creds, "", l.tokenFile, "", ""
	if l.user != "" && l.passwordFile != "" {
		n.User, n.PasswordFile = l.user, l.passwordFile
	}
	opts, err := natsauth.Options(n)
	if err != nil {
		return nil, err
	}
	switch {
	case l.nkey != "":
		o, err := nats.NkeyOptionFromSeed(l.nkey)
		if err != nil {
			return nil, fmt.Errorf("the nkey seed %s (from %s): %w", l.nkey, l.from, err)
		}
		opts = append(opts, o)
	case l.user != "" && l.passwordFile == "":
		opts = append(opts, nats.UserInfo(l.user, l.password))
	case l.token != "":
		opts = append(opts, nats.Token(l.token))
	}
	return opts, nil
}

// checkFiles reads every file the flags and the context name, so one that is missing
// is refused naming where it was given rather than failing the connection later.
func checkFiles(f *connFlags, x *natscontext.Context, l login, t config.TLS) error {
	check := func(where, path string) error {
		if path == "" {
			return nil
		}
		fh, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("%s %s: %w", where, path, errors.Unwrap(err))
		}
		return fh.Close()
	}
	ctxField := func(field string) string { return fmt.Sprintf("natscli context %q: %s", x.Name, field) }
	var checks [][2]string
	switch l.source {
	case fromFlags:
		checks = append(checks, [2]string{"--creds", l.creds}, [2]string{"--nkey", l.nkey})
	case fromContext:
		checks = append(checks, [2]string{ctxField("creds"), l.creds}, [2]string{ctxField("nkey"), l.nkey})
	}
	if f.tlsCert != "" || f.tlsKey != "" {
		checks = append(checks, [2]string{"--tls-cert", t.CertFile}, [2]string{"--tls-key", t.KeyFile})
	} else if x != nil && x.Cert != "" {
		checks = append(checks, [2]string{ctxField("cert"), t.CertFile}, [2]string{ctxField("key"), t.KeyFile})
	}
	if f.tlsCA != "" {
		checks = append(checks, [2]string{"--tls-ca", t.CAFile})
	} else if x != nil && x.CA != "" {
		checks = append(checks, [2]string{ctxField("ca"), t.CAFile})
	}
	for _, c := range checks {
		if err := check(c[0], c[1]); err != nil {
			return err
		}
	}
	return nil
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// brokerFor is how a client command reaches the broker: resolve, as a client.
func (c *cli) brokerFor(cmd *cobra.Command, f *connFlags) (brokerSettings, error) {
	conn, err := c.resolve(cmd, f, true)
	return conn.broker, err
}
