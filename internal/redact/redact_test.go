package redact

import (
	"bytes"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"nats://abi:s3cret@127.0.0.1:4222", "nats://abi:xxxxx@127.0.0.1:4222"},
		{"nats://t0ken@127.0.0.1:4222", "nats://xxxxx@127.0.0.1:4222"},
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://a:p1@n1:4222,nats://b:p2@n2:4222, tls://t3@n3", "nats://a:xxxxx@n1:4222,nats://b:xxxxx@n2:4222, tls://xxxxx@n3"},
		{"nats://abi:p@ss@host:1", "nats://abi:xxxxx@host:1"},
		{"nats://abi:pw@[::1]:4222", "nats://abi:xxxxx@[::1]:4222"},
		{`connect to "nats://abi:pw@h:1": refused`, `connect to "nats://abi:xxxxx@h:1": refused`},
		{`{"url":"nats://abi:pw@h:1","error":"x"}`, `{"url":"nats://abi:xxxxx@h:1","error":"x"}`},
		{`{"error":"parse \"nats://abi:pw@h:x\": invalid port"}`, `{"error":"parse \"nats://abi:xxxxx@h:x\": invalid port"}`},
		{"postgres://abi:pw@db:5432/abi?sslmode=require", "postgres://abi:xxxxx@db:5432/abi?sslmode=require"},
		{"postgres://db/abi?password=pw&sslmode=require", "postgres://db/abi?password=xxxxx&sslmode=require"},
		{"host=db user=abi password=pw dbname=abi", "host=db user=abi password=xxxxx dbname=abi"},
		{"host=db password='p w\\'x' dbname=abi", "host=db password=xxxxx dbname=abi"},
		{"PASSWORD = pw", "PASSWORD = xxxxx"},
		{"mail abi@example.com about it", "mail abi@example.com about it"},
		{"nats://abi:p/w@host:1", "nats://abi:xxxxx@host:1"},
		{"nats://p/w@host:1", "nats://xxxxx@host:1"},
		{"see https://example.com/a@b", "see https://xxxxx@b"},
		{"", ""},
		// Issue 26: a password with characters that end a URL in most text.
		{"nats://semi:SE;CRET(x@127.0.0.1:4222", "nats://semi:xxxxx@127.0.0.1:4222"},
		{"nats reconnected url=nats://semi:SE;CRET%28x@127.0.0.1:4222 conn=lease", "nats reconnected url=nats://semi:xxxxx@127.0.0.1:4222 conn=lease"},
		{"nats://a:p1@n1:4222,nats://semi:it's(a)pw@n2:4222", "nats://a:xxxxx@n1:4222,nats://semi:xxxxx@n2:4222"},
		{`{"url":"nats://semi:a\"b c@h:1","error":"x"}`, `{"url":"nats://semi:xxxxx@h:1","error":"x"}`},
		// No scheme: nats.go reads these as nats:// URLs.
		{"semi:SE;CRET(x@127.0.0.1:4222", "semi:xxxxx@127.0.0.1:4222"},
		{`"t0ken@nats.example.com:4222" is not one`, `"xxxxx@nats.example.com:4222" is not one`},
		{"t0ken@127.0.0.1", "xxxxx@127.0.0.1"},
		{"a:p1@n1:4222, t0k@[::1]:4222", "a:xxxxx@n1:4222, xxxxx@[::1]:4222"},
		{"password=SE;CRET(x host=db", "password=xxxxx host=db"},
		// A JSON entry: the URL ends with its string, not at an @ of a later field.
		{`{"url":"nats://semi:p\"w\\@h:1","pid":"local/transfer@abc"}`, `{"url":"nats://semi:xxxxx@h:1","pid":"local/transfer@abc"}`},
		{`{"endpoint":"http://otel:4318","subject":"abi.svc.kv.v1.transfer@abc"}`, `{"endpoint":"http://otel:4318","subject":"abi.svc.kv.v1.transfer@abc"}`},
	}
	for _, tc := range cases {
		if got := String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if again := String(tc.want); again != tc.want {
			t.Errorf("String is not idempotent on %q: %q", tc.want, again)
		}
	}
}

func TestWriter(t *testing.T) {
	var b bytes.Buffer
	w := Writer(&b)
	line := `{"msg":"cannot connect","url":"nats://abi:s3cret@h:1"}` + "\n"
	n, err := w.Write([]byte(line))
	if err != nil || n != len(line) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(line))
	}
	if strings.Contains(b.String(), "s3cret") || !strings.Contains(b.String(), "nats://abi:xxxxx@h:1") {
		t.Fatalf("wrote %q", b.String())
	}
}

func TestURLList(t *testing.T) {
	cases := []struct{ in, want string }{
		// A token with a host name and no port reads like a mail address in free
		// text; as a value known to be a URL list it is masked all the same.
		{"t0ken@nats.example.com", "xxxxx@nats.example.com"},
		{"nats://h1:4222, t0ken@nats.example.com,semi:p;w@h2", "nats://h1:4222, xxxxx@nats.example.com,semi:xxxxx@h2"},
		{"nats://abi:p@ss@h", "nats://abi:xxxxx@h"},
	}
	for _, tc := range cases {
		if got := URLList(tc.in); got != tc.want {
			t.Errorf("URLList(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
