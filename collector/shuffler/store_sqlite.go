package shuffler

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/blanket-dp/blanket/internal/sqlitedb"
	"github.com/blanket-dp/blanket/sdk/report"
)

var sqliteSchema = []string{
	`CREATE TABLE IF NOT EXISTS meta (
		key TEXT PRIMARY KEY,
		value BLOB NOT NULL
	) WITHOUT ROWID`,
	// pool holds accepted reports until release. id is a row number
	// (never sent anywhere); there is no time column.
	`CREATE TABLE IF NOT EXISTS pool (
		id INTEGER PRIMARY KEY,
		metric TEXT NOT NULL,
		suite INTEGER NOT NULL,
		sealed BLOB NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS pool_metric ON pool (metric, suite, id)`,
	// seen holds HMAC-SHA256(salt, report id)[:16] of recently accepted
	// reports, by dedup generation, with the end and length of the
	// report's period (kept until its pools close).
	`CREATE TABLE IF NOT EXISTS seen (
		h BLOB PRIMARY KEY,
		gen INTEGER NOT NULL,
		period_end INTEGER NOT NULL,
		period_len INTEGER NOT NULL
	) WITHOUT ROWID`,
	`CREATE INDEX IF NOT EXISTS seen_gen ON seen (gen)`,
	// spent holds the keys of the admission tokens spent by accepted
	// reports (issuer.SpentKey: a hash of the pool key and the token's
	// input), with the end and length of their period, until its
	// deadline; nothing links a key to a report or its id.
	`CREATE TABLE IF NOT EXISTS spent (
		k BLOB PRIMARY KEY,
		period_end INTEGER NOT NULL,
		period_len INTEGER NOT NULL
	) WITHOUT ROWID`,
	// pools holds the pools learned after start (AddPlan: the pools of
	// plans the shuffler relayed), so that a restart keeps taking them;
	// period_lengths their periods' lengths in seconds.
	`CREATE TABLE IF NOT EXISTS pools (
		name TEXT PRIMARY KEY
	) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS period_lengths (
		seconds INTEGER PRIMARY KEY
	)`,
	// forgotten holds, per period length, the latest end of a closed
	// period: one some of whose seen ids were deleted, or one closed for
	// its final release (closePeriod). Such periods, and every earlier one
	// of that length, are refused.
	`CREATE TABLE IF NOT EXISTS forgotten (
		period_len INTEGER PRIMARY KEY,
		period_end INTEGER NOT NULL
	)`,
	// outgoing holds released batches (report.EncodeBatch bytes) until the
	// collector acknowledges them.
	// released_at is the batch's release (Unix seconds, the shuffler's
	// clock), for the age of the oldest (oldestOutgoing).
	`CREATE TABLE IF NOT EXISTS outgoing (
		id BLOB PRIMARY KEY,
		metric TEXT NOT NULL,
		n INTEGER NOT NULL,
		body BLOB NOT NULL,
		released_at INTEGER NOT NULL DEFAULT 0
	)`,
}

// sqliteAdded are the columns added after a release (sqlitedb.Schema.Added).
// A batch released before outgoing had released_at gets the time the
// file is opened (openSQLiteStore).
var sqliteAdded = []sqlitedb.Column{{Table: "outgoing", Name: "released_at", Decl: "INTEGER NOT NULL DEFAULT 0"}}

// sqliteNewest names the columns a file of sqliteSchema has that files
// of pre-release builds lack (sqlitedb.Schema.Newest).
var sqliteNewest = map[string]string{"seen": "period_end"}

// sqliteStore is the shuffler's state in one SQLite file, for one
// process. Dedup retention is by generations of genSize accepted ids
// (Options.DedupWindow): when a generation fills, accept deletes the ids
// of the generations beyond the last dedupGenerations full ones, except
// those whose period is still open.
type sqliteStore struct {
	db *sqlitedb.DB
	// genSize, grace and now configure retention (Options.DedupWindow,
	// the shuffler's grace, raised by setGrace, and Now).
	genSize int64
	grace   atomic.Int64
	now     func() int64
	// gen and genCount are the current dedup generation and its size,
	// and gone the closed periods as accept last read them; accept,
	// called by one goroutine at a time, owns them.
	gen, genCount int64
	gone          map[int64]int64
}

// openSQLiteStore opens (creating) the shuffler's database at path.
func openSQLiteStore(ctx context.Context, path string, genSize, grace int64, now func() int64) (*sqliteStore, error) {
	// secure_delete overwrites deleted rows, so that released reports and
	// their pool order do not linger in free pages of the file.
	db, err := sqlitedb.Open(ctx, path, sqlitedb.Schema{Statements: sqliteSchema, Newest: sqliteNewest, Added: sqliteAdded}, "secure_delete(ON)")
	if err != nil {
		return nil, err
	}
	if _, err := db.W.ExecContext(ctx, `UPDATE outgoing SET released_at = ? WHERE released_at = 0`, now()); err != nil {
		db.Close()
		return nil, fmt.Errorf("shuffler: outgoing batches' release times: %w", err)
	}
	st := &sqliteStore{db: db, genSize: genSize, now: now}
	st.grace.Store(grace)
	if err := st.loadGeneration(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if st.gone, err = st.forgotten(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return st, nil
}

// loadGeneration reads (creating) the dedup generation and counts its ids.
func (st *sqliteStore) loadGeneration(ctx context.Context) error {
	if _, err := st.db.W.ExecContext(ctx, `INSERT OR IGNORE INTO meta (key, value) VALUES ('gen', '0')`); err != nil {
		return fmt.Errorf("shuffler: meta: %w", err)
	}
	var gen string
	if err := st.db.W.QueryRowContext(ctx, `SELECT CAST(value AS TEXT) FROM meta WHERE key = 'gen'`).Scan(&gen); err != nil {
		return fmt.Errorf("shuffler: meta: %w", err)
	}
	g, err := strconv.ParseInt(gen, 10, 64)
	if err != nil {
		return fmt.Errorf("shuffler: meta: generation %q: %w", gen, err)
	}
	st.gen = g
	return st.db.W.QueryRowContext(ctx, `SELECT COUNT(*) FROM seen WHERE gen = ?`, g).Scan(&st.genCount)
}

func (st *sqliteStore) salt(ctx context.Context) ([]byte, error) {
	salt := make([]byte, 32)
	rand.Read(salt)
	if _, err := st.db.W.ExecContext(ctx, `INSERT OR IGNORE INTO meta (key, value) VALUES ('salt', ?)`, salt); err != nil {
		return nil, fmt.Errorf("shuffler: meta: %w", err)
	}
	var out []byte
	if err := st.db.W.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'salt'`).Scan(&out); err != nil {
		return nil, fmt.Errorf("shuffler: meta: %w", err)
	}
	return out, nil
}

func (st *sqliteStore) learned(ctx context.Context) ([]string, []int64, error) {
	var pools []string
	var lengths []int64
	if err := st.db.QueryColumn(ctx, `SELECT name FROM pools`, func(r *sql.Rows) error {
		var p string
		err := r.Scan(&p)
		pools = append(pools, p)
		return err
	}); err != nil {
		return nil, nil, fmt.Errorf("shuffler: learned pools: %w", err)
	}
	if err := st.db.QueryColumn(ctx, `SELECT seconds FROM period_lengths`, func(r *sql.Rows) error {
		var l int64
		err := r.Scan(&l)
		lengths = append(lengths, l)
		return err
	}); err != nil {
		return nil, nil, fmt.Errorf("shuffler: learned period lengths: %w", err)
	}
	return pools, lengths, nil
}

func (st *sqliteStore) learn(ctx context.Context, pools []string, lengths []int64) error {
	var errs []error
	for _, p := range pools {
		if _, err := st.db.W.ExecContext(ctx, `INSERT OR IGNORE INTO pools (name) VALUES (?)`, p); err != nil {
			errs = append(errs, fmt.Errorf("pool %q: %w", p, err))
		}
	}
	for _, l := range lengths {
		if _, err := st.db.W.ExecContext(ctx, `INSERT OR IGNORE INTO period_lengths (seconds) VALUES (?)`, l); err != nil {
			errs = append(errs, fmt.Errorf("period length %d: %w", l, err))
		}
	}
	return errors.Join(errs...)
}

func (st *sqliteStore) forgotten(ctx context.Context) (map[int64]int64, error) {
	m := map[int64]int64{}
	err := st.db.QueryColumn(ctx, `SELECT period_len, period_end FROM forgotten`, func(r *sql.Rows) error {
		var l, e int64
		err := r.Scan(&l, &e)
		m[l] = e
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("shuffler: forgotten periods: %w", err)
	}
	return m, nil
}

// readForgottenTx reads the closed periods inside tx.
func readForgottenTx(ctx context.Context, tx *sql.Tx) (map[int64]int64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT period_len, period_end FROM forgotten`)
	if err != nil {
		return nil, fmt.Errorf("shuffler: forgotten periods: %w", err)
	}
	defer rows.Close()
	m := map[int64]int64{}
	for rows.Next() {
		var l, e int64
		if err := rows.Scan(&l, &e); err != nil {
			return nil, fmt.Errorf("shuffler: forgotten periods: %w", err)
		}
		m[l] = e
	}
	return m, rows.Err()
}

func (st *sqliteStore) setGrace(g int64) { st.grace.Store(g) }

// closePeriod records p as closed. One process writes the file, through
// one connection: every accept is a transaction before or after this one,
// and one after it reads p as closed (accept).
func (st *sqliteStore) closePeriod(ctx context.Context, p report.Period) error {
	_, err := st.db.W.ExecContext(ctx, `INSERT INTO forgotten (period_len, period_end) VALUES (?, ?)
		ON CONFLICT (period_len) DO UPDATE SET period_end = MAX(period_end, excluded.period_end)`, p.Length, p.End())
	if err != nil {
		return fmt.Errorf("shuffler: closing period %s: %w", p, err)
	}
	return nil
}

func (st *sqliteStore) accept(ctx context.Context, group []*acceptReq) ([]acceptRes, bool, error) {
	tx, err := st.db.W.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	defer tx.Rollback()
	// Read in the transaction: a period closed (closePeriod) by a
	// transaction committed before this one is refused here.
	forgotten, err := readForgottenTx(ctx, tx)
	if err != nil {
		return nil, false, err
	}
	changed := !maps.Equal(forgotten, st.gone)
	seen, err := tx.PrepareContext(ctx, `INSERT OR IGNORE INTO seen (h, gen, period_end, period_len) VALUES (?, ?, ?, ?)`)
	if err != nil {
		return nil, false, err
	}
	defer seen.Close()
	spent, err := tx.PrepareContext(ctx, `INSERT OR IGNORE INTO spent (k, period_end, period_len) VALUES (?, ?, ?)`)
	if err != nil {
		return nil, false, err
	}
	defer spent.Close()
	unseen, err := tx.PrepareContext(ctx, `DELETE FROM seen WHERE h = ?`)
	if err != nil {
		return nil, false, err
	}
	defer unseen.Close()
	pool, err := tx.PrepareContext(ctx, `INSERT INTO pool (metric, suite, sealed) VALUES (?, ?, ?)`)
	if err != nil {
		return nil, false, err
	}
	defer pool.Close()
	inserted := func(st *sql.Stmt, args ...any) (bool, error) {
		res, err := st.ExecContext(ctx, args...)
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n > 0, err
	}
	gen, count := st.gen, st.genCount
	results := make([]acceptRes, len(group))
	for i, r := range group {
		for _, it := range r.items {
			if f, ok := forgotten[it.period.Length]; ok && it.period.End() <= f {
				// Checked by accepts too; a rollover or a closing may
				// have come between.
				results[i].late = append(results[i].late, it.index)
				continue
			}
			// The id first: a retry of an accepted report is a
			// duplicate, not a second spend of its token.
			if ok, err := inserted(seen, it.h, gen, it.period.End(), it.period.Length); err != nil {
				return nil, false, err
			} else if !ok {
				results[i].duplicates++
				continue
			}
			if it.spent != nil {
				if ok, err := inserted(spent, it.spent, it.period.End(), it.period.Length); err != nil {
					return nil, false, err
				} else if !ok {
					// Spent by another report: refused, and its id
					// not remembered (it is not stored).
					if _, err := unseen.ExecContext(ctx, it.h); err != nil {
						return nil, false, err
					}
					results[i].spent = append(results[i].spent, it.index)
					continue
				}
			}
			if _, err := pool.ExecContext(ctx, it.metric, int64(it.suite), it.sealed); err != nil {
				return nil, false, err
			}
			results[i].accepted++
			count++
		}
	}
	if count >= st.genSize {
		gen, count = gen+1, 0
		// An id is kept past its generation while its period's pools
		// are open (until the deadline, periodDeadline): a retry then
		// is always a duplicate, never a second report of the period.
		// The latest end of a period of each length whose ids go is
		// recorded first: such periods are refused from then on,
		// whatever grace or clock a later run has.
		const deadline = `period_end + (CASE WHEN ? > 0 THEN ? ELSE period_len END) <= ?`
		grace, now := st.grace.Load(), st.now()
		if err := forgetRows(ctx, tx, "seen", `gen <= ? AND `+deadline, gen-1-dedupGenerations, grace, grace, now); err != nil {
			return nil, false, err
		}
		// The spent tokens of periods past their deadline go too, their
		// periods recorded likewise: a token is spent at most once
		// while its period is taken, and refused with its period after.
		if err := forgetRows(ctx, tx, "spent", deadline, grace, grace, now); err != nil {
			return nil, false, err
		}
		changed = true
		if _, err := tx.ExecContext(ctx, `UPDATE meta SET value = ? WHERE key = 'gen'`, strconv.FormatInt(gen, 10)); err != nil {
			return nil, false, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, false, err
	}
	st.gen, st.genCount, st.gone = gen, count, forgotten
	if changed {
		gone, err := st.forgotten(ctx)
		if err != nil {
			return nil, false, err
		}
		st.gone = gone
	}
	return results, changed, nil
}

// forget does nothing: the SQLite store forgets by generation in accept.
func (st *sqliteStore) forget(context.Context, int64, int64) (bool, error) { return false, nil }

func (st *sqliteStore) poolSizes(ctx context.Context) ([]poolSize, error) {
	var out []poolSize
	err := st.db.QueryColumn(ctx, `SELECT metric, suite, COUNT(*) FROM pool GROUP BY metric, suite ORDER BY metric, suite`, func(r *sql.Rows) error {
		var p poolSize
		var suite int64
		err := r.Scan(&p.metric, &suite, &p.n)
		p.suite = uint16(suite)
		out = append(out, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("shuffler: pool sizes: %w", err)
	}
	return out, nil
}

func (st *sqliteStore) expire(ctx context.Context, key string, suite uint16, nMin int) (int64, error) {
	// One statement on the one writer: no upload commits between the
	// count and the delete.
	r, err := st.db.W.ExecContext(ctx, `DELETE FROM pool WHERE metric = ? AND suite = ?
		AND (SELECT COUNT(*) FROM pool WHERE metric = ? AND suite = ?) < ?`, key, int64(suite), key, int64(suite), nMin)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

func (st *sqliteStore) release(ctx context.Context, key string, suite uint16, nMin, keep, maxBatch int, seal func([][]byte) (report.ID, []byte)) (int, error) {
	tx, err := st.db.W.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	// Counted in the write transaction: no upload commits until it ends.
	var c int64
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM pool WHERE metric = ? AND suite = ?`, key, int64(suite)).Scan(&c); err != nil {
		return 0, err
	}
	k := batchSize(c, nMin, keep, maxBatch)
	if k == 0 {
		return 0, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, sealed FROM pool WHERE metric = ? AND suite = ? ORDER BY id LIMIT ?`, key, int64(suite), k)
	if err != nil {
		return 0, err
	}
	var sealed [][]byte
	var last int64
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&last, &b); err != nil {
			rows.Close()
			return 0, err
		}
		sealed = append(sealed, b)
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if len(sealed) != k {
		return 0, fmt.Errorf("shuffler: pool %s counted %d reports, read %d of the %d to release", key, c, len(sealed), k)
	}
	id, body := seal(sealed)
	if _, err := tx.ExecContext(ctx, `INSERT INTO outgoing (id, metric, n, body, released_at) VALUES (?, ?, ?, ?, ?)`, id[:], key, len(sealed), body, st.now()); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM pool WHERE metric = ? AND suite = ? AND id <= ?`, key, int64(suite), last); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return len(sealed), nil
}

func (st *sqliteStore) outgoing(ctx context.Context) ([]outgoingBatch, error) {
	var out []outgoingBatch
	err := st.db.QueryColumn(ctx, `SELECT id, metric, n FROM outgoing ORDER BY rowid`, func(r *sql.Rows) error {
		var b outgoingBatch
		var id []byte
		err := r.Scan(&id, &b.metric, &b.n)
		copy(b.id[:], id)
		out = append(out, b)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("shuffler: listing outgoing batches: %w", err)
	}
	return out, nil
}

// claim reads the batch: one process sends every batch, no lease needed.
func (st *sqliteStore) claim(ctx context.Context, id report.ID, _ int64) ([]byte, time.Time, error) {
	var body []byte
	err := st.db.R.QueryRowContext(ctx, `SELECT body FROM outgoing WHERE id = ?`, id[:]).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, time.Time{}, nil
	}
	return body, time.Time{}, err
}

// renew does nothing: one process sends every batch.
func (st *sqliteStore) renew(context.Context, report.ID, int64) error { return nil }

func (st *sqliteStore) acknowledged(ctx context.Context, id report.ID) error {
	_, err := st.db.W.ExecContext(ctx, `DELETE FROM outgoing WHERE id = ?`, id[:])
	return err
}

func (st *sqliteStore) outgoingCount(ctx context.Context) (int64, error) {
	var n int64
	err := st.db.R.QueryRowContext(ctx, `SELECT COUNT(*) FROM outgoing`).Scan(&n)
	return n, err
}

func (st *sqliteStore) oldestOutgoing(ctx context.Context) (time.Duration, bool, error) {
	var at sql.NullInt64
	if err := st.db.R.QueryRowContext(ctx, `SELECT MIN(released_at) FROM outgoing`).Scan(&at); err != nil || !at.Valid {
		return 0, false, err
	}
	return time.Duration(max(0, st.now()-at.Int64)) * time.Second, true, nil
}

func (st *sqliteStore) ready(ctx context.Context) error { return st.db.Ready(ctx) }

func (st *sqliteStore) close() error { return st.db.Close() }

// forgetRows deletes the rows of table (seen or spent: each with
// period_end and period_len) that where selects, in tx, after recording in
// forgotten the latest end of a period of each length among them.
func forgetRows(ctx context.Context, tx *sql.Tx, table, where string, args ...any) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO forgotten (period_len, period_end) SELECT period_len, MAX(period_end) FROM `+table+` WHERE `+where+` GROUP BY period_len
			ON CONFLICT (period_len) DO UPDATE SET period_end = MAX(period_end, excluded.period_end)`, args...); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE `+where, args...)
	return err
}
