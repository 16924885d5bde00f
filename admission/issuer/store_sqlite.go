package issuer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/blanket-dp/blanket/internal/sqlitedb"
)

var sqliteSchema = []string{
	// grants holds one row per identity and pool key granted: the
	// identity's keyed hash (identityHash), the SHA-256 of the blinded
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

// sqliteStore keeps the grants in one SQLite file, for one process. Its
// grants are committed in groups: one goroutine (commitLoop) takes every
// request waiting and stores them in one transaction, so that concurrent
// requests share a commit (and its fsync) instead of queueing for one
// each; each request is answered once its group is committed.
type sqliteStore struct {
	db   *sqlitedb.DB
	file string
	jobs chan *grantJob
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

// grantJob is one request's grants waiting for their group's commit.
type grantJob struct {
	gs   []grant
	out  []stored
	err  error
	done chan struct{}
}

// maxGroup bounds the requests committed in one transaction.
const maxGroup = 256

// errClosed reports a grant asked of a closed store.
var errClosed = errors.New("issuer: the store is closed")

// path returns the file of the store.
func (st *sqliteStore) path() string { return st.file }

// openSQLiteStore opens (creating) the grants database at path.
func openSQLiteStore(ctx context.Context, path string) (*sqliteStore, error) {
	// secure_delete overwrites forgotten grants, so that who was granted
	// what does not linger in free pages of the file.
	// A 32 MiB page cache holds the grants of a few hundred thousand
	// identities (a grant lands on a random page of the table): fewer
	// pages read again at each insert.
	db, err := sqlitedb.Open(ctx, path, sqlitedb.Schema{Statements: sqliteSchema}, "secure_delete(ON)", "cache_size(-32768)")
	if err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	st := &sqliteStore{db: db, file: path, jobs: make(chan *grantJob), quit: make(chan struct{}), done: make(chan struct{})}
	go st.commitLoop()
	return st, nil
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

// grant hands gs to the commit loop and waits for its group's commit.
func (st *sqliteStore) grant(ctx context.Context, gs []grant) ([]stored, error) {
	j := &grantJob{gs: gs, done: make(chan struct{})}
	select {
	case st.jobs <- j:
	case <-st.quit:
		return nil, errClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	<-j.done // a group takes milliseconds; its grants may be committed
	return j.out, j.err
}

// commitLoop commits the waiting requests' grants, a group at a time,
// until close.
func (st *sqliteStore) commitLoop() {
	defer close(st.done)
	for {
		var group []*grantJob
		select {
		case j := <-st.jobs:
			group = append(group, j)
		case <-st.quit:
			return
		}
	more:
		for len(group) < maxGroup {
			select {
			case j := <-st.jobs:
				group = append(group, j)
			default:
				break more
			}
		}
		if err := st.commitGroup(context.Background(), group); err != nil {
			for _, j := range group {
				j.out, j.err = nil, err
			}
		}
		for _, j := range group {
			close(j.done)
		}
	}
}

// commitGroup stores the grants of group in one immediate transaction:
// SQLite's one writer sees no forget between its read of forgotten and
// its inserts. A later request of the group sees the grants of the
// earlier ones, as it would in a transaction of its own. Each request
// runs under a savepoint: one that fails is rolled back and answered its
// error alone (the others go on). When the transaction itself fails,
// nothing of the group is stored and commitGroup returns the error.
func (st *sqliteStore) commitGroup(ctx context.Context, group []*grantJob) error {
	tx, err := st.db.W.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("issuer: grant: %w", err)
	}
	defer tx.Rollback()
	forgotten, err := readForgottenSQLite(ctx, tx)
	if err != nil {
		return fmt.Errorf("issuer: grant: %w", err)
	}
	for _, j := range group {
		if _, err := tx.ExecContext(ctx, `SAVEPOINT request`); err != nil {
			return fmt.Errorf("issuer: grant: %w", err)
		}
		if j.out, j.err = grantSQLite(ctx, tx, forgotten, j.gs); j.err != nil {
			j.out = nil
			if _, err := tx.ExecContext(ctx, `ROLLBACK TO request`); err != nil {
				return fmt.Errorf("issuer: grant: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `RELEASE request`); err != nil {
			return fmt.Errorf("issuer: grant: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("issuer: grant: %w", err)
	}
	return nil
}

// grantSQLite stores gs in tx and returns what is stored for each.
func grantSQLite(ctx context.Context, tx *sql.Tx, forgotten map[int64]int64, gs []grant) ([]stored, error) {
	out := make([]stored, len(gs))
	for i, g := range gs {
		if isClosed(forgotten, g.period) {
			out[i].closed = true
			continue
		}
		// The new grant comes back from RETURNING; an earlier one of the
		// identity and pool key (no row returned) is read.
		var blinded []byte
		var o stored
		err := tx.QueryRowContext(ctx, `INSERT INTO grants (identity, pool_key, blinded, evaluated, period_len, period_end, deadline)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (identity, pool_key) DO NOTHING RETURNING blinded, evaluated`,
			g.identity[:], g.pool, g.blinded[:], g.evaluated, g.period.Length, g.period.End(), g.deadline).Scan(&blinded, &o.evaluated)
		if errors.Is(err, sql.ErrNoRows) {
			err = tx.QueryRowContext(ctx, `SELECT blinded, evaluated FROM grants WHERE identity = ? AND pool_key = ?`,
				g.identity[:], g.pool).Scan(&blinded, &o.evaluated)
		}
		if err != nil {
			return nil, fmt.Errorf("issuer: grant: %w", err)
		}
		copy(o.blinded[:], blinded)
		out[i] = o
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

// close stops the commit loop (a grant asked then fails) and closes the
// database.
func (st *sqliteStore) close() error {
	st.once.Do(func() { close(st.quit) })
	<-st.done
	return st.db.Close()
}
