package client

import (
	"context"
	"fmt"
)

// outboxSchema is the SQLite outbox's schema, created in a new file.
//
// outbox holds the sealed reports, a row deleted once the shuffler
// acknowledged it (HTTP 202). Values are staged in clear per metric, plan
// and period until the period closes (staged_values, with the draws of
// parallel travel); closed_periods remembers every (pool, period) closed
// and every (metric, period) reported, so that none reopens and a metric
// reported in a joint message is not reported again under separate travel
// (a later plan, another process). period_ledger is the privacy ledger,
// one row per period and metric, linked to its envelope by id (report)
// from its commit on, and saying what became of it (upload). State
// metrics, whose randomizer keeps per-user state across periods
// (sdk.Stateful), keep each run's state in metric_states (one per metric,
// plan and randomizer configuration: a new plan starts a new run) with
// the last period stepped, written in the transaction that commits that
// period's envelope, and their last value in carried_values, which every
// period without a Record reports again. Admission tokens: token_requests
// holds each request for tokens from before it is sent until the issuer
// answered it (its pool keys in token_request_pools), pool_tokens per
// pool key the token, or that it was spent, or the issuer's refusal, until
// the period's deadline; an envelope takes the token of its pool key
// (outbox.metric) when it is uploaded.
const outboxSchema = `
CREATE TABLE outbox (
	seq    INTEGER PRIMARY KEY AUTOINCREMENT, -- upload order
	id     BLOB    NOT NULL UNIQUE,           -- report.ID, 16 random bytes
	metric TEXT    NOT NULL,                  -- pool key (report.PeriodPoolKey)
	suite  INTEGER NOT NULL,
	sealed BLOB    NOT NULL,                  -- HPKE ciphertext
	day    TEXT    NOT NULL,                  -- UTC "2006-01-02" of the period's start
	local  INTEGER NOT NULL DEFAULT 0,        -- 1: ModeLocal, never uploaded
	sent   INTEGER NOT NULL DEFAULT 0         -- 1: an upload carried it
);
CREATE INDEX outbox_pending ON outbox (local, seq);
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
	records  INTEGER NOT NULL DEFAULT 1,  -- the Records staged into it (a mean divides by it)
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
	epoch         TEXT    NOT NULL DEFAULT '',
	reports       INTEGER NOT NULL DEFAULT 0,
	eps0          REAL    NOT NULL DEFAULT 0,
	local_reports INTEGER NOT NULL DEFAULT 0,
	report        BLOB,                        -- the envelope's report.ID; NULL: unknown
	upload        TEXT    NOT NULL DEFAULT '', -- UploadState
	refused_eps0  REAL    NOT NULL DEFAULT 0,
	PRIMARY KEY (start, length, metric)
);
CREATE INDEX period_ledger_report ON period_ledger (report) WHERE report IS NOT NULL;
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
);
CREATE TABLE token_requests (
	id       INTEGER PRIMARY KEY AUTOINCREMENT,
	pending  BLOB    NOT NULL,            -- admission.Pending, binary: secret
	deadline INTEGER NOT NULL             -- Unix seconds: forgotten from then on
);
CREATE TABLE token_request_pools (
	pool_key TEXT    PRIMARY KEY,         -- report.PeriodPoolKey
	request  INTEGER NOT NULL REFERENCES token_requests (id) ON DELETE CASCADE,
	seq      INTEGER NOT NULL             -- its place in the request
);
CREATE INDEX token_request_pools_request ON token_request_pools (request, seq);
CREATE TABLE pool_tokens (
	pool_key TEXT    PRIMARY KEY,         -- report.PeriodPoolKey
	token    BLOB,                        -- admission.Token; NULL once spent, or refused
	refused  TEXT    NOT NULL DEFAULT '', -- the issuer's refusal code
	reason   TEXT    NOT NULL DEFAULT '',
	deadline INTEGER NOT NULL,            -- Unix seconds: forgotten from then on
	retry    INTEGER NOT NULL DEFAULT 0   -- a refusal: ask again from then on; 0: never
);`

// outboxSchemaVersion is the version (PRAGMA user_version) of
// outboxSchema. Files of earlier versions were written by pre-release
// SDKs; nothing migrates them.
const outboxSchemaVersion = 8

// createSchema creates the schema in a new file (PRAGMA user_version 0), in
// one transaction, and refuses a file of another version.
func (o *SQLiteOutbox) createSchema(ctx context.Context) error {
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return o.errf("begin: %w", err)
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return o.errf("schema version: %w", err)
	}
	switch {
	case v > outboxSchemaVersion:
		return o.errf("schema version %d is newer than this client's %d", v, outboxSchemaVersion)
	case v == outboxSchemaVersion:
		return nil
	case v > 0:
		return o.errf("schema version %d was written by a pre-release SDK, and this client (version %d) does not migrate it: delete the file", v, outboxSchemaVersion)
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
