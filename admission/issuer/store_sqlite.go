package issuer

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/blanket-dp/blanket/internal/sqlitedb"
)

var sqliteSchema = []string{
	// grants holds one row per identity and pool key granted: the
	// identity's keyed hash (IdentityHash), the SHA-256 of the blinded
	// element and the evaluated element answered, the pool key's period
	// and the deadline (Unix seconds) after which the row is forgotten.
	`CREATE TABLE IF NOT EXISTS grants (
		identity BLOB NOT NULL,
		pool_key TEXT NOT NULL,
		blinded BLOB NOT NULL,
		evaluated BLOB NOT NULL,
		period_len INTEGER NOT NULL,
		period_end INTEGER NOT NULL,
		deadline INTEGER NOT NULL,
		PRIMARY KEY (identity, pool_key)
	) WITHOUT ROWID`,
	`CREATE INDEX IF NOT EXISTS grants_deadline ON grants (deadline)`,
	// forgotten holds, per period length, the latest end of a period some
	// of whose grants were forgotten: that period and every earlier one
	// of that length are granted no more.
	`CREATE TABLE IF NOT EXISTS forgotten (
		period_len INTEGER PRIMARY KEY,
		period_end INTEGER NOT NULL
	)`,
}

// sqliteStore keeps the grants in one SQLite file, for one process.
type sqliteStore struct {
	db   *sqlitedb.DB
	file string
}

// path returns the file of the store.
func (st *sqliteStore) path() string { return st.file }

// openSQLiteStore opens (creating) the grants database at path.
func openSQLiteStore(ctx context.Context, path string) (*sqliteStore, error) {
	// secure_delete overwrites forgotten grants, so that who was granted
	// what does not linger in free pages of the file.
	db, err := sqlitedb.Open(ctx, path, sqlitedb.Schema{Statements: sqliteSchema}, "secure_delete(ON)")
	if err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	return &sqliteStore{db: db, file: path}, nil
}

// readForgottenSQLite reads the forgotten table in tx.
func readForgottenSQLite(ctx context.Context, tx *sql.Tx) (map[int64]int64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT period_len, period_end FROM forgotten`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := map[int64]int64{}
	for rows.Next() {
		var l, e int64
		if err := rows.Scan(&l, &e); err != nil {
			return nil, err
		}
		m[l] = e
	}
	return m, rows.Err()
}

// grant runs in one immediate transaction: SQLite's one writer sees no
// forget between its read of forgotten and its inserts.
func (st *sqliteStore) grant(ctx context.Context, gs []grant) ([]stored, error) {
	tx, err := st.db.W.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("issuer: grant: %w", err)
	}
	defer tx.Rollback()
	forgotten, err := readForgottenSQLite(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("issuer: grant: %w", err)
	}
	out := make([]stored, len(gs))
	for i, g := range gs {
		if isClosed(forgotten, g.period) {
			out[i].closed = true
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO grants (identity, pool_key, blinded, evaluated, period_len, period_end, deadline)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (identity, pool_key) DO NOTHING`,
			g.identity[:], g.pool, g.blinded[:], g.evaluated, g.period.Length, g.period.End(), g.deadline); err != nil {
			return nil, fmt.Errorf("issuer: grant: %w", err)
		}
		var blinded []byte
		if err := tx.QueryRowContext(ctx, `SELECT blinded, evaluated FROM grants WHERE identity = ? AND pool_key = ?`,
			g.identity[:], g.pool).Scan(&blinded, &out[i].evaluated); err != nil {
			return nil, fmt.Errorf("issuer: grant: %w", err)
		}
		copy(out[i].blinded[:], blinded)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("issuer: grant: %w", err)
	}
	return out, nil
}

func (st *sqliteStore) forget(ctx context.Context, now int64) (int64, error) {
	tx, err := st.db.W.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("issuer: forget: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO forgotten (period_len, period_end)
		SELECT period_len, MAX(period_end) FROM grants WHERE deadline <= ? GROUP BY period_len
		ON CONFLICT (period_len) DO UPDATE SET period_end = MAX(period_end, excluded.period_end)`, now); err != nil {
		return 0, fmt.Errorf("issuer: forget: %w", err)
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM grants WHERE deadline <= ?`, now)
	if err != nil {
		return 0, fmt.Errorf("issuer: forget: %w", err)
	}
	n, _ := res.RowsAffected()
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("issuer: forget: %w", err)
	}
	return n, nil
}

func (st *sqliteStore) ready(ctx context.Context) error { return st.db.Ready(ctx) }

func (st *sqliteStore) close() error { return st.db.Close() }
