package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/abi-engine/engine/protocol"
)

// Which PostgreSQL failures of a write are retryable: exactly those after which the
// statement surely did not commit (docs/design.md §5.8). The errors come from a real database
// where one can be had: a server that refuses the statement, a connection never made,
// a connection closed before the statement was sent. The FATAL and the connection lost
// mid-statement are built by hand: they need a server dying at the right instant.
func TestWhichErrorsAreRetryable(t *testing.T) {
	p := pool(t)
	s := newStore(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// The server fails the statement: its implicit transaction is rolled back.
	if _, err := p.Exec(ctx, "DROP TABLE "+pgx.Identifier{s.table}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	refusedErr := s.Set(ctx, "k", []byte("v"), 0)

	// No connection: nothing was sent.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	down, err := pgxpool.New(ctx, "postgres://abi:abi@"+addr+"/abi_test?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	noConnErr := (&Store{pool: down, table: s.table, qSet: s.qSet}).Set(ctx, "k", []byte("v"), 0)

	// A connection closed before the statement: pgconn knows nothing was sent.
	conn, err := pgx.Connect(ctx, p.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	_, closedErr := conn.Exec(ctx, s.qSet, []byte("k"), []byte("v"), int64(0))

	cases := []struct {
		name      string
		err       error
		retryable bool
	}{
		{"the server failed the statement (ERROR)", refusedErr, true},
		{"no connection to the server", noConnErr, true},
		{"a closed connection, before sending", closedErr, true},
		{"FATAL: the session ended, maybe after its commit", &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"}, false},
		{"the connection went away waiting for the result", io.ErrUnexpectedEOF, false},
		{"something else", errors.New("unexpected"), false},
	}
	var pe *protocol.Error
	for _, c := range cases {
		if c.err == nil {
			t.Fatalf("%s: no error to classify", c.name)
		}
		err := c.err
		if !errors.As(err, &pe) { // not already through the store
			err = s.writeError("set", "k", err)
		}
		if !errors.As(err, &pe) || pe.Code != protocol.Unavailable || pe.Retryable != c.retryable {
			t.Errorf("%s: got %v, want UNAVAILABLE retryable=%v", c.name, err, c.retryable)
		}
	}
	// A read applies nothing: any failure of one is retryable.
	if err := s.readError("get", "k", io.ErrUnexpectedEOF); !errors.As(err, &pe) || !pe.Retryable {
		t.Errorf("a failed read: got %v, want retryable", err)
	}
	if err := s.writeError("set", "k", context.DeadlineExceeded); err != context.DeadlineExceeded {
		t.Errorf("a deadline: got %v, want it passed on to the primary", err)
	}
}
