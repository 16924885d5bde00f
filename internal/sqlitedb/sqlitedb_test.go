package sqlitedb

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestAddedColumns opens a file written with a release's schema under a
// later one that adds a column: the rows written before get its default,
// and opening again changes nothing.
func TestAddedColumns(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	old := Schema{Statements: []string{`CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, held INTEGER NOT NULL DEFAULT 0)`}, Newest: map[string]string{"t": "held"}}
	db, err := Open(ctx, path, old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.W.ExecContext(ctx, `INSERT INTO t (id) VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	added := old
	added.Added = []Column{{Table: "t", Name: "draws", Decl: "INTEGER NOT NULL DEFAULT 0"}}
	for range 2 {
		db, err = Open(ctx, path, added)
		if err != nil {
			t.Fatal(err)
		}
		var draws int
		if err := db.R.QueryRowContext(ctx, `SELECT draws FROM t WHERE id = 1`).Scan(&draws); err != nil || draws != 0 {
			t.Fatalf("draws = %d, %v; want the default 0", draws, err)
		}
		db.Close()
	}

	bad := old
	bad.Added = []Column{{Table: "t", Name: "x", Decl: "INTEGER NOT NULL"}}
	if _, err := Open(ctx, path, bad); err == nil || !strings.Contains(err.Error(), "adding column x to t") {
		t.Fatalf("a NOT NULL column without a default: err = %v, want one naming the column", err)
	}
}
