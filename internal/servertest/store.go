package servertest

import (
	"os"
	"sync"
	"testing"

	"github.com/blanket-dp/blanket/internal/pgtest"
)

// StoreEnv names the environment variable that moves the fixtures of the
// shuffler's and the collector's tests to PostgreSQL: with
// BLANKET_TEST_STORE=postgres every fixture's store is a fresh database
// of the throwaway server (pgtest), so that the whole suites run on both
// backends (make audit runs them so; make test runs the store tests on
// both, StoreKinds).
const StoreEnv = "BLANKET_TEST_STORE"

var (
	storesMu sync.Mutex
	stores   = map[string]string{} // data directory -> database URL
)

// Store returns the Store option for a fixture with data directory dir:
// "" (SQLite in dir) by default, or under BLANKET_TEST_STORE=postgres the
// URL of a PostgreSQL database of dir's own, the same for every fixture
// of dir (a restart finds its state).
func Store(t testing.TB, dir string) string {
	if os.Getenv(StoreEnv) != "postgres" {
		return ""
	}
	return StoreOf(t, "postgres", dir)
}

// StoreKinds are the backends the store tests run on.
var StoreKinds = []string{"sqlite", "postgres"}

// StoreOf returns the Store option of kind ("sqlite" or "postgres") for
// data directory dir: "" for SQLite (its file in dir), a database of
// dir's own for PostgreSQL.
func StoreOf(t testing.TB, kind, dir string) string {
	t.Helper()
	if kind == "sqlite" {
		return ""
	}
	storesMu.Lock()
	defer storesMu.Unlock()
	if u, ok := stores[dir]; ok {
		return u
	}
	u := pgtest.URL(t)
	stores[dir] = u
	return u
}

// SQLiteOnly skips a test of the SQLite store's own files when the
// fixtures run on PostgreSQL.
func SQLiteOnly(t testing.TB) {
	t.Helper()
	if os.Getenv(StoreEnv) == "postgres" {
		t.Skip("a test of the SQLite store's files")
	}
}
