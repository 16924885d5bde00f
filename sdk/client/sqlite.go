package client

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/blanket-dp/blanket/sdk/report"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go
)

// outboxSchemaVersion is stored in PRAGMA user_version.
const outboxSchemaVersion = 2

// outboxSchema is the SQLite outbox. A row of outbox is one sealed report,
// deleted once the shuffler acknowledged it (HTTP 202); ledger has one row
// per UTC day and metric, updated in the same transaction that inserts the
// report it charges.
const outboxSchema = `
CREATE TABLE IF NOT EXISTS outbox (
	seq    INTEGER PRIMARY KEY AUTOINCREMENT, -- upload order
	id     BLOB    NOT NULL UNIQUE,           -- report.ID, 16 random bytes
	metric TEXT    NOT NULL,
	suite  INTEGER NOT NULL,
	sealed BLOB    NOT NULL,                  -- HPKE ciphertext
	day    TEXT    NOT NULL,                  -- UTC "2006-01-02"
	local  INTEGER NOT NULL DEFAULT 0         -- 1: ModeLocal, never uploaded
);
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (local, seq);
CREATE TABLE IF NOT EXISTS ledger (
	day           TEXT    NOT NULL,
	metric        TEXT    NOT NULL,
	reports       INTEGER NOT NULL DEFAULT 0,
	eps0          REAL    NOT NULL DEFAULT 0,
	local_reports INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (day, metric)
);
CREATE TABLE IF NOT EXISTS staged (                -- schema version 2
	metric TEXT PRIMARY KEY,
	plan   TEXT NOT NULL,                          -- plan digest
	report BLOB                                    -- randomized, unsealed; NULL: parallel choice
);
`

// SQLiteOutbox is the durable Outbox: a SQLite database (modernc.org/sqlite,
// pure Go) in WAL mode with synchronous=FULL, so that every committed Add is
// on disk (the WAL is fsynced at each commit) before Add returns and
// survives a crash of the process or of the machine. Transactions begin
// IMMEDIATE, so concurrent processes on the same file serialize instead of
// failing, and the ledger check of Add cannot race.
type SQLiteOutbox struct {
	db   *sql.DB
	path string
}

var _ Outbox = (*SQLiteOutbox)(nil)

// OpenSQLiteOutbox opens (creating if needed) the SQLite outbox at path.
func OpenSQLiteOutbox(ctx context.Context, path string) (*SQLiteOutbox, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: outbox path is empty", ErrBadConfig)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Set("_txlock", "immediate")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("client: outbox %s: %w", path, err)
	}
	// One connection: writers in this process queue in database/sql
	// instead of spinning on SQLITE_BUSY, and the pragmas apply to it.
	db.SetMaxOpenConns(1)
	o := &SQLiteOutbox{db: db, path: path}
	if err := o.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return o, nil
}

func (o *SQLiteOutbox) migrate(ctx context.Context) error {
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return o.errf("begin: %w", err)
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return o.errf("schema version: %w", err)
	}
	if v > outboxSchemaVersion {
		return o.errf("schema version %d is newer than this client's %d", v, outboxSchemaVersion)
	}
	if _, err := tx.ExecContext(ctx, outboxSchema); err != nil {
		return o.errf("schema: %w", err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", outboxSchemaVersion)); err != nil {
		return o.errf("schema version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return o.errf("commit: %w", err)
	}
	return nil
}

func (o *SQLiteOutbox) errf(format string, args ...any) error {
	return fmt.Errorf("client: outbox %s: "+format, append([]any{o.path}, args...)...)
}

// Path returns the database file's path.
func (o *SQLiteOutbox) Path() string { return o.path }

// Add implements Outbox.
func (o *SQLiteOutbox) Add(ctx context.Context, e Entry, maxPerDay int) error {
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return o.errf("begin: %w", err)
	}
	defer tx.Rollback()
	charges := e.charges()
	if maxPerDay > 0 {
		for _, c := range charges {
			var n int64
			err := tx.QueryRowContext(ctx, "SELECT reports + local_reports FROM ledger WHERE day = ? AND metric = ?", e.Day, c.Metric).Scan(&n)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return o.errf("ledger: %w", err)
			}
			if n >= int64(maxPerDay) {
				return fmt.Errorf("%w: metric %q has %d reports on %s, limit %d", ErrDailyLimit, c.Metric, n, e.Day, maxPerDay)
			}
		}
	}
	local := 0
	if e.Local {
		local = 1
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO outbox (id, metric, suite, sealed, day, local) VALUES (?, ?, ?, ?, ?, ?)",
		e.Envelope.ID[:], e.Envelope.Metric, int(e.Envelope.Suite), e.Envelope.Sealed, e.Day, local); err != nil {
		return o.errf("insert report %s: %w", e.Envelope.ID, err)
	}
	for _, c := range charges {
		reports, eps0 := 1, c.Eps0
		if e.Local {
			reports, eps0 = 0, 0
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger (day, metric, reports, eps0, local_reports) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (day, metric) DO UPDATE SET reports = reports + excluded.reports, eps0 = eps0 + excluded.eps0,
			local_reports = local_reports + excluded.local_reports`,
			e.Day, c.Metric, reports, eps0, local); err != nil {
			return o.errf("ledger: %w", err)
		}
	}
	for _, st := range e.Unstage {
		res, err := tx.ExecContext(ctx, "DELETE FROM staged WHERE metric = ? AND plan = ? AND report = ?", st.Metric, st.Plan, st.Report)
		if err != nil {
			return o.errf("unstage: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return o.errf("unstage: %w", err)
		} else if n != 1 {
			return fmt.Errorf("%w: metric %q", ErrStaleRound, st.Metric)
		}
	}
	if err := tx.Commit(); err != nil {
		return o.errf("commit: %w", err)
	}
	return nil
}

// Pending implements Outbox.
func (o *SQLiteOutbox) Pending(ctx context.Context, limit int) ([]report.Envelope, error) {
	rows, err := o.db.QueryContext(ctx, "SELECT id, metric, suite, sealed FROM outbox WHERE local = 0 ORDER BY seq LIMIT ?", limit)
	if err != nil {
		return nil, o.errf("pending: %w", err)
	}
	defer rows.Close()
	var out []report.Envelope
	for rows.Next() {
		var (
			id    []byte
			e     report.Envelope
			suite int
		)
		if err := rows.Scan(&id, &e.Metric, &suite, &e.Sealed); err != nil {
			return nil, o.errf("pending: %w", err)
		}
		if len(id) != len(e.ID) {
			return nil, o.errf("pending: stored report id has %d bytes, want %d", len(id), len(e.ID))
		}
		copy(e.ID[:], id)
		e.Suite = uint16(suite)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, o.errf("pending: %w", err)
	}
	return out, nil
}

// Ack implements Outbox.
func (o *SQLiteOutbox) Ack(ctx context.Context, ids []report.ID) error {
	if len(ids) == 0 {
		return nil
	}
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return o.errf("begin: %w", err)
	}
	defer tx.Rollback()
	// Chunks of at most 500 parameters, below SQLite's variable limit.
	for start := 0; start < len(ids); start += 500 {
		chunk := ids[start:min(start+500, len(ids))]
		args := make([]any, len(chunk))
		for i := range chunk {
			args[i] = chunk[i][:]
		}
		q := "DELETE FROM outbox WHERE id IN (?" + strings.Repeat(", ?", len(chunk)-1) + ")"
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return o.errf("ack: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return o.errf("commit: %w", err)
	}
	return nil
}

// DropLocal implements Outbox.
func (o *SQLiteOutbox) DropLocal(ctx context.Context, day string) (int, error) {
	res, err := o.db.ExecContext(ctx, "DELETE FROM outbox WHERE local = 1 AND day < ?", day)
	if err != nil {
		return 0, o.errf("drop local: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// Ledger implements Outbox.
func (o *SQLiteOutbox) Ledger(ctx context.Context) ([]LedgerEntry, error) {
	rows, err := o.db.QueryContext(ctx, "SELECT day, metric, reports, eps0, local_reports FROM ledger ORDER BY day, metric")
	if err != nil {
		return nil, o.errf("ledger: %w", err)
	}
	defer rows.Close()
	var out []LedgerEntry
	for rows.Next() {
		var l LedgerEntry
		if err := rows.Scan(&l.Day, &l.Metric, &l.Reports, &l.Eps0, &l.LocalReports); err != nil {
			return nil, o.errf("ledger: %w", err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, o.errf("ledger: %w", err)
	}
	return out, nil
}

// Stage implements Outbox. The insert and the read back are one
// transaction (BEGIN IMMEDIATE), so processes sharing the file agree on
// an entry staged once.
func (o *SQLiteOutbox) Stage(ctx context.Context, st Staged, once bool) (Staged, error) {
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return Staged{}, o.errf("begin: %w", err)
	}
	defer tx.Rollback()
	q := `INSERT INTO staged (metric, plan, report) VALUES (?, ?, ?)
		ON CONFLICT (metric) DO UPDATE SET plan = excluded.plan, report = excluded.report`
	if once {
		q += ` WHERE staged.plan != excluded.plan`
	}
	if _, err := tx.ExecContext(ctx, q, st.Metric, st.Plan, st.Report); err != nil {
		return Staged{}, o.errf("stage: %w", err)
	}
	var got Staged
	if err := tx.QueryRowContext(ctx, "SELECT metric, plan, report FROM staged WHERE metric = ?", st.Metric).Scan(&got.Metric, &got.Plan, &got.Report); err != nil {
		return Staged{}, o.errf("stage: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Staged{}, o.errf("commit: %w", err)
	}
	return got, nil
}

// Staged implements Outbox.
func (o *SQLiteOutbox) Staged(ctx context.Context) ([]Staged, error) {
	rows, err := o.db.QueryContext(ctx, "SELECT metric, plan, report FROM staged ORDER BY metric")
	if err != nil {
		return nil, o.errf("staged: %w", err)
	}
	defer rows.Close()
	var out []Staged
	for rows.Next() {
		var st Staged
		if err := rows.Scan(&st.Metric, &st.Plan, &st.Report); err != nil {
			return nil, o.errf("staged: %w", err)
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, o.errf("staged: %w", err)
	}
	return out, nil
}

// Close implements Outbox.
func (o *SQLiteOutbox) Close() error { return o.db.Close() }
