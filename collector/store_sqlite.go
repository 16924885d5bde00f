package collector

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/blanket-dp/blanket/internal/sqlitedb"
	"github.com/blanket-dp/blanket/sdk/report"
)

var sqliteSchema = []string{
	// epochs holds every plan the collector has published. epoch is the
	// first 16 hex digits of the published plan's digest; source is the
	// digest of the plan as configured (before calibration), so that a
	// restart with the same plan file reuses the same calibration. plan
	// is the published plan without the key schedule (which is not part
	// of the epoch: keys.go).
	`CREATE TABLE IF NOT EXISTS epochs (
		epoch TEXT PRIMARY KEY,
		source TEXT NOT NULL,
		plan BLOB NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS epochs_source ON epochs (source)`,
	// report_keys is the report key schedule (keys.go): every key's id,
	// public half and first period's start (valid_from, Unix seconds),
	// when it was generated and when its private half was erased (NULL
	// while kept). The private halves are files in the key directory.
	`CREATE TABLE IF NOT EXISTS report_keys (
		id TEXT PRIMARY KEY,
		public BLOB NOT NULL,
		valid_from INTEGER NOT NULL UNIQUE,
		created INTEGER NOT NULL,
		deleted INTEGER
	)`,
	// ingested has the id of every batch ingested, whatever it held (a
	// batch of pooled travel in which no message opens has no row in
	// batches): what makes ingestion idempotent.
	`CREATE TABLE IF NOT EXISTS ingested (id BLOB PRIMARY KEY) WITHOUT ROWID`,
	// batches has one row per ingested batch and metric (a batch of
	// pooled travel carries several metrics): the central guarantee of
	// each batch. messages is
	// the number of shuffled messages the guarantee is computed for; n
	// and malformed count the metric's reports.
	// period_start and period_len (Unix seconds) are the reporting period
	// of the batch (report.Period). held is 1 while the batch's statistic
	// is held (fewer than n_min valid reports so far: ingest.go). draws
	// is the shuffler's blanket draws the batch's guarantee counts
	// (floor.go), which n and messages do not.
	`CREATE TABLE IF NOT EXISTS batches (
		id BLOB NOT NULL,
		metric TEXT NOT NULL,
		epoch TEXT NOT NULL,
		n INTEGER NOT NULL,
		malformed INTEGER NOT NULL,
		messages INTEGER NOT NULL,
		eps REAL,
		delta REAL,
		period_start INTEGER NOT NULL,
		period_len INTEGER NOT NULL,
		held INTEGER NOT NULL DEFAULT 0,
		draws INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (id, metric, epoch)
	)`,
	`CREATE INDEX IF NOT EXISTS batches_metric ON batches (metric, epoch)`,
	`CREATE INDEX IF NOT EXISTS batches_period ON batches (metric, epoch, period_start)`,
	// statistics holds the merged sufficient statistic of every batch of
	// a metric in an epoch and period.
	`CREATE TABLE IF NOT EXISTS statistics (
		metric TEXT NOT NULL,
		epoch TEXT NOT NULL,
		period_start INTEGER NOT NULL,
		period_len INTEGER NOT NULL,
		stat BLOB NOT NULL,
		batches INTEGER NOT NULL,
		PRIMARY KEY (metric, epoch, period_start)
	) WITHOUT ROWID`,
	// held_statistics holds, as statistics does, the merged statistic of
	// the held batches of a metric in an epoch and period; held_pools
	// their valid reports (messages) per pool, epoch and period (ingest.go).
	`CREATE TABLE IF NOT EXISTS held_statistics (
		metric TEXT NOT NULL,
		epoch TEXT NOT NULL,
		period_start INTEGER NOT NULL,
		period_len INTEGER NOT NULL,
		stat BLOB NOT NULL,
		batches INTEGER NOT NULL,
		PRIMARY KEY (metric, epoch, period_start)
	) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS held_pools (
		pool TEXT NOT NULL,
		epoch TEXT NOT NULL,
		period_start INTEGER NOT NULL,
		messages INTEGER NOT NULL,
		batches INTEGER NOT NULL,
		PRIMARY KEY (pool, epoch, period_start)
	) WITHOUT ROWID`,
}

// sqliteNewest names the column a file of sqliteSchema has that files of
// pre-release builds lack (sqlitedb.Schema.Newest).
var sqliteNewest = map[string]string{"batches": "held"}

// sqliteAdded are the columns added to sqliteSchema's tables since its
// release: a file written before them gains them at open.
var sqliteAdded = []sqlitedb.Column{{Table: "batches", Name: "draws", Decl: "INTEGER NOT NULL DEFAULT 0"}}

// openSQLiteStore opens (creating) the collector's database at path, with
// the plan-signing key in keyDir. A file of a build whose epochs carried
// the one report key (before the key schedule) is refused.
func openSQLiteStore(ctx context.Context, path, keyDir string) (*sqliteStore, error) {
	db, err := sqlitedb.Open(ctx, path, sqlitedb.Schema{Statements: sqliteSchema, Newest: sqliteNewest, Added: sqliteAdded})
	if err != nil {
		return nil, err
	}
	var old int
	if err := db.R.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('epochs') WHERE name = 'key'`).Scan(&old); err != nil || old > 0 {
		db.Close()
		if err == nil {
			err = fmt.Errorf("%w: %s was written by an earlier build, whose plans carried its one report key; this build keeps a key schedule and does not migrate it: move it aside to start a new one", ErrKeyStore, path)
		}
		return nil, err
	}
	return &sqliteStore{db: db, keyDir: keyDir}, nil
}

// sqliteStore is the collector's state in one SQLite file, for one
// process; the private halves of its report keys and its plan-signing key
// are files (keys.go, plankey.go).
type sqliteStore struct {
	db *sqlitedb.DB
	// keyDir holds the plan-signing key file (PlanKeyFile).
	keyDir string
	hooks
}

// hasBatch reports whether batch id was already ingested.
func (st *sqliteStore) hasBatch(ctx context.Context, id report.ID) (bool, error) {
	var one int
	err := st.db.R.QueryRowContext(ctx, `SELECT 1 FROM ingested WHERE id = ?`, id[:]).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// commitBatch records batch id's group in one transaction (store). One
// process writes the file through one connection: the held batches of a
// pool key are read and changed by one ingest at a time.
func (st *sqliteStore) commitBatch(ctx context.Context, id report.ID, g batchGroup) (duplicate, held bool, err error) {
	tx, err := st.db.W.BeginTx(ctx, nil)
	if err != nil {
		return false, false, err
	}
	defer tx.Rollback()
	r, err := tx.ExecContext(ctx, `INSERT INTO ingested (id) VALUES (?) ON CONFLICT DO NOTHING`, id[:])
	if err != nil {
		return false, false, err
	}
	if n, err := r.RowsAffected(); err != nil || n == 0 {
		return err == nil, false, err
	}
	if held, err = commitGroup(ctx, tx, g); err != nil {
		return false, false, err
	}
	if st.beforeCommit != nil {
		st.beforeCommit()
	}
	return false, held, tx.Commit()
}

// commitGroup stores a batch's group in tx and reports whether it is
// held (fateOf).
func commitGroup(ctx context.Context, tx *sql.Tx, g batchGroup) (bool, error) {
	var heldMessages int64
	err := tx.QueryRowContext(ctx, `SELECT messages FROM held_pools WHERE pool = ? AND epoch = ? AND period_start = ?`, g.pool, g.epoch, g.period.Start).Scan(&heldMessages)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, err
	}
	fate := fateOf(g, heldMessages)
	for _, p := range g.parts {
		b := p.rec
		if _, err := tx.ExecContext(ctx, `INSERT INTO batches (id, metric, epoch, n, malformed, messages, eps, delta, period_start, period_len, held, draws) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			b.id[:], b.metric, b.epoch, b.n, b.malformed, b.messages, b.eps, b.delta, b.period.Start, b.period.Length, fate == hold, b.draws); err != nil {
			return false, err
		}
	}
	if fate == hold {
		for _, p := range g.parts {
			if p.stat != nil {
				if err := mergeSQLite(ctx, tx, "held_statistics", g.epoch, g.period, metricMerge{metric: p.rec.metric, stat: p.stat, batches: 1}); err != nil {
					return false, err
				}
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO held_pools (pool, epoch, period_start, messages, batches) VALUES (?, ?, ?, ?, 1)
			ON CONFLICT (pool, epoch, period_start) DO UPDATE SET messages = messages + excluded.messages, batches = batches + 1`, g.pool, g.epoch, g.period.Start, g.messages)
		return true, err
	}
	heldRows := map[string]statRow{}
	if fate == publish && heldMessages > 0 {
		rows, err := heldRowsSQLite(ctx, tx, g)
		if err != nil {
			return false, err
		}
		for _, r := range rows {
			heldRows[r.metric] = r
		}
		names := inList(len(g.names))
		args := append([]any{g.epoch, g.period.Start}, anySlice(g.names)...)
		for _, q := range []string{
			`DELETE FROM held_statistics WHERE epoch = ? AND period_start = ? AND metric IN ` + names,
			`UPDATE batches SET held = 0 WHERE held = 1 AND epoch = ? AND period_start = ? AND metric IN ` + names,
		} {
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return false, err
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM held_pools WHERE pool = ? AND epoch = ? AND period_start = ?`, g.pool, g.epoch, g.period.Start); err != nil {
			return false, err
		}
	}
	merges, err := mergeGroup(g, heldRows)
	if err != nil {
		return false, err
	}
	for _, m := range merges {
		if err := mergeSQLite(ctx, tx, "statistics", g.epoch, g.period, m); err != nil {
			return false, err
		}
	}
	return false, nil
}

// heldRowsSQLite reads the held statistics of g's pool key.
func heldRowsSQLite(ctx context.Context, tx *sql.Tx, g batchGroup) ([]statRow, error) {
	args := append([]any{g.epoch, g.period.Start}, anySlice(g.names)...)
	rows, err := tx.QueryContext(ctx, `SELECT metric, stat, batches FROM held_statistics WHERE epoch = ? AND period_start = ? AND metric IN `+inList(len(g.names)), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []statRow
	for rows.Next() {
		r := statRow{epoch: g.epoch, period: g.period}
		var b []byte
		if err := rows.Scan(&r.metric, &b, &r.batches); err != nil {
			return nil, err
		}
		if r.stat, err = decodeStat(b); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// mergeSQLite merges m into its row of table (statistics or
// held_statistics) for epoch and period.
func mergeSQLite(ctx context.Context, tx *sql.Tx, table, epoch string, period report.Period, m metricMerge) error {
	var old []byte
	err := tx.QueryRowContext(ctx, `SELECT stat FROM `+table+` WHERE metric = ? AND epoch = ? AND period_start = ?`, m.metric, epoch, period.Start).Scan(&old)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	enc, err := mergeStats(old, m.stat, fmt.Sprintf("%s %s/%s/%s", table, m.metric, epoch, period))
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO `+table+` (metric, epoch, period_start, period_len, stat, batches) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (metric, epoch, period_start) DO UPDATE SET stat = excluded.stat, batches = batches + excluded.batches`, m.metric, epoch, period.Start, period.Length, enc, m.batches)
	return err
}

// inList returns an SQL list of n placeholders: (?, ?, …).
func inList(n int) string {
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
}

// anySlice returns s as arguments.
func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func (st *sqliteStore) epochPlan(ctx context.Context, epoch string) ([]byte, error) {
	var b []byte
	err := st.db.R.QueryRowContext(ctx, `SELECT plan FROM epochs WHERE epoch = ?`, epoch).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return b, err
}

// statistics returns the statistics of metric, or of every metric when
// metric is "", by metric, then epoch in the order first published, then
// period.
func (st *sqliteStore) statistics(ctx context.Context, metric string) ([]statRow, error) {
	return st.statRows(ctx, "statistics", metric)
}

func (st *sqliteStore) heldStatistics(ctx context.Context, metric string) ([]statRow, error) {
	return st.statRows(ctx, "held_statistics", metric)
}

// statRows reads the rows of table (statistics or held_statistics).
func (st *sqliteStore) statRows(ctx context.Context, table, metric string) ([]statRow, error) {
	q := `SELECT s.metric, s.epoch, s.period_start, s.period_len, s.stat, s.batches FROM ` + table + ` s LEFT JOIN epochs e ON e.epoch = s.epoch`
	var args []any
	if metric != "" {
		q += ` WHERE s.metric = ?`
		args = append(args, metric)
	}
	q += ` ORDER BY s.metric, e.rowid, s.period_start`
	rows, err := st.db.R.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []statRow
	for rows.Next() {
		var r statRow
		var b []byte
		if err := rows.Scan(&r.metric, &r.epoch, &r.period.Start, &r.period.Length, &b, &r.batches); err != nil {
			return nil, err
		}
		if r.stat, err = decodeStat(b); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// batchList returns the batches of metric in epoch and period, in
// ingestion order.
func (st *sqliteStore) batchList(ctx context.Context, metric, epoch string, period report.Period) ([]batchRecord, error) {
	rows, err := st.db.R.QueryContext(ctx, `SELECT id, n, malformed, messages, eps, delta, held, draws FROM batches WHERE metric = ? AND epoch = ? AND period_start = ? ORDER BY rowid`, metric, epoch, period.Start)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []batchRecord
	for rows.Next() {
		b := batchRecord{metric: metric, epoch: epoch, period: period}
		var id []byte
		var eps, delta sql.NullFloat64
		if err := rows.Scan(&id, &b.n, &b.malformed, &b.messages, &eps, &delta, &b.held, &b.draws); err != nil {
			return nil, err
		}
		copy(b.id[:], id)
		if eps.Valid {
			b.eps = &eps.Float64
		}
		if delta.Valid {
			b.delta = &delta.Float64
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

func (st *sqliteStore) reportKeys(ctx context.Context) ([]keyRow, error) {
	return sqliteKeyRows(ctx, st.db.R)
}

// sqliteQuerier is a handle or a transaction.
type sqliteQuerier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// sqliteKeyRows reads the report key schedule through q.
func sqliteKeyRows(ctx context.Context, q sqliteQuerier) ([]keyRow, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, public, valid_from, created, deleted FROM report_keys ORDER BY valid_from`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []keyRow
	for rows.Next() {
		var r keyRow
		var deleted sql.NullInt64
		if err := rows.Scan(&r.id, &r.public, &r.from, &r.created, &deleted); err != nil {
			return nil, err
		}
		r.deleted = deleted.Int64
		out = append(out, r)
	}
	return out, rows.Err()
}

// changeKeys runs in a write transaction: SQLite's write lock, taken at
// its start, orders it with every other writer of the file (another
// process's blanket collector rotate-key too).
func (st *sqliteStore) changeKeys(ctx context.Context, change func([]keyRow) (keyChange, error)) error {
	tx, err := st.db.W.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	rows, err := sqliteKeyRows(ctx, tx)
	if err != nil {
		return err
	}
	ch, err := change(rows)
	if err != nil || ch.empty() {
		return err
	}
	if len(ch.moveOut) > 0 {
		return fmt.Errorf("%w: a SQLite store keeps no private half to move out", ErrKeyStore)
	}
	for _, id := range ch.withdraw {
		if _, err := tx.ExecContext(ctx, `DELETE FROM report_keys WHERE id = ?`, id); err != nil {
			return err
		}
	}
	for _, r := range ch.add {
		if r.private != nil {
			return fmt.Errorf("%w: a SQLite store keeps the private halves in files", ErrKeyStore)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO report_keys (id, public, valid_from, created) VALUES (?, ?, ?, ?)`, r.id, r.public, r.from, r.created); err != nil {
			return err
		}
	}
	for _, id := range ch.erase {
		if _, err := tx.ExecContext(ctx, `UPDATE report_keys SET deleted = ? WHERE id = ? AND deleted IS NULL`, ch.at, id); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (st *sqliteStore) planSigner(ctx context.Context) (*planSigner, bool, error) {
	return loadOrCreatePlanSigner(ctx, st.keyDir)
}

// lockPublish does nothing: one process owns a SQLite store.
func (st *sqliteStore) lockPublish(context.Context) (func(), error) { return func() {}, nil }

func (st *sqliteStore) calibration(ctx context.Context, source string) ([]byte, error) {
	var b []byte
	err := st.db.R.QueryRowContext(ctx, `SELECT plan FROM epochs WHERE source = ? ORDER BY rowid DESC LIMIT 1`, source).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return b, err
}

func (st *sqliteStore) addEpoch(ctx context.Context, epoch, source string, plan []byte) error {
	_, err := st.db.W.ExecContext(ctx, `INSERT OR IGNORE INTO epochs (epoch, source, plan) VALUES (?, ?, ?)`, epoch, source, plan)
	return err
}

func (st *sqliteStore) plans(ctx context.Context, except string) ([]storedEpoch, error) {
	rows, err := st.db.R.QueryContext(ctx, `SELECT epoch, plan FROM epochs WHERE epoch != ? ORDER BY rowid DESC`, except)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storedEpoch
	for rows.Next() {
		var e storedEpoch
		if err := rows.Scan(&e.epoch, &e.plan); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// periodParts returns, for every period, epoch and pool with batches, the
// smallest batch (in shuffled messages), by period start.
func (st *sqliteStore) periodParts(ctx context.Context) ([]horizonPart, error) {
	// With pooled travel every metric of a batch has a row (with the same
	// messages): the caller merges them into the pool's one part.
	// A batch with no valid report (n = 0) holds no honest user's report.
	// One with valid reports counts at its messages, at least one: the
	// messages of a pooled batch are counted as its valid messages less
	// every refused part (a lower bound, 0 when each refused part is
	// counted against another message), and an honest message in it is
	// then still composed, alone at worst. Its draws count at the fewest
	// of the period's batches (the guarantee only grows with either).
	rows, err := st.db.R.QueryContext(ctx, `SELECT period_start, period_len, epoch, metric, MIN(MAX(messages, 1)), MIN(draws) FROM batches
		WHERE n > 0 GROUP BY period_start, epoch, metric ORDER BY period_start, epoch, metric`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []horizonPart
	for rows.Next() {
		var q horizonPart
		if err := rows.Scan(&q.period.Start, &q.period.Length, &q.epoch, &q.pool, &q.n, &q.draws); err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, rows.Err()
}

func (st *sqliteStore) periodTotals(ctx context.Context) ([]storedRow, error) {
	// A batch of pooled travel has a row per metric: it counts once.
	rows, err := st.db.R.QueryContext(ctx, `SELECT period_start, period_len, COUNT(DISTINCT id), COUNT(DISTINCT CASE WHEN held <> 0 THEN id END), SUM(n), SUM(malformed)
		FROM batches GROUP BY period_start, period_len ORDER BY period_start, period_len`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storedRow
	for rows.Next() {
		var r storedRow
		if err := rows.Scan(&r.period.Start, &r.period.Length, &r.batches, &r.held, &r.reports, &r.malformed); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (st *sqliteStore) ready(ctx context.Context) error { return st.db.Ready(ctx) }

func (st *sqliteStore) close() error { return st.db.Close() }
