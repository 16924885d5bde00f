package collector

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"

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

// database is a SQLite file opened as one writer connection and a small
// pool of readers.
type database struct {
	w, r *sql.DB
}

// openDatabase opens (creating) the database at path with the extra
// pragmas on every connection, and applies schema.
func openDatabase(ctx context.Context, path string, schema []string, pragmas ...string) (*database, error) {
	w, err := sql.Open("sqlite", dsn(path, false, pragmas))
	if err != nil {
		return nil, fmt.Errorf("collector: opening %s: %w", path, err)
	}
	// SQLite has one writer at a time; one connection serializes the
	// writers in Go instead of in busy retries.
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	for _, stmt := range schema {
		if _, err := w.ExecContext(ctx, stmt); err != nil {
			w.Close()
			return nil, fmt.Errorf("collector: %s: schema: %w", path, err)
		}
	}
	r, err := sql.Open("sqlite", dsn(path, true, pragmas))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("collector: opening %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	return &database{w: w, r: r}, nil
}

func (d *database) close() error {
	err1 := d.r.Close()
	err2 := d.w.Close()
	if err2 != nil {
		return err2
	}
	return err1
}
