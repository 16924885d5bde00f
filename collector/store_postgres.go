package collector

// The PostgreSQL store: replicas of the collector share one database (the
// schema blanket_collector), so that any replica ingests any batch and
// serves every estimate.
//
// Why a batch counts once with any number of replicas, each killed at any
// moment: an ingest commits, in one transaction, the batch id into
// ingested (its primary key), the batch's rows and its statistics. Of two
// replicas ingesting one batch id at once, the second's insert into
// ingested waits on the first's index entry: if the first commits, the
// second finds the id (ON CONFLICT DO NOTHING inserts nothing) and rolls
// back, a duplicate; if the first dies or rolls back, the second goes on.
// A statistic is read FOR UPDATE (a row lock until the commit) and
// rewritten merged; when it does not exist yet, it is inserted ON CONFLICT
// DO NOTHING, and a replica that loses that race locks and merges the
// winner's row instead. The statistics of a batch are merged in a fixed
// order (metric, epoch, period), so that two replicas ingesting two
// batches of a pooled plan never wait on each other in a cycle.
//
// Why held reports (ingest.go) are published once, in a group of at least
// n_min: an ingest that adds valid reports to a pool key first takes the
// key's transaction-scoped advisory lock (before any row lock), and
// reads, changes and deletes the key's held rows
// (held_pools, held_statistics, batches.held) only under it. So the
// ingests of one key follow each other: each reads the held count the
// previous one committed, and either adds its batch to the held ones or
// merges all of them into the statistics and deletes them, in its
// transaction. Two replicas can never both publish the same held batch,
// nor leave one held behind a publication.
//
// Every replica serves the same plan and report key schedule: the
// schedule (report_keys) changes only under the publication's session
// advisory lock (lockPublish), in one transaction that reads it under the
// lock, so that a key is generated once however many replicas find it
// due (the first makes it, the others find it made), and an erasure or a
// withdrawal is never lost to a concurrent addition; a replica publishes
// its plan under the same lock, so that replicas starting together
// calibrate once and the others reuse the stored calibration (keys.go
// argues why every replica then opens a period's reports with the same
// key).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/blanket-dp/blanket/internal/pgdb"
	"github.com/blanket-dp/blanket/sdk/report"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgSchema is the schema of the collector's tables.
const pgSchema = "blanket_collector"

// pgMigrations bring the schema from version i to i+1.
var pgMigrations = []string{
	`CREATE TABLE collector_key (
		id integer PRIMARY KEY CHECK (id = 1),
		key text NOT NULL
	);
	CREATE TABLE epochs (
		epoch text PRIMARY KEY,
		seq bigserial NOT NULL,
		source text NOT NULL,
		key text NOT NULL,
		plan bytea NOT NULL
	);
	CREATE INDEX epochs_source ON epochs (source, key, seq);
	CREATE TABLE ingested (id bytea PRIMARY KEY);
	CREATE TABLE batches (
		id bytea NOT NULL,
		seq bigserial NOT NULL,
		metric text NOT NULL,
		epoch text NOT NULL,
		n bigint NOT NULL,
		malformed bigint NOT NULL,
		messages bigint NOT NULL,
		eps double precision,
		delta double precision,
		period_start bigint NOT NULL,
		period_len bigint NOT NULL,
		PRIMARY KEY (id, metric, epoch)
	);
	CREATE INDEX batches_period ON batches (metric, epoch, period_start, seq);
	CREATE TABLE statistics (
		metric text NOT NULL,
		epoch text NOT NULL,
		period_start bigint NOT NULL,
		period_len bigint NOT NULL,
		stat bytea NOT NULL,
		batches bigint NOT NULL,
		PRIMARY KEY (metric, epoch, period_start)
	)`,
	// Held batches (ingest.go): their rows flagged, their statistics and
	// valid reports per pool key kept apart until published.
	`ALTER TABLE batches ADD COLUMN held boolean NOT NULL DEFAULT false;
	CREATE TABLE held_statistics (
		metric text NOT NULL,
		epoch text NOT NULL,
		period_start bigint NOT NULL,
		period_len bigint NOT NULL,
		stat bytea NOT NULL,
		batches bigint NOT NULL,
		PRIMARY KEY (metric, epoch, period_start)
	);
	CREATE TABLE held_pools (
		pool text NOT NULL,
		epoch text NOT NULL,
		period_start bigint NOT NULL,
		messages bigint NOT NULL,
		batches bigint NOT NULL,
		PRIMARY KEY (pool, epoch, period_start)
	)`,
	// The plan-signing key and its rollover chain (plankey.go), in the
	// text form of PlanKeyFile.
	`CREATE TABLE plan_signing_key (
		id integer PRIMARY KEY CHECK (id = 1),
		signer text NOT NULL
	)`,
	// The report key schedule (keys.go) replaces the one report key,
	// which the published plans carried: a database of that build is
	// refused, not migrated. private is NULL with a key directory and
	// once erased (deleted, Unix seconds, set).
	`DO $$ BEGIN
		IF EXISTS (SELECT 1 FROM collector_key) THEN
			RAISE EXCEPTION 'blanket_collector holds the report key of an earlier build (table collector_key), which kept one key and no schedule; this build keeps a key schedule and does not migrate it: start the collector on a new database (reports sealed to the old key no longer open)';
		END IF;
	END $$;
	DROP TABLE collector_key;
	ALTER TABLE epochs DROP COLUMN key;
	CREATE INDEX epochs_source ON epochs (source, seq);
	CREATE TABLE report_keys (
		id text PRIMARY KEY,
		public bytea NOT NULL,
		valid_from bigint NOT NULL UNIQUE,
		created bigint NOT NULL,
		deleted bigint,
		private bytea
	)`,
	// The shuffler's blanket draws a batch's guarantee counts (floor.go).
	`ALTER TABLE batches ADD COLUMN draws bigint NOT NULL DEFAULT 0`,
}

// pgStore is the collector's state in PostgreSQL, shared by replicas.
type pgStore struct {
	pool *pgxpool.Pool
	hooks
}

// openPGStore connects to url and migrates the collector's schema.
func openPGStore(ctx context.Context, url string) (*pgStore, error) {
	pool, err := pgdb.Open(ctx, url, pgSchema, pgMigrations, 0)
	if err != nil {
		return nil, fmt.Errorf("collector: %w", err)
	}
	return &pgStore{pool: pool}, nil
}

// pgKeyRows reads the report key schedule through q.
func pgKeyRows(ctx context.Context, q pgdb.Querier) ([]keyRow, error) {
	return pgdb.Collect(ctx, q, `SELECT id, public, valid_from, created, coalesce(deleted, 0), private FROM report_keys ORDER BY valid_from`,
		func(row pgx.CollectableRow) (keyRow, error) {
			var r keyRow
			err := row.Scan(&r.id, &r.public, &r.from, &r.created, &r.deleted, &r.private)
			return r, err
		})
}

func (st *pgStore) reportKeys(ctx context.Context) ([]keyRow, error) {
	return pgKeyRows(ctx, st.pool)
}

// changeKeys runs under the publication lock (store).
func (st *pgStore) changeKeys(ctx context.Context, change func([]keyRow) (keyChange, error)) error {
	unlock, err := st.lockPublish(ctx)
	if err != nil {
		return fmt.Errorf("collector: locking the key schedule: %w", err)
	}
	defer unlock()
	return pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		rows, err := pgKeyRows(ctx, tx)
		if err != nil {
			return err
		}
		ch, err := change(rows)
		if err != nil || ch.empty() {
			return err
		}
		for _, id := range ch.withdraw {
			if _, err := tx.Exec(ctx, `DELETE FROM report_keys WHERE id = $1`, id); err != nil {
				return err
			}
		}
		for _, r := range ch.add {
			if _, err := tx.Exec(ctx, `INSERT INTO report_keys (id, public, valid_from, created, private) VALUES ($1, $2, $3, $4, $5)`, r.id, r.public, r.from, r.created, r.private); err != nil {
				return err
			}
		}
		for _, id := range ch.erase {
			if _, err := tx.Exec(ctx, `UPDATE report_keys SET private = NULL, deleted = $2 WHERE id = $1 AND deleted IS NULL`, id, ch.at); err != nil {
				return err
			}
		}
		for _, id := range ch.moveOut {
			if _, err := tx.Exec(ctx, `UPDATE report_keys SET private = NULL WHERE id = $1`, id); err != nil {
				return err
			}
		}
		return nil
	})
}

func (st *pgStore) planSigner(ctx context.Context) (*planSigner, bool, error) {
	fresh, err := newPlanSigner()
	if err != nil {
		return nil, false, err
	}
	tag, err := st.pool.Exec(ctx, `INSERT INTO plan_signing_key (id, signer) VALUES (1, $1) ON CONFLICT DO NOTHING`, fresh.encode())
	if err != nil {
		return nil, false, fmt.Errorf("collector: storing the plan-signing key: %w", err)
	}
	var text string
	if err := st.pool.QueryRow(ctx, `SELECT signer FROM plan_signing_key WHERE id = 1`).Scan(&text); err != nil {
		return nil, false, fmt.Errorf("collector: reading the plan-signing key: %w", err)
	}
	s, old, err := decodePlanSigner(text)
	if err != nil {
		return nil, false, fmt.Errorf("collector: the stored plan-signing key: %w", err)
	}
	if old {
		// Unless a rotation changed the row meanwhile.
		if _, err := st.pool.Exec(ctx, `UPDATE plan_signing_key SET signer = $1 WHERE id = 1 AND signer = $2`, s.encode(), text); err != nil {
			return nil, false, fmt.Errorf("collector: rewriting the plan-signing key with its seed prefixed: %w", err)
		}
	}
	return s, tag.RowsAffected() == 1, nil
}

// rotatePlanSigner replaces the stored plan-signing key by one the old key
// endorses from notBefore on, under a row lock so that two rotations
// chain rather than fork.
func (st *pgStore) rotatePlanSigner(ctx context.Context, notBefore time.Time) (old, next *planSigner, err error) {
	if _, _, err := st.planSigner(ctx); err != nil {
		return nil, nil, err
	}
	err = pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		var text string
		if err := tx.QueryRow(ctx, `SELECT signer FROM plan_signing_key WHERE id = 1 FOR UPDATE`).Scan(&text); err != nil {
			return fmt.Errorf("collector: reading the plan-signing key: %w", err)
		}
		if old, _, err = decodePlanSigner(text); err != nil {
			return fmt.Errorf("collector: the stored plan-signing key: %w", err)
		}
		if next, err = old.rotate(notBefore); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE plan_signing_key SET signer = $1 WHERE id = 1`, next.encode())
		return err
	})
	return old, next, err
}

func (st *pgStore) lockPublish(ctx context.Context) (func(), error) {
	conn, err := st.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if err := pgdb.Lock(ctx, conn, pgdb.LockPublish); err != nil {
		conn.Release()
		return nil, err
	}
	return func() {
		// A failed unlock ends with the session: drop the connection.
		if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1, $2)`, pgdb.LockClass(), int32(pgdb.LockPublish)); err != nil {
			conn.Conn().Close(context.Background())
		}
		conn.Release()
	}, nil
}

// one returns the single bytea of q, or nil when q has no row.
func (st *pgStore) one(ctx context.Context, q string, args ...any) ([]byte, error) {
	var b []byte
	err := st.pool.QueryRow(ctx, q, args...).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return b, err
}

func (st *pgStore) calibration(ctx context.Context, source string) ([]byte, error) {
	return st.one(ctx, `SELECT plan FROM epochs WHERE source = $1 ORDER BY seq DESC LIMIT 1`, source)
}

func (st *pgStore) addEpoch(ctx context.Context, epoch, source string, plan []byte) error {
	_, err := st.pool.Exec(ctx, `INSERT INTO epochs (epoch, source, plan) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, epoch, source, plan)
	return err
}

func (st *pgStore) plans(ctx context.Context, except string) ([]storedEpoch, error) {
	return pgdb.Collect(ctx, st.pool, `SELECT epoch, plan FROM epochs WHERE epoch <> $1 ORDER BY seq DESC`,
		func(r pgx.CollectableRow) (storedEpoch, error) {
			var e storedEpoch
			err := r.Scan(&e.epoch, &e.plan)
			return e, err
		}, except)
}

func (st *pgStore) epochPlan(ctx context.Context, epoch string) ([]byte, error) {
	return st.one(ctx, `SELECT plan FROM epochs WHERE epoch = $1`, epoch)
}

func (st *pgStore) hasBatch(ctx context.Context, id report.ID) (bool, error) {
	var ok bool
	err := st.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM ingested WHERE id = $1)`, id[:]).Scan(&ok)
	return ok, err
}

// errDuplicate rolls back the ingest of a batch recorded already.
var errDuplicate = errors.New("duplicate batch")

func (st *pgStore) commitBatch(ctx context.Context, id report.ID, g batchGroup) (bool, bool, error) {
	held := false
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO ingested (id) VALUES ($1) ON CONFLICT DO NOTHING`, id[:])
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errDuplicate
		}
		// The pool key's lock, before any row lock.
		if g.messages > 0 {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, pgdb.LockClass(), heldLock(g)); err != nil {
				return err
			}
		}
		type merge struct {
			table string
			m     metricMerge
		}
		var merges []merge
		var heldMessages int64
		if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT messages FROM held_pools WHERE pool = $1 AND epoch = $2 AND period_start = $3), 0)`,
			g.pool, g.epoch, g.period.Start).Scan(&heldMessages); err != nil {
			return err
		}
		fate := fateOf(g, heldMessages)
		held = fate == hold
		for _, p := range g.parts {
			b := p.rec
			if _, err := tx.Exec(ctx, `INSERT INTO batches (id, metric, epoch, n, malformed, messages, eps, delta, period_start, period_len, held, draws)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
				b.id[:], b.metric, b.epoch, b.n, b.malformed, b.messages, b.eps, b.delta, b.period.Start, b.period.Length, held, b.draws); err != nil {
				return err
			}
		}
		if held {
			for _, p := range g.parts {
				if p.stat != nil {
					merges = append(merges, merge{"held_statistics", metricMerge{metric: p.rec.metric, stat: p.stat, batches: 1}})
				}
			}
			if _, err := tx.Exec(ctx, `INSERT INTO held_pools (pool, epoch, period_start, messages, batches) VALUES ($1, $2, $3, $4, 1)
				ON CONFLICT (pool, epoch, period_start) DO UPDATE SET messages = held_pools.messages + excluded.messages, batches = held_pools.batches + 1`,
				g.pool, g.epoch, g.period.Start, g.messages); err != nil {
				return err
			}
		} else {
			heldRows := map[string]statRow{}
			if fate == publish && heldMessages > 0 {
				rows, err := pgdb.Collect(ctx, tx, `DELETE FROM held_statistics WHERE epoch = $1 AND period_start = $2 AND metric = ANY($3) RETURNING metric, stat, batches`,
					func(row pgx.CollectableRow) (statRow, error) {
						r := statRow{epoch: g.epoch, period: g.period}
						var b []byte
						if err := row.Scan(&r.metric, &b, &r.batches); err != nil {
							return r, err
						}
						var err error
						r.stat, err = decodeStat(b)
						return r, err
					}, g.epoch, g.period.Start, g.names)
				if err != nil {
					return err
				}
				for _, r := range rows {
					heldRows[r.metric] = r
				}
				if _, err := tx.Exec(ctx, `UPDATE batches SET held = false WHERE held AND epoch = $1 AND period_start = $2 AND metric = ANY($3)`, g.epoch, g.period.Start, g.names); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `DELETE FROM held_pools WHERE pool = $1 AND epoch = $2 AND period_start = $3`, g.pool, g.epoch, g.period.Start); err != nil {
					return err
				}
			}
			ms, err := mergeGroup(g, heldRows)
			if err != nil {
				return err
			}
			for _, m := range ms {
				merges = append(merges, merge{"statistics", m})
			}
		}
		// In a fixed order: no two ingests wait on each other's rows in a
		// cycle.
		slices.SortStableFunc(merges, func(a, b merge) int {
			return cmp.Or(cmp.Compare(a.table, b.table), cmp.Compare(a.m.metric, b.m.metric))
		})
		for _, m := range merges {
			if err := mergePG(ctx, tx, m.table, g.epoch, g.period, m.m); err != nil {
				return err
			}
		}
		if st.beforeCommit != nil {
			st.beforeCommit()
		}
		return nil
	})
	if errors.Is(err, errDuplicate) {
		return true, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return false, held, nil
}

// heldLock returns the second key of the advisory lock (under
// pgdb.LockClass) of g's pool key, under which its held rows change.
func heldLock(g batchGroup) string {
	return fmt.Sprintf("held %s %s %d", g.pool, g.epoch, g.period.Start)
}

// mergePG merges m into its row of table (statistics or
// held_statistics) for epoch and period, under the row's lock.
func mergePG(ctx context.Context, tx pgx.Tx, table, epoch string, period report.Period, m metricMerge) error {
	what := fmt.Sprintf("%s %s/%s/%s", table, m.metric, epoch, period)
	for {
		var old []byte
		err := tx.QueryRow(ctx, `SELECT stat FROM `+table+` WHERE metric = $1 AND epoch = $2 AND period_start = $3 FOR UPDATE`, m.metric, epoch, period.Start).Scan(&old)
		if err == nil {
			enc, err := mergeStats(old, m.stat, what)
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `UPDATE `+table+` SET stat = $4, batches = batches + $5 WHERE metric = $1 AND epoch = $2 AND period_start = $3`, m.metric, epoch, period.Start, enc, m.batches)
			return err
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		enc, err := mergeStats(nil, m.stat, what)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO `+table+` (metric, epoch, period_start, period_len, stat, batches) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT DO NOTHING`, m.metric, epoch, period.Start, period.Length, enc, m.batches)
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
		// Another replica inserted it first: lock it and merge.
	}
}

func (st *pgStore) statistics(ctx context.Context, metric string) ([]statRow, error) {
	return st.statRows(ctx, "statistics", metric)
}

func (st *pgStore) heldStatistics(ctx context.Context, metric string) ([]statRow, error) {
	return st.statRows(ctx, "held_statistics", metric)
}

// statRows reads the rows of table (statistics or held_statistics).
func (st *pgStore) statRows(ctx context.Context, table, metric string) ([]statRow, error) {
	return pgdb.Collect(ctx, st.pool, `SELECT s.metric, s.epoch, s.period_start, s.period_len, s.stat, s.batches
		FROM `+table+` s LEFT JOIN epochs e ON e.epoch = s.epoch
		WHERE $1 = '' OR s.metric = $1 ORDER BY s.metric, e.seq NULLS FIRST, s.period_start`,
		func(row pgx.CollectableRow) (statRow, error) {
			var r statRow
			var b []byte
			if err := row.Scan(&r.metric, &r.epoch, &r.period.Start, &r.period.Length, &b, &r.batches); err != nil {
				return r, err
			}
			var err error
			r.stat, err = decodeStat(b)
			return r, err
		}, metric)
}

func (st *pgStore) batchList(ctx context.Context, metric, epoch string, period report.Period) ([]batchRecord, error) {
	return pgdb.Collect(ctx, st.pool, `SELECT id, n, malformed, messages, eps, delta, held, draws FROM batches
		WHERE metric = $1 AND epoch = $2 AND period_start = $3 ORDER BY seq`,
		func(row pgx.CollectableRow) (batchRecord, error) {
			b := batchRecord{metric: metric, epoch: epoch, period: period}
			var id []byte
			err := row.Scan(&id, &b.n, &b.malformed, &b.messages, &b.eps, &b.delta, &b.held, &b.draws)
			copy(b.id[:], id)
			return b, err
		}, metric, epoch, period.Start)
}

func (st *pgStore) periodParts(ctx context.Context) ([]horizonPart, error) {
	// As sqliteStore.periodParts.
	return pgdb.Collect(ctx, st.pool, `SELECT period_start, period_len, epoch, metric, min(greatest(messages, 1)), min(draws) FROM batches
		WHERE n > 0 GROUP BY period_start, period_len, epoch, metric ORDER BY period_start, epoch, metric`,
		func(row pgx.CollectableRow) (horizonPart, error) {
			var q horizonPart
			err := row.Scan(&q.period.Start, &q.period.Length, &q.epoch, &q.pool, &q.n, &q.draws)
			return q, err
		})
}

func (st *pgStore) periodTotals(ctx context.Context) ([]storedRow, error) {
	// As sqliteStore.periodTotals.
	return pgdb.Collect(ctx, st.pool, `SELECT period_start, period_len, count(DISTINCT id), count(DISTINCT id) FILTER (WHERE held), sum(n)::bigint, sum(malformed)::bigint
		FROM batches GROUP BY period_start, period_len ORDER BY period_start, period_len`,
		func(row pgx.CollectableRow) (storedRow, error) {
			var r storedRow
			err := row.Scan(&r.period.Start, &r.period.Length, &r.batches, &r.held, &r.reports, &r.malformed)
			return r, err
		})
}

func (st *pgStore) ready(ctx context.Context) error { return pgdb.Ready(ctx, st.pool) }

func (st *pgStore) close() error {
	st.pool.Close()
	return nil
}
