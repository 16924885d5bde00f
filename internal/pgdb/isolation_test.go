package pgdb

import (
	"context"
	"os"
	"testing"

	"github.com/blanket-dp/blanket/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestReadCommittedWhateverTheDatabaseDefault: the stores' proof sketches
// assume READ COMMITTED; a database whose default is REPEATABLE READ must
// not change what Open's sessions run at (the review of issue 25 found the
// issuer granting one identity two tokens under it).
func TestReadCommittedWhateverTheDatabaseDefault(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{db}.Sanitize()+" SET default_transaction_isolation = 'repeatable read'"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	pool, err := Open(ctx, url, "blanket_isolation_test", nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var level string
	if err := pool.QueryRow(ctx, "SHOW transaction_isolation").Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level != "read committed" {
		t.Errorf("a session of Open runs at %q, want read committed", level)
	}
}
