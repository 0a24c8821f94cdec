package e2e

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
)

// postgresDatabases returns ABI_TEST_POSTGRES_URL and a second database beside it
// (its name with "_second"), created when missing, or skips the test without the
// variable, as every PostgreSQL test does.
func postgresDatabases(t *testing.T) (first, second string) {
	t.Helper()
	first = os.Getenv("ABI_TEST_POSTGRES_URL")
	if first == "" {
		t.Skip("ABI_TEST_POSTGRES_URL is not set; set it to a PostgreSQL URL to run the PostgreSQL tests")
	}
	u, err := url.Parse(first)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/") + "_second"
	u.Path = "/" + name
	ctx := ctxFor(t, 20*time.Second)
	conn, err := pgx.Connect(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if !exists {
		_, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize())
		var pgErr *pgconn.PgError
		if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42P04") {
			t.Fatalf("create the second database %s (needs CREATEDB): %v", name, err)
		}
	}
	t.Cleanup(func() {
		for _, dsn := range []string{first, u.String()} {
			ctx := ctxFor(t, 10*time.Second)
			c, err := pgx.Connect(ctx, dsn)
			if err != nil {
				continue
			}
			_, _ = c.Exec(ctx, `DROP TABLE IF EXISTS e2e_proof`)
			_, _ = c.Exec(ctx, `DELETE FROM abi_engine_epochs WHERE name = 'e2e_proof'`)
			_, _ = c.Exec(ctx, `DELETE FROM abi_engine_stores WHERE name = 'e2e_proof'`)
			c.Close(ctx)
		}
	})
	return first, u.String()
}

// TestStandbyOnAnotherDatabaseExits1 is issue 26's finding 9 on shared storage, with
// real processes: a standby whose keyvalue DSN names another database than the serving
// engine's exits 1 before it stands by, naming the backend and both stores, and the
// serving engine keeps every write it acknowledged; a standby on the same database
// takes over and reads them all.
func TestStandbyOnAnotherDatabaseExits1(t *testing.T) {
	first, second := postgresDatabases(t)
	srv := natstest.Start(t)
	kvOn := func(dsn string) string { return fmt.Sprintf("postgres, dsn: %q, table: e2e_proof", dsn) }
	a := start(t, "a", engineConfig{NATSURL: srv.URL(), Rollout: "v1", KeyValue: kvOn(first), HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 30*time.Second)
	tr, err := client.NewTransport(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	kv := client.NewKeyValue(tr)
	ctx := ctxFor(t, 90*time.Second)
	const writes = 300
	for i := range writes {
		if err := kv.Set(ctx, fmt.Sprintf("k%d", i), []byte(fmt.Sprint(i)), 0); err != nil {
			t.Fatalf("set k%d: %v", i, err)
		}
	}

	b := start(t, "b", engineConfig{NATSURL: srv.URL(), Rollout: "v2", KeyValue: kvOn(second), HTTPPort: testproc.FreePort(t)})
	if code := b.exitCode(30 * time.Second); code != 1 {
		t.Fatalf("a standby on another database exited %d, want 1", code)
	}
	out := b.out.String()
	u, _ := url.Parse(second)
	for _, want := range []string{"services.keyvalue does not reach the store of the serving engine", a.instanceID(),
		"postgres store", "database " + strings.TrimPrefix(u.Path, "/"), "refusing to stand by"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refused standby's output does not name %q:\n%s", want, out)
		}
	}
	a.waitState("serving", time.Second)

	c := start(t, "c", engineConfig{NATSURL: srv.URL(), Rollout: "v3", KeyValue: kvOn(first), HTTPPort: testproc.FreePort(t)})
	c.waitState("standby", 30*time.Second)
	c.waitLog("this standby reaches the serving engine's store", time.Second)
	a.signal(syscall.SIGTERM)
	if code := a.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("the old engine exited %d after its handover", code)
	}
	c.waitState("serving", 30*time.Second)
	found := 0
	for i := range writes {
		v, ok, err := kv.Get(ctx, fmt.Sprintf("k%d", i))
		if err != nil {
			t.Fatalf("get k%d: %v", i, err)
		}
		if ok && string(v) == fmt.Sprint(i) {
			found++
		}
	}
	if found != writes {
		t.Fatalf("%d of %d acknowledged writes read back after the handover", found, writes)
	}
}
