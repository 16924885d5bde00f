package collector

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/blanket-dp/blanket/internal/sqlitedb"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/report"
)

var sqliteSchema = []string{
	// epochs holds every plan the collector has published. epoch is the
	// first 16 hex digits of the published plan's digest; source is the
	// digest of the plan as configured (before calibration), so that a
	// restart with the same plan file reuses the same calibration.
	`CREATE TABLE IF NOT EXISTS epochs (
		epoch TEXT PRIMARY KEY,
		source TEXT NOT NULL,
		key TEXT NOT NULL,
		plan BLOB NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS epochs_source ON epochs (source, key)`,
	// batches has one row per ingested batch and metric (a batch of
	// pooled travel carries several metrics): what makes ingestion
	// idempotent, and the central guarantee of each batch. messages is
	// the number of shuffled messages the guarantee is computed for; n
	// and malformed count the metric's reports.
	// period_start and period_len (Unix seconds) are the reporting period
	// of the batch (report.Period); 0, 0 for batches of reports sealed
	// before periods existed.
	`CREATE TABLE IF NOT EXISTS batches (
		id BLOB NOT NULL,
		metric TEXT NOT NULL,
		epoch TEXT NOT NULL,
		n INTEGER NOT NULL,
		malformed INTEGER NOT NULL,
		messages INTEGER NOT NULL,
		eps REAL,
		delta REAL,
		period_start INTEGER NOT NULL DEFAULT 0,
		period_len INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (id, metric, epoch)
	)`,
	`CREATE INDEX IF NOT EXISTS batches_metric ON batches (metric, epoch)`,
	// statistics holds the merged sufficient statistic of every batch of
	// a metric in an epoch and period.
	`CREATE TABLE IF NOT EXISTS statistics (
		metric TEXT NOT NULL,
		epoch TEXT NOT NULL,
		period_start INTEGER NOT NULL DEFAULT 0,
		period_len INTEGER NOT NULL DEFAULT 0,
		stat BLOB NOT NULL,
		batches INTEGER NOT NULL,
		PRIMARY KEY (metric, epoch, period_start)
	) WITHOUT ROWID`,
}

// migrateStore brings a database written by an earlier build up to the
// current schema: the first batches table had one row per batch (id alone
// as its key) and no messages column; its batches were of one metric, whose
// guarantee was computed at n, so messages = n.
func migrateStore(ctx context.Context, db *sqlitedb.DB) error {
	if err := migrateMessages(ctx, db); err != nil {
		return err
	}
	return migratePeriods(ctx, db)
}

// migratePeriods adds the reporting period to a database written before
// periods existed: its batches and statistics become those of the zero
// period (period_start = period_len = 0), shown as "before periods".
func migratePeriods(ctx context.Context, db *sqlitedb.DB) error {
	hasB, err := db.HasColumn(ctx, "batches", "period_start")
	if err != nil {
		return err
	}
	hasS, err := db.HasColumn(ctx, "statistics", "period_start")
	if err != nil {
		return err
	}
	tx, err := db.W.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var stmts []string
	if !hasB {
		stmts = append(stmts,
			`ALTER TABLE batches ADD COLUMN period_start INTEGER NOT NULL DEFAULT 0`,
			`ALTER TABLE batches ADD COLUMN period_len INTEGER NOT NULL DEFAULT 0`)
	}
	if !hasS {
		stmts = append(stmts,
			`ALTER TABLE statistics RENAME TO statistics_v2`,
			sqliteSchema[4],
			`INSERT INTO statistics (metric, epoch, period_start, period_len, stat, batches)
				SELECT metric, epoch, 0, 0, stat, batches FROM statistics_v2`,
			`DROP TABLE statistics_v2`)
	}
	stmts = append(stmts, `CREATE INDEX IF NOT EXISTS batches_period ON batches (metric, epoch, period_start)`)
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("collector: migrating to reporting periods: %w", err)
		}
	}
	return tx.Commit()
}

// migrateMessages brings the batches table of the first schema (one row
// per batch, no messages column) to the second.
func migrateMessages(ctx context.Context, db *sqlitedb.DB) error {
	has, err := db.HasColumn(ctx, "batches", "messages")
	if err != nil || has {
		return err
	}
	tx, err := db.W.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, stmt := range []string{
		`ALTER TABLE batches RENAME TO batches_v1`,
		`DROP INDEX IF EXISTS batches_metric`,
		sqliteSchema[2],
		sqliteSchema[3],
		`INSERT INTO batches (id, metric, epoch, n, malformed, messages, eps, delta)
			SELECT id, metric, epoch, n, malformed, n, eps, delta FROM batches_v1 ORDER BY rowid`,
		`DROP TABLE batches_v1`,
	} {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("collector: migrating the batches table: %w", err)
		}
	}
	return tx.Commit()
}

// openSQLiteStore opens (creating) the collector's database at path, with
// the key in keyDir.
func openSQLiteStore(ctx context.Context, path, keyDir string) (*sqliteStore, error) {
	db, err := sqlitedb.Open(ctx, path, sqliteSchema)
	if err != nil {
		return nil, err
	}
	if err := migrateStore(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return &sqliteStore{db: db, keyDir: keyDir}, nil
}

// sqliteStore is the collector's state in one SQLite file, for one
// process, and its key in a file beside it.
type sqliteStore struct {
	db *sqlitedb.DB
	// keyDir holds the key file (KeyFile).
	keyDir string
	hooks
}

// hasBatch reports whether batch id was already ingested.
func (st *sqliteStore) hasBatch(ctx context.Context, id report.ID) (bool, error) {
	var one int
	err := st.db.R.QueryRowContext(ctx, `SELECT 1 FROM batches WHERE id = ?`, id[:]).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// commitBatch records a batch and merges its statistics, one per metric it
// carries, in one transaction. It reports duplicate = true, changing
// nothing, when the batch id is already recorded.
func (st *sqliteStore) commitBatch(ctx context.Context, parts []metricBatch) (duplicate bool, err error) {
	tx, err := st.db.W.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	if len(parts) == 0 {
		return false, errors.New("collector: a batch with no metric")
	}
	var one int
	switch err := tx.QueryRowContext(ctx, `SELECT 1 FROM batches WHERE id = ?`, parts[0].rec.id[:]).Scan(&one); {
	case err == nil:
		return true, nil
	case !errors.Is(err, sql.ErrNoRows):
		return false, err
	}
	for _, p := range parts {
		if err := mergeBatch(ctx, tx, p.rec, p.stat); err != nil {
			return false, err
		}
	}
	if st.beforeCommit != nil {
		st.beforeCommit()
	}
	return false, tx.Commit()
}

// mergeBatch inserts b's row and merges stat into its metric's statistic.
func mergeBatch(ctx context.Context, tx *sql.Tx, b batchRecord, stat *sdk.Statistic) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO batches (id, metric, epoch, n, malformed, messages, eps, delta, period_start, period_len) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		b.id[:], b.metric, b.epoch, b.n, b.malformed, b.messages, b.eps, b.delta, b.period.Start, b.period.Length); err != nil {
		return err
	}
	if stat == nil {
		return nil
	}
	var old []byte
	err := tx.QueryRowContext(ctx, `SELECT stat FROM statistics WHERE metric = ? AND epoch = ? AND period_start = ?`, b.metric, b.epoch, b.period.Start).Scan(&old)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	enc, err := mergeStat(b, old, stat)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO statistics (metric, epoch, period_start, period_len, stat, batches) VALUES (?, ?, ?, ?, ?, 1)
		ON CONFLICT (metric, epoch, period_start) DO UPDATE SET stat = excluded.stat, batches = batches + 1`, b.metric, b.epoch, b.period.Start, b.period.Length, enc)
	return err
}

func (st *sqliteStore) epochPlan(ctx context.Context, epoch, key string) ([]byte, error) {
	var b []byte
	err := st.db.R.QueryRowContext(ctx, `SELECT plan FROM epochs WHERE epoch = ? AND (? = '' OR key = ?)`, epoch, key, key).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return b, err
}

// statistics returns the statistics of metric, or of every metric when
// metric is "", by metric, then epoch in the order first published, then
// period.
func (st *sqliteStore) statistics(ctx context.Context, metric string) ([]statRow, error) {
	q := `SELECT s.metric, s.epoch, s.period_start, s.period_len, s.stat, s.batches FROM statistics s LEFT JOIN epochs e ON e.epoch = s.epoch`
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
	rows, err := st.db.R.QueryContext(ctx, `SELECT id, n, malformed, messages, eps, delta FROM batches WHERE metric = ? AND epoch = ? AND period_start = ? ORDER BY rowid`, metric, epoch, period.Start)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []batchRecord
	for rows.Next() {
		b := batchRecord{metric: metric, epoch: epoch, period: period}
		var id []byte
		var eps, delta sql.NullFloat64
		if err := rows.Scan(&id, &b.n, &b.malformed, &b.messages, &eps, &delta); err != nil {
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

func (st *sqliteStore) key(context.Context) (*report.PrivateKey, bool, error) {
	return LoadOrCreateKey(st.keyDir)
}

// lockPublish does nothing: one process owns a SQLite store.
func (st *sqliteStore) lockPublish(context.Context) (func(), error) { return func() {}, nil }

func (st *sqliteStore) calibration(ctx context.Context, source, key string) ([]byte, error) {
	var b []byte
	err := st.db.R.QueryRowContext(ctx, `SELECT plan FROM epochs WHERE source = ? AND key = ? ORDER BY rowid DESC LIMIT 1`, source, key).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return b, err
}

func (st *sqliteStore) addEpoch(ctx context.Context, epoch, source, key string, plan []byte) error {
	_, err := st.db.W.ExecContext(ctx, `INSERT OR IGNORE INTO epochs (epoch, source, key, plan) VALUES (?, ?, ?, ?)`, epoch, source, key, plan)
	return err
}

func (st *sqliteStore) plans(ctx context.Context, key, except string, limit int) ([]storedEpoch, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := st.db.R.QueryContext(ctx, `SELECT epoch, plan FROM epochs WHERE key = ? AND epoch != ? ORDER BY rowid DESC LIMIT ?`, key, except, limit)
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
	// then still composed, alone at worst.
	rows, err := st.db.R.QueryContext(ctx, `SELECT period_start, period_len, epoch, metric, MIN(MAX(messages, 1)) FROM batches
		WHERE period_len > 0 AND n > 0 GROUP BY period_start, epoch, metric ORDER BY period_start, epoch, metric`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []horizonPart
	for rows.Next() {
		var q horizonPart
		if err := rows.Scan(&q.period.Start, &q.period.Length, &q.epoch, &q.pool, &q.n); err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, rows.Err()
}

// unperiodedReports returns the number of valid reports stored without a
// reporting period.
func (st *sqliteStore) unperiodedReports(ctx context.Context) (int64, error) {
	var n sql.NullInt64
	err := st.db.R.QueryRowContext(ctx, `SELECT SUM(n) FROM batches WHERE period_len = 0 AND n > 0`).Scan(&n)
	return n.Int64, err
}

func (st *sqliteStore) ready(ctx context.Context) error { return st.db.Ready(ctx) }

func (st *sqliteStore) close() error { return st.db.Close() }
