package client_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

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
