// Package sqlitedb opens the embedded SQLite databases of the shuffler and
// the collector: one writer connection and a few readers on a WAL file,
// every commit synced.
package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// dsn returns the data source name of the SQLite database at path.
//
// WAL lets readers run beside the one writer. synchronous(FULL) syncs the
// WAL on every commit: with NORMAL a power loss can undo the last commits,
// and a commit is what the shuffler and the collector acknowledge, so it
// must survive. _txlock=immediate takes the write lock at BEGIN, so that a
// read-modify-write transaction never fails to upgrade its lock.
func dsn(path string, readOnly bool, pragmas []string) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "synchronous(FULL)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
	}
	return path + "?" + q.Encode()
}

// DB is a SQLite file opened as one writer connection (W) and a small
// pool of readers (R).
type DB struct {
	W, R *sql.DB
}

// Schema is what Open applies to a database.
type Schema struct {
	// Statements create what the database lacks (CREATE … IF NOT
	// EXISTS), in order.
	Statements []string
	// Newest names, per table, the column added to it last: a file
	// whose table exists without it was written by a pre-release build,
	// whose schema nothing migrates, and Open refuses it.
	Newest map[string]string
	// Added are columns added to a table after a release: Open adds each
	// one a file's table lacks (ALTER TABLE ... ADD COLUMN), after
	// Statements. A release's files then open in later builds.
	Added []Column
}

// Column is a column added to a table after a release. Decl is its type
// and constraints as ALTER TABLE ADD COLUMN takes them: a NOT NULL
// column needs a DEFAULT, which rows written before fill in.
type Column struct {
	Table, Name, Decl string
}

// Open opens (creating) the database at path with the extra
// pragmas on every connection, and applies schema.
func Open(ctx context.Context, path string, schema Schema, pragmas ...string) (*DB, error) {
	w, err := sql.Open("sqlite", dsn(path, false, pragmas))
	if err != nil {
		return nil, fmt.Errorf("sqlitedb: opening %s: %w", path, err)
	}
	// SQLite has one writer at a time; one connection serializes the
	// writers in Go instead of in busy retries.
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if err := checkNewest(ctx, w, schema.Newest); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlitedb: %s: %w", path, err)
	}
	for _, stmt := range schema.Statements {
		if _, err := w.ExecContext(ctx, stmt); err != nil {
			w.Close()
			return nil, fmt.Errorf("sqlitedb: %s: schema: %w", path, err)
		}
	}
	if err := addColumns(ctx, w, schema.Added); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlitedb: %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", dsn(path, true, pragmas))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlitedb: opening %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	return &DB{W: w, R: r}, nil
}

// Close closes both handles.
func (d *DB) Close() error {
	err1 := d.R.Close()
	err2 := d.W.Close()
	if err2 != nil {
		return err2
	}
	return err1
}

// Ready checks that the database answers a query on its read handle and
// that its write handle takes the write lock (a transaction begun and
// rolled back, nothing written). A writer wedged past the probe's
// deadline (a transaction that never ends, the lock held by another
// process) refuses every upload or batch while reads still answer. A
// long legitimate write (the release of a very large pool) can fail one
// probe; load balancers act on consecutive failures.
func (d *DB) Ready(ctx context.Context) error {
	var n int
	if err := d.R.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master`).Scan(&n); err != nil {
		return fmt.Errorf("the database does not answer: %w", err)
	}
	if n == 0 {
		return errors.New("the database has no tables")
	}
	tx, err := d.W.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("the database does not answer writes: %w", err)
	}
	return tx.Rollback()
}

// checkNewest returns an error naming the first table of newest that
// exists without its newest column.
func checkNewest(ctx context.Context, w *sql.DB, newest map[string]string) error {
	tables := slices.Sorted(maps.Keys(newest))
	for _, table := range tables {
		var columns, has int
		if err := w.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(*) FILTER (WHERE name = ?) FROM pragma_table_info(?)`, newest[table], table).Scan(&columns, &has); err != nil {
			return fmt.Errorf("schema: %w", err)
		}
		if columns > 0 && has == 0 {
			return fmt.Errorf("table %s has no column %s: the file was written by a pre-release build, whose schema is not migrated; move it aside to start a new one", table, newest[table])
		}
	}
	return nil
}

// addColumns adds each column of added its table lacks.
func addColumns(ctx context.Context, w *sql.DB, added []Column) error {
	for _, c := range added {
		var has int
		if err := w.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?`, c.Table, c.Name).Scan(&has); err != nil {
			return fmt.Errorf("schema: %w", err)
		}
		if has > 0 {
			continue
		}
		if _, err := w.ExecContext(ctx, fmt.Sprintf(`ALTER TABLE %s ADD COLUMN %s %s`, c.Table, c.Name, c.Decl)); err != nil {
			return fmt.Errorf("schema: adding column %s to %s: %w", c.Name, c.Table, err)
		}
	}
	return nil
}

// QueryColumn calls scan for each row of q on the read handle.
func (d *DB) QueryColumn(ctx context.Context, q string, scan func(*sql.Rows) error) error {
	rows, err := d.R.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
