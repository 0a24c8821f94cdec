// Package natscontext reads the connection contexts of the NATS command line tool
// (natscli's `nats context add|select`), so abi-engine's commands reach a broker the way
// an operator's `nats` does. A context is the JSON file NAME.json under
// $XDG_CONFIG_HOME/nats/context (else ~/.config/nats/context); the selected one is named
// in nats/context.txt beside that directory.
//
// Only what decides how to connect is read: the URL, the login (a .creds file, an nkey
// seed file, a token, a user and password), TLS (a client certificate and key, a CA),
// TLS-first, the inbox prefix and the JetStream domain. A context that needs what this
// package cannot do (an nsc lookup, a SOCKS proxy, a JetStream API prefix) is refused
// naming the field, rather than connecting as someone else or somewhere else.
package natscontext

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Context is one natscli context. Paths are as written, with a leading ~/ expanded.
type Context struct {
	Name string `json:"-"`
	// Path is the file the context was read from.
	Path string `json:"-"`

	URL      string `json:"url"`
	Token    string `json:"token"`
	User     string `json:"user"`
	Password string `json:"password"`
	Creds    string `json:"creds"`
	NKey     string `json:"nkey"` // the file of an nkey seed
	Cert     string `json:"cert"`
	Key      string `json:"key"`
	CA       string `json:"ca"`
	TLSFirst bool   `json:"tls_first"`
	// InboxPrefix replaces _INBOX for replies, for users whose permissions name one.
	InboxPrefix string `json:"inbox_prefix"`
	// JetStreamDomain is where the JetStream API is reached.
	JetStreamDomain string `json:"jetstream_domain"`

	// What this package refuses rather than ignores.
	NSC         string `json:"nsc"`
	SocksProxy  string `json:"socks_proxy"`
	JSAPIPrefix string `json:"jetstream_api_prefix"`
}

// ErrUnknown is returned (wrapped) for a context with no file.
var ErrUnknown = errors.New("no such natscli context")

// Dirs says where the contexts are: env is read for XDG_CONFIG_HOME and HOME.
type Dirs struct{ root string }

// DirsFrom finds the natscli configuration directory from env (os.Getenv in the
// binary): $XDG_CONFIG_HOME/nats, else $HOME/.config/nats.
func DirsFrom(env func(string) string) (Dirs, error) {
	if x := env("XDG_CONFIG_HOME"); x != "" {
		return Dirs{root: filepath.Join(x, "nats")}, nil
	}
	home := env("HOME")
	if home == "" {
		return Dirs{}, errors.New("neither XDG_CONFIG_HOME nor HOME is set: cannot find the natscli contexts")
	}
	return Dirs{root: filepath.Join(home, ".config", "nats")}, nil
}

// Selected is the context `nats context select` chose, "" when none is.
func (d Dirs) Selected() (string, error) {
	data, err := os.ReadFile(filepath.Join(d.root, "context.txt"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the selected natscli context: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// maxFile bounds a context file: one is a few hundred bytes.
const maxFile = 1 << 20

// Load reads the context name; home expands a leading ~/ in its paths.
func (d Dirs) Load(name, home string) (*Context, error) {
	if name == "" || strings.Contains(name, "..") || strings.ContainsAny(name, `/\`) {
		return nil, fmt.Errorf("natscli context %q: not a context name", name)
	}
	path := filepath.Join(d.root, "context", name+".json")
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("natscli context %q: %w (%s does not exist; nats context ls lists them)", name, ErrUnknown, path)
	}
	if err != nil {
		return nil, fmt.Errorf("natscli context %q: %w", name, err)
	}
	if !info.Mode().IsRegular() || info.Size() > maxFile {
		return nil, fmt.Errorf("natscli context %q: %s is not a context file (a regular file of at most 1 MiB)", name, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("natscli context %q: %w", name, err)
	}
	c := &Context{Name: name, Path: path}
	if err := json.Unmarshal(data, c); err != nil {
		// The decoder's error quotes no value, so a password cannot leak through it.
		return nil, fmt.Errorf("natscli context %q: %s is not valid JSON: %v", name, path, err)
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	for _, p := range []*string{&c.Creds, &c.NKey, &c.Cert, &c.Key, &c.CA} {
		*p = expandHome(*p, home)
	}
	return c, nil
}

// check refuses what would connect differently from natscli.
func (c *Context) check() error {
	bad := func(field, why string) error {
		return fmt.Errorf("natscli context %q (%s): %s %s", c.Name, c.Path, field, why)
	}
	switch {
	case c.NSC != "":
		return bad("nsc", "is not supported: give the user's .creds file in creds instead")
	case c.SocksProxy != "":
		return bad("socks_proxy", "is not supported: abi-engine connects directly")
	case c.JSAPIPrefix != "":
		return bad("jetstream_api_prefix", "is not supported: name the JetStream domain in jetstream_domain")
	case (c.Cert == "") != (c.Key == ""):
		return bad("cert and key", "go together: a client certificate needs its key")
	case c.Password != "" && c.User == "":
		return bad("password", "needs user")
	}
	return nil
}

// HasLogin reports whether the context names a way to log in.
func (c *Context) HasLogin() bool {
	return c.Creds != "" || c.NKey != "" || c.Token != "" || c.User != ""
}

func expandHome(p, home string) string {
	if home != "" && (p == "~" || strings.HasPrefix(p, "~/")) {
		return filepath.Join(home, strings.TrimPrefix(p, "~"))
	}
	return p
}
