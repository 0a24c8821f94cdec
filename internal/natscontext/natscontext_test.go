package natscontext

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestDirsFollowXDGThenHome: XDG_CONFIG_HOME wins over HOME, as for natscli.
func TestDirsFollowXDGThenHome(t *testing.T) {
	home, xdg := t.TempDir(), t.TempDir()
	write(t, filepath.Join(home, ".config", "nats", "context", "a.json"), `{"url":"nats://home:4222"}`)
	write(t, filepath.Join(xdg, "nats", "context", "a.json"), `{"url":"nats://xdg:4222"}`)
	write(t, filepath.Join(xdg, "nats", "context.txt"), "a\n")
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"HOME": home}, "nats://home:4222"},
		{map[string]string{"HOME": home, "XDG_CONFIG_HOME": xdg}, "nats://xdg:4222"},
	} {
		d, err := DirsFrom(envOf(tc.env))
		if err != nil {
			t.Fatal(err)
		}
		c, err := d.Load("a", home)
		if err != nil || c.URL != tc.want {
			t.Errorf("%v: %+v (%v), want url %s", tc.env, c, err, tc.want)
		}
	}
	d, _ := DirsFrom(envOf(map[string]string{"XDG_CONFIG_HOME": xdg}))
	if sel, err := d.Selected(); sel != "a" || err != nil {
		t.Errorf("selected %q (%v), want a", sel, err)
	}
	d, _ = DirsFrom(envOf(map[string]string{"HOME": home}))
	if sel, err := d.Selected(); sel != "" || err != nil {
		t.Errorf("selected %q (%v) with no context.txt, want none", sel, err)
	}
	if _, err := DirsFrom(envOf(nil)); err == nil {
		t.Error("no XDG_CONFIG_HOME nor HOME: no error")
	}
}

// TestLoadReadsTheFieldsAndExpandsHome: the login, TLS and domain fields are read, a
// leading ~/ in a path is the home directory, and fields of natscli this package does
// not use are ignored.
func TestLoadReadsTheFieldsAndExpandsHome(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "nats", "context", "prod.json"), `{
  "description": "production", "url": "tls://nats:4222", "creds": "~/keys/abi.creds",
  "cert": "~/tls/c.pem", "key": "/k.pem", "ca": "ca.pem", "jetstream_domain": "hub",
  "tls_first": true, "inbox_prefix": "_I.abi", "color_scheme": "dark"}`)
	d, _ := DirsFrom(envOf(map[string]string{"XDG_CONFIG_HOME": root}))
	c, err := d.Load("prod", "/home/op")
	if err != nil {
		t.Fatal(err)
	}
	want := Context{Name: "prod", Path: filepath.Join(root, "nats", "context", "prod.json"), URL: "tls://nats:4222",
		Creds: "/home/op/keys/abi.creds", Cert: "/home/op/tls/c.pem", Key: "/k.pem", CA: "ca.pem",
		JetStreamDomain: "hub", TLSFirst: true, InboxPrefix: "_I.abi"}
	if *c != want {
		t.Errorf("got  %+v\nwant %+v", *c, want)
	}
	if !c.HasLogin() {
		t.Error("a context with creds has no login")
	}
}

// TestLoadRefusesWhatItCannotDo: an unknown context, a bad name, bad JSON, and the
// fields that would connect otherwise than natscli are refused naming what is wrong;
// a password is never part of the message.
func TestLoadRefusesWhatItCannotDo(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "nats", "context")
	for name, body := range map[string]string{
		"nsc":      `{"nsc":"nsc://op/acc/user"}`,
		"socks":    `{"socks_proxy":"127.0.0.1:1080"}`,
		"prefix":   `{"jetstream_api_prefix":"JS.hub.API"}`,
		"halfcert": `{"cert":"c.pem"}`,
		"nouser":   `{"password":"hunter2"}`,
		"badjson":  `{"url": "nats://x", "password": "hunter2",`,
	} {
		write(t, filepath.Join(dir, name+".json"), body)
	}
	d, _ := DirsFrom(envOf(map[string]string{"XDG_CONFIG_HOME": root}))
	for name, want := range map[string]string{
		"nsc": "nsc is not supported", "socks": "socks_proxy is not supported", "prefix": "jetstream_api_prefix is not supported",
		"halfcert": "cert and key go together", "nouser": "password needs user", "badjson": "is not valid JSON",
		"gone": "no such natscli context", "../x": "not a context name", "a/b": "not a context name",
	} {
		_, err := d.Load(name, "")
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v, want an error saying %q without the password", name, err, want)
		}
	}
	if _, err := d.Load("gone", ""); !errors.Is(err, ErrUnknown) {
		t.Errorf("an unknown context: %v, want ErrUnknown", err)
	}
}
