// Package pgdb connects the shuffler and the collector to PostgreSQL, the
// store that replicas of a role share: a connection pool whose sessions
// work in the role's own schema, brought to the role's schema version at
// start by numbered migrations that exactly one replica applies.
package pgdb

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// IsURL reports whether s, a --store flag or a Store option, names a
// PostgreSQL database (a postgres:// or postgresql:// URL) rather than a
// SQLite file.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// sessionSettings bound what one stalled replica can do to the others: a
// replica stopped mid-transaction (its connection open) holds row locks
// that another replica's upload or ingest then waits on; its transaction
// is ended after idle_in_transaction_session_timeout, a dead peer's
// connection is noticed by TCP keepalives within about a minute, and no
// statement waits on a lock longer than lock_timeout (the commit fails,
// the upload is answered 503 and retried). Advisory locks that may wait
// long (migrations, a plan's calibration) are taken by polling (Lock).
//
// Every store's proof sketch assumes READ COMMITTED (a statement sees
// what committed before it began): it is set here, so that a database or
// role whose default is REPEATABLE READ cannot void them (the review of
// issue 25 found the issuer granting one identity two tokens under it).
var sessionSettings = map[string]string{
	"default_transaction_isolation":       "read committed",
	"lock_timeout":                        "30s",
	"idle_in_transaction_session_timeout": "60s",
	"tcp_keepalives_idle":                 "30",
	"tcp_keepalives_interval":             "10",
	"tcp_keepalives_count":                "3",
}

// Lock takes the session advisory lock (LockClass, key) on conn, polling
// with pg_try_advisory_lock (lock_timeout would cut a blocking wait
// short) until it is free or ctx is done. Unlock it with
// pg_advisory_unlock on the same connection.
func Lock(ctx context.Context, conn *pgxpool.Conn, key int32) error {
	for {
		var got bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, lockClass, key).Scan(&got); err != nil {
			return err
		}
		if got {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// lockClass is the first key of the advisory locks Blanket takes (the
// second names what is locked), so that they do not collide with an
// application sharing the database.
const lockClass = 0x626c6e6b // "blnk"

// Lock keys (the second key of an advisory lock under lockClass).
const (
	// LockMigrate serializes migrations of one schema (with the schema's
	// hash: see Open).
	LockMigrate = 1
	// LockPublish serializes the collector's publication of a plan.
	LockPublish = 2
)

// PoolLockClass is the first key of the shuffler's per-pool advisory
// locks (the second is the hash of the pool's key and suite).
const PoolLockClass = lockClass + 1

// PeriodLockClass is the first key of the shuffler's per-period advisory
// locks (the second is the hash of the period's length and end): accepts
// hold them shared, a period's closing exclusive. A class of their own,
// so that a hash collision with a pool's lock cannot make a release skip
// its pool while accepts run.
const PeriodLockClass = lockClass + 2

// LockClass returns the first key of Blanket's advisory locks, for the
// two-key forms pg_advisory_lock(int, int) and pg_try_advisory_xact_lock.
func LockClass() int32 { return lockClass }

// Open connects to the database at url with every session's search_path
// set to schema (created when missing), and brings schema to
// len(migrations): migrations[i] is the SQL (one or more statements) that
// takes it from version i to i+1. Each applies in its own transaction,
// recorded in schema.migrations, under a session advisory lock, so that
// replicas starting together apply each once. A schema of a later version
// than len(migrations) (a newer build ran) is refused. The pool holds at
// most maxConns connections (0: pgx's default, 4 or the number of CPUs).
func Open(ctx context.Context, url, schema string, migrations []string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgdb: %s: %w", Redact(url), err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.ConnConfig.RuntimeParams["application_name"] = "blanket " + schema
	for k, v := range sessionSettings {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	if cfg.MaxConns < 2 {
		// A session advisory lock (LockPublish) holds one connection
		// while the work it guards runs on another.
		return nil, fmt.Errorf("pgdb: %s: pool_max_conns = %d, must be at least 2", Redact(url), cfg.MaxConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgdb: %s: %w", Redact(url), err)
	}
	if err := migrate(ctx, pool, schema, migrations); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgdb: %s, schema %s: %w", Redact(url), schema, err)
	}
	return pool, nil
}

// migrate applies the migrations schema lacks.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, migrations []string) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	var key int32
	if err := conn.QueryRow(ctx, `SELECT hashtext($1)`, fmt.Sprintf("%d:%s", LockMigrate, schema)).Scan(&key); err != nil {
		return err
	}
	if err := Lock(ctx, conn, key); err != nil {
		return fmt.Errorf("locking for migrations: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1, $2)`, lockClass, key)
	id := pgx.Identifier{schema}.Sanitize()
	if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+id); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+id+`.migrations (
		version integer PRIMARY KEY,
		applied timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return err
	}
	var version int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+id+`.migrations`).Scan(&version); err != nil {
		return err
	}
	if version > len(migrations) {
		return fmt.Errorf("the schema is at version %d, later than this build's %d: a newer blanket wrote it", version, len(migrations))
	}
	for v := version; v < len(migrations); v++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO `+id+`.migrations (version) VALUES ($1)`, v+1)
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
	}
	return nil
}

// Ready returns nil when the database answers and takes writes (not a
// read-only standby).
func Ready(ctx context.Context, pool *pgxpool.Pool) error {
	var ro string
	if err := pool.QueryRow(ctx, `SHOW transaction_read_only`).Scan(&ro); err != nil {
		return fmt.Errorf("the database does not answer: %w", err)
	}
	if ro != "off" {
		return errors.New("the database is read-only")
	}
	return nil
}

// Redact returns url without its password (in the user part or a
// password parameter), for errors and logs; a URL that does not parse is
// not shown at all.
func Redact(raw string) string {
	u, err := neturl.Parse(raw)
	if err != nil {
		return "<unparseable store URL>"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Collect runs q on db and collects its rows with scan.
func Collect[T any](ctx context.Context, db Querier, q string, scan pgx.RowToFunc[T], args ...any) ([]T, error) {
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scan)
}
