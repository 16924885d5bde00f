package client

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/report"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go
)

// SQLiteOutbox is the durable Outbox: a SQLite database (modernc.org/sqlite,
// pure Go) in WAL mode with synchronous=FULL, so that every committed change
// (a staged value, a closed period with its report and ledger charge) is on
// disk (the WAL is fsynced at each commit) before the call returns and
// survives a crash of the process or of the machine. Transactions begin
// IMMEDIATE, so concurrent processes on the same file serialize instead of
// failing, and the checks of Stage and ClosePeriod cannot race. The schema
// is versioned (PRAGMA user_version); a file of another version than this
// client's is refused when opened.
type SQLiteOutbox struct {
	db   *sql.DB
	path string
}

var _ Outbox = (*SQLiteOutbox)(nil)

// OpenSQLiteOutbox opens (creating if needed) the SQLite outbox at path.
// The file, which holds the values of open periods in clear, is readable
// and writable by its owner only (mode 0600): a new file is created so,
// and an existing one, with its WAL and shared-memory files, is set so.
func OpenSQLiteOutbox(ctx context.Context, path string) (*SQLiteOutbox, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: outbox path is empty", ErrBadConfig)
	}
	if err := ownerOnly(path); err != nil {
		return nil, fmt.Errorf("client: outbox %s: %w", path, err)
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
	if err := o.createSchema(ctx); err != nil {
		db.Close()
		return nil, err
	}
	// SQLite creates the WAL and shared-memory files with the database
	// file's mode; ones that exist already (made by another connection,
	// or their mode changed since) keep theirs.
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Chmod(path+suffix, outboxFileMode); err != nil && !errors.Is(err, fs.ErrNotExist) {
			db.Close()
			return nil, fmt.Errorf("client: outbox %s: %w", path, err)
		}
	}
	return o, nil
}

// outboxFileMode is the mode of the outbox files: the owner's only.
const outboxFileMode = 0o600

// ownerOnly creates the file at path with mode 0600 if it is missing, and
// sets an existing one's mode to 0600, before SQLite opens it (SQLite
// would create it with 0644 less the umask).
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, outboxFileMode)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chmod(path, outboxFileMode)
}

func (o *SQLiteOutbox) errf(format string, args ...any) error {
	return fmt.Errorf("client: outbox %s: "+format, append([]any{o.path}, args...)...)
}

// Path returns the database file's path.
func (o *SQLiteOutbox) Path() string { return o.path }

// isClosed reports whether period p is closed for any of names (pools
// and metrics; see Outbox.ClosePeriod).
func isClosed(ctx context.Context, tx *sql.Tx, p report.Period, names ...string) (bool, error) {
	args := []any{p.Start, p.Length}
	for _, n := range names {
		args = append(args, n)
	}
	var one int
	err := tx.QueryRowContext(ctx, "SELECT 1 FROM closed_periods WHERE start = ? AND length = ? AND pool IN (?"+strings.Repeat(", ?", len(names)-1)+") LIMIT 1", args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// Stage implements Outbox. The check, the read and the write are one
// transaction.
func (o *SQLiteOutbox) Stage(ctx context.Context, v Value) (Value, error) {
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return Value{}, o.errf("begin: %w", err)
	}
	defer tx.Rollback()
	if closed, err := isClosed(ctx, tx, v.Period, v.Pool, v.Metric); err != nil {
		return Value{}, o.errf("stage: %w", err)
	} else if closed {
		return Value{}, fmt.Errorf("%w: %s (%s) in period %s", ErrPeriodClosed, v.Metric, v.Pool, v.Period)
	}
	cur := v
	cur.Sum, cur.Category, cur.Count, cur.Rev = 0, "", 0, 0
	var kind int
	err = tx.QueryRowContext(ctx, "SELECT pool, kind, category, total, records, rev FROM staged_values WHERE metric = ? AND plan = ? AND start = ? AND length = ?",
		v.Metric, v.Plan, v.Period.Start, v.Period.Length).Scan(&cur.Pool, &kind, &cur.Category, &cur.Sum, &cur.Count, &cur.Rev)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return Value{}, o.errf("stage: %w", err)
	default:
		cur.Kind = sdk.InputKind(kind)
	}
	cur = cur.merge(v)
	if _, err := tx.ExecContext(ctx, `INSERT INTO staged_values (metric, plan, start, length, pool, kind, category, total, records, rev) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (metric, plan, start, length) DO UPDATE SET category = excluded.category, total = excluded.total, records = excluded.records, rev = excluded.rev`,
		cur.Metric, cur.Plan, cur.Period.Start, cur.Period.Length, cur.Pool, int(cur.Kind), cur.Category, cur.Sum, cur.Count, cur.Rev); err != nil {
		return Value{}, o.errf("stage: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Value{}, o.errf("commit: %w", err)
	}
	return cur, nil
}

// Staged implements Outbox.
func (o *SQLiteOutbox) Staged(ctx context.Context) ([]Value, error) {
	rows, err := o.db.QueryContext(ctx, "SELECT metric, plan, start, length, pool, kind, category, total, records, rev FROM staged_values ORDER BY start, length, pool, metric, plan")
	if err != nil {
		return nil, o.errf("staged: %w", err)
	}
	defer rows.Close()
	var out []Value
	for rows.Next() {
		var v Value
		var kind int
		if err := rows.Scan(&v.Metric, &v.Plan, &v.Period.Start, &v.Period.Length, &v.Pool, &kind, &v.Category, &v.Sum, &v.Count, &v.Rev); err != nil {
			return nil, o.errf("staged: %w", err)
		}
		v.Kind = sdk.InputKind(kind)
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, o.errf("staged: %w", err)
	}
	return out, nil
}

// Draw implements Outbox. The check, the insert and the read back are one
// transaction, so processes sharing the file agree on a period's draw.
func (o *SQLiteOutbox) Draw(ctx context.Context, d Draw) (Draw, error) {
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return Draw{}, o.errf("begin: %w", err)
	}
	defer tx.Rollback()
	if closed, err := isClosed(ctx, tx, d.Period, d.Pool, d.Metric); err != nil {
		return Draw{}, o.errf("draw: %w", err)
	} else if closed {
		return Draw{}, fmt.Errorf("%w: %s (%s) in period %s", ErrPeriodClosed, d.Metric, d.Pool, d.Period)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO draws (plan, start, length, pool, metric) VALUES (?, ?, ?, ?, ?) ON CONFLICT (plan, start, length) DO NOTHING",
		d.Plan, d.Period.Start, d.Period.Length, d.Pool, d.Metric); err != nil {
		return Draw{}, o.errf("draw: %w", err)
	}
	got := d
	if err := tx.QueryRowContext(ctx, "SELECT pool, metric FROM draws WHERE plan = ? AND start = ? AND length = ?", d.Plan, d.Period.Start, d.Period.Length).Scan(&got.Pool, &got.Metric); err != nil {
		return Draw{}, o.errf("draw: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Draw{}, o.errf("commit: %w", err)
	}
	return got, nil
}

// Draws implements Outbox.
func (o *SQLiteOutbox) Draws(ctx context.Context) ([]Draw, error) {
	rows, err := o.db.QueryContext(ctx, "SELECT plan, start, length, pool, metric FROM draws ORDER BY start, length, pool, plan")
	if err != nil {
		return nil, o.errf("draws: %w", err)
	}
	defer rows.Close()
	var out []Draw
	for rows.Next() {
		var d Draw
		if err := rows.Scan(&d.Plan, &d.Period.Start, &d.Period.Length, &d.Pool, &d.Metric); err != nil {
			return nil, o.errf("draws: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, o.errf("draws: %w", err)
	}
	return out, nil
}

// ClosePeriod implements Outbox.
func (o *SQLiteOutbox) ClosePeriod(ctx context.Context, c PeriodClose) error {
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return o.errf("begin: %w", err)
	}
	defer tx.Rollback()
	p := c.Period
	if c.Envelope != nil || c.Step != nil {
		if closed, err := isClosed(ctx, tx, p, closedNames(c)...); err != nil {
			return o.errf("close period: %w", err)
		} else if closed {
			return fmt.Errorf("%w: %s or a metric it carries in period %s", ErrPeriodClosed, c.Pool, p)
		}
	}
	if err := o.checkStaged(ctx, tx, c); err != nil {
		return err
	}
	if err := o.commitState(ctx, tx, c); err != nil {
		return err
	}
	for _, q := range []string{
		"DELETE FROM staged_values WHERE pool = ? AND start = ? AND length = ?",
		"DELETE FROM draws WHERE pool = ? AND start = ? AND length = ?",
		"INSERT INTO closed_periods (pool, start, length) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
	} {
		if _, err := tx.ExecContext(ctx, q, c.Pool, p.Start, p.Length); err != nil {
			return o.errf("close period: %w", err)
		}
	}
	if e := c.Envelope; e != nil {
		// The period closes for every metric the envelope carries too,
		// whatever pool a later plan or another process stages it in.
		for _, ch := range c.Charges {
			if _, err := tx.ExecContext(ctx, "INSERT INTO closed_periods (pool, start, length) VALUES (?, ?, ?) ON CONFLICT DO NOTHING", ch.Metric, p.Start, p.Length); err != nil {
				return o.errf("close period: %w", err)
			}
		}
		local := 0
		if c.Local {
			local = 1
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO outbox (id, metric, suite, sealed, day, local) VALUES (?, ?, ?, ?, ?, ?)",
			e.ID[:], e.Metric, int(e.Suite), e.Sealed, periodDay(p), local); err != nil {
			return o.errf("insert report %s: %w", e.ID, err)
		}
		upload := UploadPending
		if c.Local {
			upload = UploadLocal
		}
		for _, ch := range c.Charges {
			reports, eps0 := 1, ch.Eps0
			if c.Local {
				reports, eps0 = 0, 0
			}
			// A row holding a report already (closed_periods should keep
			// any from being committed) holds two: no one state says what
			// became of both.
			if _, err := tx.ExecContext(ctx, `INSERT INTO period_ledger (start, length, metric, epoch, reports, eps0, local_reports, report, upload) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (start, length, metric) DO UPDATE SET epoch = CASE epoch WHEN '' THEN '' ELSE excluded.epoch END, reports = reports + excluded.reports,
				eps0 = eps0 + excluded.eps0, local_reports = local_reports + excluded.local_reports, report = NULL, upload = ''`,
				p.Start, p.Length, ch.Metric, c.Epoch, reports, eps0, local, e.ID[:], string(upload)); err != nil {
				return o.errf("ledger: %w", err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return o.errf("commit: %w", err)
	}
	return nil
}

// checkStaged returns an error wrapping ErrStalePeriod unless c names
// exactly the values and draws staged for its period, unchanged.
func (o *SQLiteOutbox) checkStaged(ctx context.Context, tx *sql.Tx, c PeriodClose) error {
	type vk struct{ metric, plan string }
	want := map[vk]int64{}
	for _, v := range c.Unstage {
		if v.Pool != c.Pool || v.Period != c.Period {
			return fmt.Errorf("%w: value of %q in period %s is not of %s in period %s", ErrStalePeriod, v.Metric, v.Period, c.Pool, c.Period)
		}
		want[vk{v.Metric, v.Plan}] = v.Rev
	}
	rows, err := tx.QueryContext(ctx, "SELECT metric, plan, rev FROM staged_values WHERE pool = ? AND start = ? AND length = ?", c.Pool, c.Period.Start, c.Period.Length)
	if err != nil {
		return o.errf("close period: %w", err)
	}
	n := 0
	for rows.Next() {
		var k vk
		var rev int64
		if err := rows.Scan(&k.metric, &k.plan, &rev); err != nil {
			rows.Close()
			return o.errf("close period: %w", err)
		}
		if r, ok := want[k]; !ok || r != rev {
			rows.Close()
			return fmt.Errorf("%w: value of %q in period %s changed", ErrStalePeriod, k.metric, c.Period)
		}
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return o.errf("close period: %w", err)
	}
	if n != len(want) || n != len(c.Unstage) {
		return fmt.Errorf("%w: %s in period %s has %d values staged, the closing names %d", ErrStalePeriod, c.Pool, c.Period, n, len(c.Unstage))
	}
	nd := 0
	for _, d := range c.Undraw {
		var metric string
		err := tx.QueryRowContext(ctx, "SELECT metric FROM draws WHERE plan = ? AND start = ? AND length = ? AND pool = ?", d.Plan, d.Period.Start, d.Period.Length, c.Pool).Scan(&metric)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && (metric != d.Metric || d.Period != c.Period)) {
			return fmt.Errorf("%w: draw of period %s changed", ErrStalePeriod, d.Period)
		}
		if err != nil {
			return o.errf("close period: %w", err)
		}
		nd++
	}
	var total int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM draws WHERE pool = ? AND start = ? AND length = ?", c.Pool, c.Period.Start, c.Period.Length).Scan(&total); err != nil {
		return o.errf("close period: %w", err)
	}
	if total != nd {
		return fmt.Errorf("%w: %s in period %s has %d draws staged, the closing names %d", ErrStalePeriod, c.Pool, c.Period, total, nd)
	}
	return nil
}

// Pending implements Outbox.
func (o *SQLiteOutbox) Pending(ctx context.Context, limit int) ([]report.Envelope, error) {
	return o.pending(ctx, `SELECT o.id, o.metric, o.suite, o.sealed, t.token FROM outbox o
		LEFT JOIN pool_tokens t ON t.pool_key = o.metric WHERE o.local = 0 ORDER BY o.seq LIMIT ?`, limit)
}

// pending reads the envelopes of query, which selects id, metric, suite,
// sealed and token and takes the limit.
func (o *SQLiteOutbox) pending(ctx context.Context, query string, limit int) ([]report.Envelope, error) {
	rows, err := o.db.QueryContext(ctx, query, limit)
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
		if err := rows.Scan(&id, &e.Metric, &suite, &e.Sealed, &e.Token); err != nil {
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

// Sending implements Outbox.
func (o *SQLiteOutbox) Sending(ctx context.Context, ids []report.ID) ([]bool, error) {
	out := make([]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, o.errf("begin: %w", err)
	}
	defer tx.Rollback()
	unsent := map[report.ID]bool{}
	err = forIDChunks(ids, func(in string, args []any) error {
		rows, err := tx.QueryContext(ctx, "SELECT id FROM outbox WHERE sent = 0 AND id IN "+in, args...)
		if err != nil {
			return o.errf("sending: %w", err)
		}
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				rows.Close()
				return o.errf("sending: %w", err)
			}
			var id report.ID
			copy(id[:], b)
			unsent[id] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return o.errf("sending: %w", err)
		}
		if len(unsent) > 0 {
			if _, err := tx.ExecContext(ctx, "UPDATE outbox SET sent = 1 WHERE sent = 0 AND id IN "+in, args...); err != nil {
				return o.errf("sending: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(unsent) > 0 {
		if err := tx.Commit(); err != nil {
			return nil, o.errf("commit: %w", err)
		}
	}
	for k, id := range ids {
		out[k] = !unsent[id]
	}
	return out, nil
}

// Ack implements Outbox.
func (o *SQLiteOutbox) Ack(ctx context.Context, ids []report.ID, s UploadState) error {
	if len(ids) == 0 {
		return nil
	}
	ledger := "UPDATE period_ledger SET upload = ? WHERE upload = 'pending' AND report IN "
	switch s {
	case UploadAcknowledged, UploadDropped, UploadUnknown:
	case UploadRefused:
		ledger = "UPDATE period_ledger SET upload = ?, refused_eps0 = eps0, eps0 = 0, reports = 0 WHERE upload = 'pending' AND report IN "
	case UploadNoToken:
		ledger = "UPDATE period_ledger SET upload = ?, eps0 = 0, reports = 0 WHERE upload = 'pending' AND report IN "
	default:
		return fmt.Errorf("client: outbox %s: Ack with upload state %q, want acknowledged, refused, no_token, dropped or unknown", o.path, s)
	}
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return o.errf("begin: %w", err)
	}
	defer tx.Rollback()
	err = forIDChunks(ids, func(in string, args []any) error {
		if err := spendTokens(ctx, tx, in, args); err != nil {
			return o.errf("ack: tokens: %w", err)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM outbox WHERE id IN "+in, args...); err != nil {
			return o.errf("ack: %w", err)
		}
		if _, err := tx.ExecContext(ctx, ledger+in, append([]any{string(s)}, args...)...); err != nil {
			return o.errf("ack: ledger: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return o.errf("commit: %w", err)
	}
	return nil
}

// idChunk is how many ids one statement takes, below SQLite's limit on a
// statement's variables.
const idChunk = 500

// forIDChunks calls f with each chunk of at most idChunk ids as an SQL
// list ("(?, ?, ...)") and its arguments, stopping at the first error.
func forIDChunks(ids []report.ID, f func(in string, args []any) error) error {
	for start := 0; start < len(ids); start += idChunk {
		chunk := ids[start:min(start+idChunk, len(ids))]
		args := make([]any, len(chunk))
		for i := range chunk {
			args[i] = chunk[i][:]
		}
		if err := f("(?"+strings.Repeat(", ?", len(chunk)-1)+")", args); err != nil {
			return err
		}
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
	rows, err := o.db.QueryContext(ctx, "SELECT start, length, metric, epoch, reports, eps0, local_reports, upload, refused_eps0 FROM period_ledger ORDER BY start, length, metric")
	if err != nil {
		return nil, o.errf("ledger: %w", err)
	}
	defer rows.Close()
	var out []LedgerEntry
	for rows.Next() {
		var l LedgerEntry
		var p report.Period
		var upload string
		if err := rows.Scan(&p.Start, &p.Length, &l.Metric, &l.Epoch, &l.Reports, &l.Eps0, &l.LocalReports, &upload, &l.RefusedEps0); err != nil {
			return nil, o.errf("ledger: %w", err)
		}
		l.Start, l.End, l.Upload = time.Unix(p.Start, 0).UTC(), time.Unix(p.End(), 0).UTC(), UploadState(upload)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, o.errf("ledger: %w", err)
	}
	return out, nil
}

// Close implements Outbox.
func (o *SQLiteOutbox) Close() error { return o.db.Close() }
