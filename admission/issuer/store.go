package issuer

import (
	"context"
	"path/filepath"

	"github.com/blanket-dp/blanket/internal/pgdb"
	"github.com/blanket-dp/blanket/sdk/report"
)

// StoreFile is the SQLite file of an issuer's grants in its data
// directory (Options.Dir), when Options.Store names no PostgreSQL
// database.
const StoreFile = "issuer.db"

// grant is one evaluation the issuer is about to answer: the identity's
// hash, the pool key and its period, the deadline after which it is
// forgotten (the period's end plus the grace, Unix seconds), the SHA-256
// of the blinded element and the evaluated element.
type grant struct {
	identity  identityHash
	pool      string
	period    report.Period
	deadline  int64
	blinded   [32]byte
	evaluated []byte
}

// stored is what the store holds for a grant's identity and pool key:
// the grant itself or an earlier one (a retry: the same blinded hash;
// another request: a different one), or closed when the grant's period
// was forgotten (no grant is stored then).
type stored struct {
	blinded   [32]byte
	evaluated []byte
	closed    bool
}

// store keeps the grants: sqliteStore for one process, pgStore for
// replicas sharing a PostgreSQL database. What a method returns is
// committed.
type store interface {
	// grant stores each grant whose identity and pool key have none, in
	// one transaction, and returns for each what is stored for its
	// identity and pool key. The grants name distinct (identity, pool
	// key) pairs. A grant of a period some of whose grants were forgotten
	// (forgotten, per period length, up to the latest such period's end)
	// is not stored and comes back closed, so that no identity is granted
	// a pool key twice, whatever the replicas' clocks and graces.
	grant(ctx context.Context, gs []grant) ([]stored, error)
	// forget deletes the grants whose deadline is at or before now (on
	// PostgreSQL, at or before the database server's clock too),
	// recording per period length the latest end among them, and returns
	// how many it deleted.
	forget(ctx context.Context, now int64) (int64, error)
	// ready returns nil when the store takes reads and writes.
	ready(ctx context.Context) error
	// close releases the store.
	close() error
}

// openStore opens the store named by spec: a PostgreSQL database for a
// postgres:// URL, else the SQLite file StoreFile in dir.
func openStore(ctx context.Context, spec, dir string) (store, error) {
	if pgdb.IsURL(spec) {
		return openPGStore(ctx, spec)
	}
	return openSQLiteStore(ctx, filepath.Join(dir, StoreFile))
}

// isClosed reports whether a grant of period p is closed under the
// forgotten ends per period length.
func isClosed(forgotten map[int64]int64, p report.Period) bool {
	end, ok := forgotten[p.Length]
	return ok && p.End() <= end
}
