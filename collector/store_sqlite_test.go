package collector

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/internal/servertest"
)

// TestCollectorRefusesPreReleaseDatabase: a database whose batches table
// is of a pre-release schema (the first one: id alone as key, no
// messages; or one without periods or held batches) is refused at open
// with an error that names the missing column. Nothing migrates such a
// file: no release ever wrote one.
func TestCollectorRefusesPreReleaseDatabase(t *testing.T) {
	servertest.SQLiteOnly(t)
	for name, batches := range map[string]string{
		"one row per batch": `CREATE TABLE batches (id BLOB PRIMARY KEY, metric TEXT NOT NULL, epoch TEXT NOT NULL, n INTEGER NOT NULL, malformed INTEGER NOT NULL, eps REAL, delta REAL)`,
		"no period columns": `CREATE TABLE batches (id BLOB NOT NULL, metric TEXT NOT NULL, epoch TEXT NOT NULL, n INTEGER NOT NULL, malformed INTEGER NOT NULL, messages INTEGER NOT NULL, eps REAL, delta REAL, PRIMARY KEY (id, metric, epoch))`,
		"no held column": `CREATE TABLE batches (id BLOB NOT NULL, metric TEXT NOT NULL, epoch TEXT NOT NULL, n INTEGER NOT NULL, malformed INTEGER NOT NULL, messages INTEGER NOT NULL, eps REAL, delta REAL,
			period_start INTEGER NOT NULL DEFAULT 0, period_len INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (id, metric, epoch))`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := sql.Open("sqlite", filepath.Join(dir, DBFile))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(batches); err != nil {
				t.Fatal(err)
			}
			db.Close()
			c, err := OpenCollector(context.Background(), CollectorOptions{Plan: testPlan(t, 10), Dir: dir, Open: openBuiltin, Logger: testLogger(t)})
			if err == nil {
				c.Close()
				t.Fatal("a pre-release database opened")
			}
			if !strings.Contains(err.Error(), "batches has no column held") || !strings.Contains(err.Error(), "pre-release") {
				t.Fatalf("error %q, want it to name the missing column and the pre-release build", err)
			}
		})
	}
}
