package postgres

import "fmt"

// queries builds the store's statements on table t, whose epoch row is in et.
//
// Each write is one statement: the CTE e locks the table's epoch row FOR SHARE, the
// data-modifying CTE w writes only when e holds the epoch the caller passes, and the
// statement returns the epoch it found and what w did. The lock conflicts with the
// row lock of an advance (records.WriteEpoch), so a write either commits before the
// advance or waits for it and then sees the new epoch (READ COMMITTED rechecks the
// locked row), and is refused.
func (s *Store) queries(t, et string) {
	const live = `(expires_at IS NULL OR expires_at > now())`
	const expiry = `CASE WHEN $3::int8 > 0 THEN now() + $3::int8 * interval '1 microsecond' END`
	// fenced wraps w, a write that returns "done" rows, with the epoch check: the row of
	// table name $<nameArg>, epoch $<nameArg+1>.
	fenced := func(nameArg int, w string) string {
		return fmt.Sprintf(`WITH e AS (SELECT epoch FROM %s WHERE name = $%d FOR SHARE),
			w AS (%s)
			SELECT coalesce((SELECT epoch FROM e), 0), coalesce((SELECT bool_or(done) FROM w), false)`, et, nameArg, w)
	}
	current := func(epochArg int) string {
		return fmt.Sprintf(`coalesce((SELECT epoch FROM e), 0) = $%d::int8`, epochArg)
	}
	s.qGet = `SELECT value FROM ` + t + ` WHERE key = $1 AND ` + live
	s.qExists = `SELECT EXISTS (SELECT 1 FROM ` + t + ` WHERE key = $1 AND ` + live + `)`
	s.qSet = fenced(4, `INSERT INTO `+t+` (key, value, expires_at) SELECT $1::bytea, $2::bytea, `+expiry+` WHERE `+current(5)+`
			ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at
			RETURNING true AS done`)
	// An expired row counts as absent: it is replaced like a missing one.
	s.qSetNX = fenced(4, `INSERT INTO `+t+` AS t (key, value, expires_at) SELECT $1::bytea, $2::bytea, `+expiry+` WHERE `+current(5)+`
			ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at
			WHERE t.expires_at IS NOT NULL AND t.expires_at <= now()
			RETURNING true AS done`)
	// done: the deleted row was live.
	s.qDelete = fenced(2, `DELETE FROM `+t+` WHERE key = $1 AND `+current(3)+` RETURNING `+live+` AS done`)
	s.qDeleteIf = fenced(3, `DELETE FROM `+t+` WHERE key = $1 AND value = $2 AND `+live+` AND `+current(4)+` RETURNING true AS done`)
	// A page of live keys: bytea compares byte by byte, the order ListKeys promises, and
	// the range on the primary key starts the scan at the first key the page can hold.
	s.qList = `SELECT key FROM ` + t + ` WHERE key >= $1::bytea AND key > $2::bytea
			AND substring(key from 1 for octet_length($1::bytea)) = $1::bytea AND ` + live + `
			ORDER BY key LIMIT $3::int8`
	// The microseconds left, on the database's clock as every expiry; 0: never expires.
	s.qTTL = `SELECT CASE WHEN expires_at IS NULL THEN 0
			ELSE greatest(ceil(extract(epoch FROM expires_at - now()) * 1000000), 1)::int8 END
			FROM ` + t + ` WHERE key = $1 AND ` + live
	// Not fenced: it removes rows that have expired, which every engine reads as absent.
	// The outer condition is checked again on a row a concurrent write changed (READ
	// COMMITTED), so a row set again meanwhile is kept.
	s.qSweep = `DELETE FROM ` + t + ` WHERE expires_at <= now() AND key IN (SELECT key FROM ` + t + `
			WHERE expires_at <= now() LIMIT ` + fmt.Sprint(sweepBatch) + `)`
}
