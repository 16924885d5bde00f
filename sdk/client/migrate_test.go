package client_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/report"
)

// Outbox schemas of earlier versions, as they wrote them (git history of
// sdk/client/sqlite.go), so that the migration is tested on real files.
const (
	outboxSchemaV1 = `
CREATE TABLE IF NOT EXISTS outbox (
	seq    INTEGER PRIMARY KEY AUTOINCREMENT,
	id     BLOB    NOT NULL UNIQUE,
	metric TEXT    NOT NULL,
	suite  INTEGER NOT NULL,
	sealed BLOB    NOT NULL,
	day    TEXT    NOT NULL,
	local  INTEGER NOT NULL DEFAULT 0
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
PRAGMA user_version = 1;`
	outboxSchemaV2 = outboxSchemaV1 + `
CREATE TABLE IF NOT EXISTS staged (
	metric TEXT PRIMARY KEY,
	plan   TEXT NOT NULL,
	report BLOB
);
PRAGMA user_version = 2;`
	// outboxSchemaV4 is what versions 3 and 4 made of a version 2 file:
	// the staged values without their count of Records.
	outboxSchemaV4 = outboxSchemaV2 + `
CREATE TABLE staged_values (
	metric   TEXT    NOT NULL,
	plan     TEXT    NOT NULL,
	start    INTEGER NOT NULL,
	length   INTEGER NOT NULL,
	pool     TEXT    NOT NULL,
	kind     INTEGER NOT NULL,
	category TEXT    NOT NULL DEFAULT '',
	total    REAL    NOT NULL DEFAULT 0,
	rev      INTEGER NOT NULL,
	PRIMARY KEY (metric, plan, start, length)
);
CREATE INDEX staged_values_pool ON staged_values (pool, start, length);
CREATE TABLE draws (
	plan   TEXT    NOT NULL,
	start  INTEGER NOT NULL,
	length INTEGER NOT NULL,
	pool   TEXT    NOT NULL,
	metric TEXT    NOT NULL,
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
	PRIMARY KEY (start, length, metric)
);
DROP TABLE ledger;
DROP TABLE staged;
PRAGMA user_version = 4;`
)

// TestOutboxMigration opens outbox files written by earlier versions, with
// envelopes waiting for upload, a per-day ledger and (version 2) a staged
// joint round: they open, keep their pending envelopes in order (a
// Provider then uploads them), turn the per-day ledger into 24 h periods,
// drop the staged round, and take periods from then on.
func TestOutboxMigration(t *testing.T) {
	ctx := context.Background()
	for name, schema := range map[string]string{"v1": outboxSchemaV1, "v2": outboxSchemaV2} {
		t.Run(name, func(t *testing.T) {
			f := newFakeServer(t, nil)
			f.allowUnperioded = true
			dir := t.TempDir()
			path := filepath.Join(dir, client.OutboxFile)
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, schema); err != nil {
				t.Fatal(err)
			}
			// Two envelopes of the old kind: pool key with an epoch, no
			// period, sealed under the unperioded binding.
			pl := f.pl
			var ids []report.ID
			for _, v := range []string{"home", "search"} {
				b := pl.Binding("app/screen")
				sealed, err := report.Seal(f.priv.PublicKey(), b, []byte(v))
				if err != nil {
					t.Fatal(err)
				}
				id := report.NewID()
				ids = append(ids, id)
				if _, err := db.ExecContext(ctx, "INSERT INTO outbox (id, metric, suite, sealed, day, local) VALUES (?, ?, ?, ?, ?, 0)",
					id[:], report.PoolKey("app/screen", pl.Epoch()), int(report.SuiteX25519ChaCha), sealed, "2026-02-27"); err != nil {
					t.Fatal(err)
				}
			}
			// The old SDK also reported app/bytes on the day of t0.
			if _, err := db.ExecContext(ctx, `INSERT INTO ledger (day, metric, reports, eps0, local_reports) VALUES
				('2026-02-27', 'app/screen', 2, 4, 0), ('2026-03-01', 'app/bytes', 1, 2, 0)`); err != nil {
				t.Fatal(err)
			}
			if name == "v2" {
				if _, err := db.ExecContext(ctx, "INSERT INTO staged (metric, plan, report) VALUES ('app/screen', 'digest', x'0102')"); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()

			o, err := client.OpenSQLiteOutbox(ctx, path)
			if err != nil {
				t.Fatalf("opening the %s file: %v", name, err)
			}
			pending, err := o.Pending(ctx, 10)
			if err != nil || len(pending) != 2 || pending[0].ID != ids[0] || pending[1].ID != ids[1] {
				t.Fatalf("pending after the migration: %+v, %v; want the 2 envelopes in order", pending, err)
			}
			d := time.Date(2026, 2, 27, 0, 0, 0, 0, time.UTC)
			d0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
			bytesDay := client.LedgerEntry{Start: d0, End: d0.Add(day), Metric: "app/bytes", Reports: 1, Eps0: 2}
			l, err := o.Ledger(ctx)
			if err != nil || len(l) != 2 || l[0] != (client.LedgerEntry{Start: d, End: d.Add(day), Metric: "app/screen", Reports: 2, Eps0: 4}) || l[1] != bytesDay {
				t.Fatalf("ledger after the migration: %+v, %v; want the days as 24 h periods", l, err)
			}
			if vs, err := o.Staged(ctx); err != nil || len(vs) != 0 {
				t.Fatalf("staged after the migration: %+v, %v; want none", vs, err)
			}
			o.Close()

			// A Provider on the migrated file uploads the old envelopes
			// and reports by periods.
			cfg, clk := clockConfig(f, dir)
			p := newProvider(t, cfg)
			if err := p.Meter("app").Categorical("screen").Record(ctx, "home"); err != nil {
				t.Fatal(err)
			}
			// app/bytes was reported on this day already: late.
			if err := p.Meter("app").Sum("bytes").Record(ctx, 5); err != nil {
				t.Fatal(err)
			}
			if st := p.Stats(); st.Late != 1 || st.Recorded != 1 {
				t.Fatalf("stats %+v, want app/bytes late on the day the old SDK reported it", st)
			}
			flush(t, p)
			if distinct, _, _ := f.counts(); distinct != 2 {
				t.Fatalf("server holds %d reports, want the 2 migrated", distinct)
			}
			closeAndFlush(t, p, clk)
			if distinct, _, _ := f.counts(); distinct != 3 {
				t.Fatalf("server holds %d reports, want 3", distinct)
			}
			keys := f.keyCounts()
			if keys[report.PoolKey("app/screen", pl.Epoch())] != 2 || keys[report.PeriodPoolKey("app/screen", pl.Epoch(), pl.ReportPeriod(t0))] != 1 {
				t.Errorf("pool keys %v, want 2 unperioded and 1 of the period", keys)
			}
			p.Shutdown(ctx)
			// Opening again is a no-op.
			o, err = client.OpenSQLiteOutbox(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			if l, _ := o.Ledger(ctx); len(l) != 3 || l[1] != bytesDay {
				t.Errorf("ledger %+v, want the migrated days (app/bytes unchanged) and the new period", l)
			}
		})
	}
}

// TestOutboxMigrationRecordCount opens an outbox file of version 4, whose
// staged values have no count of Records, with a sum and a categorical
// value staged for the open period: it opens, every staged value counts
// one Record (it had at least one; only a mean reads the count, and
// version 4 staged none), a Record adds to the migrated value, and the
// period closes into one report of each metric made of the migrated value.
func TestOutboxMigrationRecordCount(t *testing.T) {
	ctx := context.Background()
	f := newFakeServer(t, nil)
	dir := t.TempDir()
	path := filepath.Join(dir, client.OutboxFile)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, outboxSchemaV4); err != nil {
		t.Fatal(err)
	}
	pl := f.pl
	period := pl.ReportPeriod(t0)
	if _, err := db.ExecContext(ctx, `INSERT INTO staged_values (metric, plan, start, length, pool, kind, category, total, rev) VALUES
		('app/bytes', ?, ?, ?, 'app/bytes', ?, '', 30, 3), ('app/screen', ?, ?, ?, 'app/screen', ?, 'search', 0, 1)`,
		pl.Digest(), period.Start, period.Length, int(sdk.InputReal), pl.Digest(), period.Start, period.Length, int(sdk.InputCategorical)); err != nil {
		t.Fatal(err)
	}
	db.Close()

	o, err := client.OpenSQLiteOutbox(ctx, path)
	if err != nil {
		t.Fatalf("opening the version 4 file: %v", err)
	}
	vs, err := o.Staged(ctx)
	if err != nil || len(vs) != 2 || vs[0].Metric != "app/bytes" || vs[0].Sum != 30 || vs[0].Count != 1 || vs[0].Rev != 3 ||
		vs[1].Category != "search" || vs[1].Count != 1 {
		t.Fatalf("staged after the migration: %+v, %v; want the two values, each counting 1", vs, err)
	}
	o.Close()

	cfg, clk := clockConfig(f, dir)
	var sp spy
	cfg.Randomizers = sp.cache(t)
	o = sqliteOutbox(t, dir)
	cfg.Outbox = o
	p := newProvider(t, cfg)
	if err := p.Meter("app").Sum("bytes").Record(ctx, 12); err != nil {
		t.Fatal(err)
	}
	if vs, err := o.Staged(ctx); err != nil || len(vs) != 2 || vs[0].Sum != 42 || vs[0].Count != 2 {
		t.Fatalf("staged after a Record: %+v, %v; want app/bytes at 42 over 2 Records", vs, err)
	}
	closeAndFlush(t, p, clk)
	if in := sp.got("summation"); len(in) != 1 || in[0].Reals[0] != 42 {
		t.Errorf("summation randomized %+v, want the total 42", in)
	}
	if in := sp.got("krr"); len(in) != 1 || in[0].Categories[0] != "search" {
		t.Errorf("krr randomized %+v, want the migrated value", in)
	}
	if distinct, _, _ := f.counts(); distinct != 2 {
		t.Errorf("server holds %d reports, want 2", distinct)
	}
	f.checkReports(t, pl)
	// The migrated file is at the current version; opening it again is a
	// no-op.
	p.Shutdown(ctx)
	o2, err := client.OpenSQLiteOutbox(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	o2.Close()
	db, err = sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var version int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil || version != 7 {
		t.Errorf("user_version %d, %v; want 7 (the current version)", version, err)
	}
}

// outboxSchemaV6 is what versions 5 and 6 made of a version 4 file.
const outboxSchemaV6 = outboxSchemaV4 + `
ALTER TABLE staged_values ADD COLUMN records INTEGER NOT NULL DEFAULT 1;
CREATE TABLE metric_states (
	metric TEXT    NOT NULL,
	plan   TEXT    NOT NULL,
	digest TEXT    NOT NULL,
	start  INTEGER NOT NULL,
	length INTEGER NOT NULL,
	state  BLOB    NOT NULL,
	PRIMARY KEY (metric, plan, digest)
);
CREATE TABLE carried_values (
	metric   TEXT    PRIMARY KEY,
	start    INTEGER NOT NULL,
	length   INTEGER NOT NULL,
	kind     INTEGER NOT NULL,
	category TEXT    NOT NULL DEFAULT '',
	total    REAL    NOT NULL DEFAULT 0
);
PRAGMA user_version = 6;`

// TestOutboxMigrationUploadState opens an outbox file of version 6, whose
// ledger says nothing of uploads, holding a report of separate travel
// still waiting for upload, a joint message of two metrics waiting too, a
// report uploaded already, a local report and a day migrated from the
// per-day ledger: the waiting reports' entries become pending, linked to
// their envelopes (an Ack of them then sets their state, and a refusal
// takes back the charge of each metric the message carried), the local
// one local, and the others unknown and charged; the waiting envelopes
// count as sent (an earlier upload may have carried them).
func TestOutboxMigrationUploadState(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), client.OutboxFile)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, outboxSchemaV6); err != nil {
		t.Fatal(err)
	}
	p0, p1 := dayPeriod("2026-03-01"), dayPeriod("2026-03-02")
	sepID, jointID, localID := report.NewID(), report.NewID(), report.NewID()
	if _, err := db.ExecContext(ctx, `INSERT INTO outbox (id, metric, suite, sealed, day, local) VALUES (?, ?, 1, x'00', '2026-03-01', 0), (?, ?, 1, x'00', '2026-03-02', 0), (?, ?, 1, x'00', '2026-03-01', 1)`,
		sepID[:], report.PeriodPoolKey("app/screen", "e1", p0), jointID[:], report.PeriodPoolKey("@joint", "e2", p1), localID[:], report.PeriodPoolKey("app/feature", "e1", p0)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO period_ledger (start, length, metric, epoch, reports, eps0, local_reports) VALUES
		(?, ?, 'app/screen', 'e1', 1, 2, 0), (?, ?, 'app/bytes', 'e1', 1, 2, 0), (?, ?, 'app/feature', 'e1', 0, 0, 1),
		(?, ?, 'app/screen', 'e2', 1, 0.5, 0), (?, ?, 'app/bytes', 'e2', 1, 0.25, 0), (?, ?, 'app/old', '', 2, 4, 0)`,
		p0.Start, p0.Length, p0.Start, p0.Length, p0.Start, p0.Length, p1.Start, p1.Length, p1.Start, p1.Length, p1.Start, p1.Length); err != nil {
		t.Fatal(err)
	}
	db.Close()

	o, err := client.OpenSQLiteOutbox(ctx, path)
	if err != nil {
		t.Fatalf("opening the version 6 file: %v", err)
	}
	defer o.Close()
	d0, d1 := time.Unix(p0.Start, 0).UTC(), time.Unix(p1.Start, 0).UTC()
	check := func(when string, want []client.LedgerEntry) {
		t.Helper()
		l, err := o.Ledger(ctx)
		if err != nil || len(l) != len(want) {
			t.Fatalf("%s: ledger = %+v, %v; want %+v", when, l, err, want)
		}
		for i := range want {
			if l[i] != want[i] {
				t.Errorf("%s: ledger[%d] = %+v, want %+v", when, i, l[i], want[i])
			}
		}
	}
	check("after the migration", []client.LedgerEntry{
		{Start: d0, End: d1, Metric: "app/bytes", Epoch: "e1", Reports: 1, Eps0: 2, Upload: client.UploadUnknown},
		{Start: d0, End: d1, Metric: "app/feature", Epoch: "e1", LocalReports: 1, Upload: client.UploadLocal},
		{Start: d0, End: d1, Metric: "app/screen", Epoch: "e1", Reports: 1, Eps0: 2, Upload: client.UploadPending},
		{Start: d1, End: d1.Add(day), Metric: "app/bytes", Epoch: "e2", Reports: 1, Eps0: 0.25, Upload: client.UploadPending},
		{Start: d1, End: d1.Add(day), Metric: "app/old", Reports: 2, Eps0: 4, Upload: client.UploadUnknown},
		{Start: d1, End: d1.Add(day), Metric: "app/screen", Epoch: "e2", Reports: 1, Eps0: 0.5, Upload: client.UploadPending},
	})
	// Envelopes of version 6 may have been uploaded: they count as sent.
	if sent, err := o.Sending(ctx, []report.ID{sepID, jointID}); err != nil || !sent[0] || !sent[1] {
		t.Errorf("Sending after the migration = %v, %v; want both sent before", sent, err)
	}
	if err := o.Ack(ctx, []report.ID{sepID}, client.UploadAcknowledged); err != nil {
		t.Fatal(err)
	}
	if err := o.Ack(ctx, []report.ID{jointID}, client.UploadRefused); err != nil {
		t.Fatal(err)
	}
	check("after the Acks", []client.LedgerEntry{
		{Start: d0, End: d1, Metric: "app/bytes", Epoch: "e1", Reports: 1, Eps0: 2, Upload: client.UploadUnknown},
		{Start: d0, End: d1, Metric: "app/feature", Epoch: "e1", LocalReports: 1, Upload: client.UploadLocal},
		{Start: d0, End: d1, Metric: "app/screen", Epoch: "e1", Reports: 1, Eps0: 2, Upload: client.UploadAcknowledged},
		{Start: d1, End: d1.Add(day), Metric: "app/bytes", Epoch: "e2", Upload: client.UploadRefused, RefusedEps0: 0.25},
		{Start: d1, End: d1.Add(day), Metric: "app/old", Reports: 2, Eps0: 4, Upload: client.UploadUnknown},
		{Start: d1, End: d1.Add(day), Metric: "app/screen", Epoch: "e2", Upload: client.UploadRefused, RefusedEps0: 0.5},
	})
	if pending, err := o.Pending(ctx, 10); err != nil || len(pending) != 0 {
		t.Errorf("pending = %+v, %v; want none", pending, err)
	}
}
