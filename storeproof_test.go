package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
	kvpg "github.com/abi-engine/engine/primaries/keyvalue/postgres"
)

const postgresURLEnv = "ABI_TEST_POSTGRES_URL"

// secondDatabase returns the URL of a second database beside the one of
// ABI_TEST_POSTGRES_URL (its name with "_second"), creating it if it does not exist,
// or skips the test when the variable is unset, as the backend's own tests do.
func secondDatabase(t *testing.T) (first, second string) {
	t.Helper()
	first = os.Getenv(postgresURLEnv)
	if first == "" {
		t.Skip(postgresURLEnv + " is not set; set it to a PostgreSQL URL to run the PostgreSQL tests")
	}
	u, err := url.Parse(first)
	if err != nil {
		t.Fatalf("%s: %v", postgresURLEnv, err)
	}
	name := strings.TrimPrefix(u.Path, "/") + "_second"
	u.Path = "/" + name
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, first)
	if err != nil {
		t.Fatalf("%s: %v", postgresURLEnv, err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if !exists {
		_, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize())
		var pgErr *pgconn.PgError
		if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42P04") { // created meanwhile
			t.Fatalf("create the second database %s (the role of %s needs CREATEDB): %v", name, postgresURLEnv, err)
		}
	}
	return first, u.String()
}

// dropTable removes the test's keyvalue table and its rows in the engine's own tables.
func dropTable(t *testing.T, dsn, table string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Errorf("drop %s: %v", table, err)
		return
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		`DROP TABLE IF EXISTS ` + pgx.Identifier{table}.Sanitize(),
		`DELETE FROM ` + kvpg.EpochTable + ` WHERE name = '` + table + `'`,
		`DELETE FROM ` + kvpg.StoresTable + ` WHERE name = '` + table + `'`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
}

func postgresCfg(t *testing.T, natsURL, rollout, dsn, table string) *config.Config {
	t.Helper()
	c := cfg(t, natsURL, "serve", rollout, "jetstream")
	c.Services.KeyValue.Adapter = config.KeyValuePostgres
	c.Services.KeyValue.DSN = dsn
	c.Services.KeyValue.Table = table
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStandbyOnAnotherDatabaseIsRefused is issue 26's finding 9 on shared storage: a
// standby whose PostgreSQL DSN names another database than the serving engine's is
// refused before it stands by, naming the backend and both stores, and the serving
// engine keeps every write it acknowledged; a standby on the same database (reached by
// another DSN) stands by, takes over, and reads every one of them. Before the fix the
// first standby stood by, and after a handover to it every key read as not found.
func TestStandbyOnAnotherDatabaseIsRefused(t *testing.T) {
	first, second := secondDatabase(t)
	table := fmt.Sprintf("proof_%d", os.Getpid())
	for _, dsn := range []string{first, second} {
		t.Cleanup(func() { dropTable(t, dsn, table) })
	}
	srv := natstest.Start(t)
	a := newEngine(t, postgresCfg(t, srv.URL(), "v1", first, table))
	load(t, a)
	kv := client.NewKeyValue(transport(t, srv.URL()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const writes = 200
	acked := 0
	for i := range writes {
		if err := kv.Set(ctx, fmt.Sprintf("k%d", i), []byte{byte(i)}, 0); err != nil {
			t.Fatalf("set k%d: %v", i, err)
		}
		acked++
	}

	b, err := engine.New(postgresCfg(t, srv.URL(), "v2", second, table))
	if err != nil {
		t.Fatal(err)
	}
	err = b.Load(ctx)
	var mismatch *engine.StoreMismatchError
	if !errors.As(err, &mismatch) || !errors.Is(err, engine.ErrStoreMismatch) {
		_ = b.Shutdown(ctx)
		t.Fatalf("a standby on another database: Load = %v; want a *StoreMismatchError", err)
	}
	t.Logf("refused: %v", err)
	msg := err.Error()
	for _, want := range []string{"services.keyvalue", "postgres", mismatch.Theirs.ID, mismatch.Ours.ID, a.InstanceID(), "refusing to stand by"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not name %q: %s", want, msg)
		}
	}
	if mismatch.Theirs.ID == mismatch.Ours.ID {
		t.Errorf("both stores have id %s", mismatch.Ours.ID)
	}
	testwait.Closed(t, b.Done(), 10*time.Second, "the refused standby has ended")
	if r := leaseRecord(t, srv.URL()); r.Holder.InstanceID != a.InstanceID() || a.State() != engine.StateServing {
		t.Fatalf("after the refusal the lease is %v and the serving engine %s", r, a.State())
	}

	// The same database by another DSN (another spelling of the server): the same store.
	same := strings.Replace(first, "127.0.0.1", "localhost", 1)
	c := newEngine(t, postgresCfg(t, srv.URL(), "v3", same, table))
	load(t, c)
	if c.State() != engine.StateStandby {
		t.Fatalf("a standby on the same database is %s", c.State())
	}
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "the standby serving", func() bool { return c.State() == engine.StateServing })
	found := 0
	for i := range writes {
		v, ok, err := kv.Get(ctx, fmt.Sprintf("k%d", i))
		if err != nil {
			t.Fatalf("get k%d: %v", i, err)
		}
		if ok && len(v) == 1 && v[0] == byte(i) {
			found++
		}
	}
	if found != acked {
		t.Fatalf("%d of %d acknowledged writes read back after the handover", found, acked)
	}
}
