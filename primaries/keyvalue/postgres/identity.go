package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// StoresTable holds, per keyvalue table, a random id made once, by the first engine
// that opens the table. Two engines whose DSNs differ in writing only (a host name and
// its address, another user) read the same id; two databases never do. A standby
// compares the id it reads with the one the lease holder published, so that a
// PostgreSQL backend counts as shared only once it is shown to be the same store.
const StoresTable = "abi_engine_stores"

// Identity names the store this backend reaches.
type Identity struct {
	// ID is the table's random id (StoresTable).
	ID string
	// Where is for people: the database, the server and the table.
	Where string
}

// ensureIdentity makes the table's id if it has none. The row outlives the table, as
// its epoch row does: a table dropped and recreated is the same store to the engines.
func ensureIdentity(ctx context.Context, tx pgx.Tx, table string) error {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	st := pgx.Identifier{StoresTable}.Sanitize()
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+st+` (name text PRIMARY KEY, id text NOT NULL)`); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO `+st+` (name, id) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, table, hex.EncodeToString(b[:]))
	return err
}

// Identity reads the id of the store this backend reaches, and where it is.
func (s *Store) Identity(ctx context.Context) (Identity, error) {
	var id, db, addr string
	err := s.pool.QueryRow(ctx, `SELECT s.id, current_database(),
			coalesce(host(inet_server_addr()) || ':' || inet_server_port(), 'a local socket')
		FROM `+pgx.Identifier{StoresTable}.Sanitize()+` s WHERE s.name = $1`, s.table).Scan(&id, &db, &addr)
	if errors.Is(err, pgx.ErrNoRows) {
		return Identity{}, fmt.Errorf("keyvalue postgres: table %s has no row in %s (deleted by hand?); open it again to make one", s.table, StoresTable)
	}
	if err != nil {
		return Identity{}, fmt.Errorf("keyvalue postgres: read the id of table %s: %w", s.table, err)
	}
	return Identity{ID: id, Where: fmt.Sprintf("database %s on %s, table %s", db, addr, s.table)}, nil
}
