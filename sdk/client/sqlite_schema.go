package client

import (
	"context"
	"fmt"
)

// outboxMigrations are the SQLite outbox's schema versions: migration i
// takes a file at version i (PRAGMA user_version) to version i+1. A new
// file runs them all, so that a new file and a migrated one have the same
// schema. They never remove an envelope waiting for upload.
var outboxMigrations = []string{
	// Version 1: sealed reports and a per-day ledger. A row of outbox is
	// one sealed report, deleted once the shuffler acknowledged it (HTTP
	// 202).
	`
CREATE TABLE IF NOT EXISTS outbox (
	seq    INTEGER PRIMARY KEY AUTOINCREMENT, -- upload order
	id     BLOB    NOT NULL UNIQUE,           -- report.ID, 16 random bytes
	metric TEXT    NOT NULL,                  -- pool key (report.PeriodPoolKey)
	suite  INTEGER NOT NULL,
	sealed BLOB    NOT NULL,                  -- HPKE ciphertext
	day    TEXT    NOT NULL,                  -- UTC "2006-01-02" (since version 3: of the period's start)
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
);`,
	// Version 2: the staged reports of joint and parallel rounds.
	`
CREATE TABLE IF NOT EXISTS staged (
	metric TEXT PRIMARY KEY,
	plan   TEXT NOT NULL,
	report BLOB
);`,
	// Version 3: reporting periods. Values are staged in clear per
	// metric, plan and period until the period closes; closed_periods
	// remembers every (pool, period) closed, so that none reopens (since
	// version 4 also every (metric, period) reported); the
	// ledger is per period. The per-day ledger becomes a ledger of 24 h
	// periods (the days were UTC, as the periods are); the rounds staged
	// by version 2 (randomized joint reports and parallel draws, without
	// a period) cannot be sealed for a period and are dropped: they were
	// never sent, so no privacy was spent on them.
	`
CREATE TABLE staged_values (
	metric   TEXT    NOT NULL,
	plan     TEXT    NOT NULL,            -- plan digest
	start    INTEGER NOT NULL,            -- period start, Unix seconds
	length   INTEGER NOT NULL,            -- period length, seconds
	pool     TEXT    NOT NULL,            -- the metric, or the pool of pooled travel
	kind     INTEGER NOT NULL,            -- sdk.InputKind
	category TEXT    NOT NULL DEFAULT '', -- categorical: the period's last value
	total    REAL    NOT NULL DEFAULT 0,  -- real: the period's total, not clamped
	rev      INTEGER NOT NULL,
	PRIMARY KEY (metric, plan, start, length)
);
CREATE INDEX staged_values_pool ON staged_values (pool, start, length);
CREATE TABLE draws (
	plan   TEXT    NOT NULL,
	start  INTEGER NOT NULL,
	length INTEGER NOT NULL,
	pool   TEXT    NOT NULL,
	metric TEXT    NOT NULL,              -- the metric the period drew
	PRIMARY KEY (plan, start, length)
);
CREATE TABLE closed_periods (
	pool   TEXT    NOT NULL,
	start  INTEGER NOT NULL,
	length INTEGER NOT NULL,
	PRIMARY KEY (pool, start, length)
);
CREATE TABLE period_ledger (
	start         INTEGER NOT NULL,
	length        INTEGER NOT NULL,
	metric        TEXT    NOT NULL,
	epoch         TEXT    NOT NULL DEFAULT '', -- '': migrated from the per-day ledger
	reports       INTEGER NOT NULL DEFAULT 0,
	eps0          REAL    NOT NULL DEFAULT 0,
	local_reports INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (start, length, metric)
);
INSERT INTO period_ledger (start, length, metric, reports, eps0, local_reports)
	SELECT CAST(strftime('%s', day) AS INTEGER), 86400, metric, reports, eps0, local_reports FROM ledger;
DROP TABLE ledger;
DROP TABLE staged;`,
	// Version 4: a period is closed for every metric it reported, not
	// only for its pool, so that a metric reported in a joint message is
	// not reported again under separate travel (a later plan, another
	// process). Every ledger row with a report closes its period for its
	// metric: the days of the per-day ledger migrated by version 3 (their
	// reports were sent, so no second one may be), and the periods closed
	// by version 3, which marked only the pool.
	`
INSERT INTO closed_periods (pool, start, length)
	SELECT metric, start, length FROM period_ledger WHERE reports > 0
	ON CONFLICT DO NOTHING;`,
	// Version 5: a staged value counts the Records staged into it, so
	// that a metric of plan aggregate "mean" reports its period's total
	// over that count. A value staged by version 4 counts 1: it had at
	// least one Record and the number is lost, but only a mean reads it
	// and version 4 staged none (it did not know the aggregate, so the
	// digest it staged a mean metric's values under is not the plan's,
	// and they are dropped at closing as superseded).
	`
ALTER TABLE staged_values ADD COLUMN records INTEGER NOT NULL DEFAULT 1;`,
	// Version 6: state metrics, whose randomizer keeps per-user state
	// across periods (sdk.Stateful). metric_states holds each run's
	// state (one per metric, plan and randomizer configuration: a new
	// plan starts a new run) with the last period stepped, written in the
	// transaction that commits that period's envelope; carried_values
	// holds each state metric's last value, which every period without a
	// Record reports again. A file of version 5 holds no state, so both
	// start empty; values it staged for a state metric (which it could
	// not send: such a randomizer refuses Randomize) are stepped when
	// their period closes, within the grace.
	`
CREATE TABLE metric_states (
	metric TEXT    NOT NULL,
	plan   TEXT    NOT NULL,            -- plan digest: a new plan is a new run
	digest TEXT    NOT NULL,            -- the randomizer's configuration digest
	start  INTEGER NOT NULL,            -- the last period stepped: start, Unix seconds
	length INTEGER NOT NULL,            -- and length, seconds
	state  BLOB    NOT NULL,            -- the randomizer's state, opaque
	PRIMARY KEY (metric, plan, digest)
);
CREATE TABLE carried_values (
	metric   TEXT    PRIMARY KEY,
	start    INTEGER NOT NULL,            -- the period it was the value of
	length   INTEGER NOT NULL,
	kind     INTEGER NOT NULL,            -- sdk.InputKind
	category TEXT    NOT NULL DEFAULT '', -- categorical
	total    REAL    NOT NULL DEFAULT 0   -- real
);`,
	// Version 7: the ledger says what became of each report
	// (LedgerEntry.Upload) and takes back the charge of a report the
	// shuffler refused. A ledger row is linked to its envelope by id
	// (report) from its commit on, and Ack sets its state. Rows of
	// version 6 get a state where it is known: local rows are local; a
	// row of one report whose envelope still waits in the outbox is
	// pending, linked to it by its pool key (pool#epoch#start+length: the
	// metric's with separate travel, the plan's pool, "@…", with pooled
	// travel, one message per epoch and period); the others (uploaded
	// already, acknowledged or dropped: version 6 did not say which)
	// stay unknown, and charged. An envelope is marked sent before an
	// upload (Outbox.Sending): the shuffler may hold one that an upload
	// without an answer carried, so a refusal of it when sent again does
	// not take back its charge. Envelopes of version 6 may have been sent
	// so: they are marked.
	`
ALTER TABLE outbox ADD COLUMN sent INTEGER NOT NULL DEFAULT 0;           -- 1: an upload carried it
UPDATE outbox SET sent = 1;
ALTER TABLE period_ledger ADD COLUMN report BLOB;                        -- the envelope's report.ID; NULL: unknown
ALTER TABLE period_ledger ADD COLUMN upload TEXT NOT NULL DEFAULT '';    -- UploadState
ALTER TABLE period_ledger ADD COLUMN refused_eps0 REAL NOT NULL DEFAULT 0;
UPDATE period_ledger SET upload = 'local' WHERE reports = 0 AND local_reports > 0;
UPDATE period_ledger SET report = (SELECT id FROM outbox WHERE local = 0 AND outbox.metric = period_ledger.metric || '#' || period_ledger.epoch || '#' || period_ledger.start || '+' || period_ledger.length)
	WHERE reports = 1 AND local_reports = 0 AND epoch != '';
UPDATE period_ledger SET report = (SELECT id FROM outbox WHERE local = 0 AND outbox.metric GLOB '@*#' || period_ledger.epoch || '#' || period_ledger.start || '+' || period_ledger.length)
	WHERE report IS NULL AND reports = 1 AND local_reports = 0 AND epoch != '';
UPDATE period_ledger SET upload = 'pending' WHERE report IS NOT NULL;
CREATE INDEX period_ledger_report ON period_ledger (report) WHERE report IS NOT NULL;`,
}

// outboxSchemaVersion is the version this client writes.
var outboxSchemaVersion = len(outboxMigrations)

// migrate brings the file to outboxSchemaVersion in one transaction.
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
	if v == outboxSchemaVersion {
		return nil
	}
	for i := v; i < outboxSchemaVersion; i++ {
		if _, err := tx.ExecContext(ctx, outboxMigrations[i]); err != nil {
			return o.errf("schema version %d: %w", i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", outboxSchemaVersion)); err != nil {
		return o.errf("schema version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return o.errf("commit: %w", err)
	}
	return nil
}
