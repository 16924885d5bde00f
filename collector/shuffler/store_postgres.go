package shuffler

// The PostgreSQL store: replicas of the shuffler share one database (the
// schema blanket_shuffler), so that any replica takes any upload and the
// pools fill from all of them.
//
// Why it is safe with any number of replicas, each killed at any moment:
//
//   - An upload is acknowledged after its transaction commits. The id
//     hashes (seen) are unique: of two replicas committing the same id at
//     once, the second waits on the first's index entry and then finds it
//     (INSERT … ON CONFLICT DO NOTHING RETURNING), so the report is
//     pooled once, by the statement that remembers its id.
//   - A pool is released by one replica at a time: the release takes a
//     transaction-scoped advisory lock on the pool (pg_try_advisory_xact_
//     lock; another replica holding it skips the pool this round), deletes
//     up to the limit of its oldest reports (DELETE … RETURNING), refuses
//     fewer than n_min by rolling back, and writes the outgoing batch, all
//     in one transaction: a replica killed mid-release leaves the reports
//     in the pool. (SELECT … FOR UPDATE SKIP LOCKED alone would let racing
//     replicas each take a part below n_min.) It counts the pool after
//     taking the lock and, while the period is open, leaves n_min in it.
//   - A period is closed (closePeriod) under its advisory lock taken
//     exclusive, which every accept pooling into it holds shared from
//     before it reads the closed periods until it commits: once closePeriod
//     returns, no report of the period is pooled any more, so its final
//     release leaves none behind (release.go has the whole argument).
//   - Ids are forgotten only once their period's deadline passed, and the
//     latest forgotten end per period length is recorded (forgotten) by
//     the same statement, from the very rows it deletes. An accept checks the forgotten periods after
//     its inserts, in its own transaction: an insert that raced a
//     deletion of the same id waited for that deletion to commit, so the
//     check sees it, and the accept rolls back and refuses the period's
//     envelopes. No id is thus pooled twice, whatever the replicas'
//     clocks or graces.
//   - An admission token is taken once (Options.Admission). An accept
//     inserts its envelopes' ids into seen first: the retry of an
//     accepted report is a duplicate whatever its token, never a second
//     spend. Then, for the ids new to seen, it inserts each token's key
//     (issuer.SpentKey) into spent, whose primary key it is, and pools
//     a report only if that insert stored its key, in the same
//     transaction; an envelope whose key was there is refused as spent
//     and its id deleted from seen again (it is not stored). Of two
//     transactions inserting one key, on any replicas, the later waits
//     on the earlier's index entry (a unique index holds one live entry
//     per key) until it commits, then stores nothing (INSERT … ON
//     CONFLICT DO NOTHING RETURNING), or rolls back, then stores its
//     own. So a committed key was stored by one accept, and only the
//     report of that accept was pooled with it. Keys are deleted only
//     past their period's deadline, by the statement of forget that
//     records the period in forgotten: an insert that waited on such a
//     deletion finds the period closed when its accept reads forgotten
//     after its inserts, and rolls back, as for ids. Keys are inserted
//     in key order, ids in id order, and an accept takes no key before
//     its ids are in: two accepts never wait on each other in a cycle.
//   - An outgoing batch is sent by the replica that holds its lease
//     (claim), renewed while the send lasts; the lease of a replica that
//     died ends within a minute, and another replica sends it. Two
//     deliveries of one batch are harmless: the collector counts a batch
//     id once.

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/blanket-dp/blanket/internal/pgdb"
	"github.com/blanket-dp/blanket/sdk/report"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgSchema is the schema of the shuffler's tables.
const pgSchema = "blanket_shuffler"

// pgMigrations bring the schema from version i to i+1.
var pgMigrations = []string{
	`CREATE TABLE meta (
		key text PRIMARY KEY,
		value bytea NOT NULL
	);
	CREATE TABLE pool (
		id bigserial PRIMARY KEY,
		metric text NOT NULL,
		suite integer NOT NULL,
		sealed bytea NOT NULL
	);
	CREATE INDEX pool_metric ON pool (metric, suite, id);
	CREATE TABLE seen (
		h bytea PRIMARY KEY,
		period_end bigint NOT NULL,
		period_len bigint NOT NULL
	);
	CREATE INDEX seen_end ON seen (period_end);
	CREATE TABLE pools (name text PRIMARY KEY);
	CREATE TABLE period_lengths (seconds bigint PRIMARY KEY);
	CREATE TABLE forgotten (
		period_len bigint PRIMARY KEY,
		period_end bigint NOT NULL
	);
	CREATE TABLE outgoing (
		id bytea PRIMARY KEY,
		seq bigserial NOT NULL,
		metric text NOT NULL,
		n integer NOT NULL,
		body bytea NOT NULL,
		owner bytea,
		lease_until timestamptz NOT NULL DEFAULT '-infinity'
	);
	CREATE INDEX outgoing_seq ON outgoing (seq)`,
	// 2: the keys of spent admission tokens (issuer.SpentKey), until
	// their period's deadline.
	`CREATE TABLE spent (
		k bytea PRIMARY KEY,
		period_end bigint NOT NULL,
		period_len bigint NOT NULL
	);
	CREATE INDEX spent_end ON spent (period_end)`,
	// 3: each outgoing batch's release (the database's clock, which every
	// replica shares), for the age of the oldest (oldestOutgoing); a
	// batch released before gets the migration's time.
	`ALTER TABLE outgoing ADD COLUMN released_at timestamptz NOT NULL DEFAULT now()`,
}

// acceptLockTimeout bounds an accept's wait on another replica's ids.
const acceptLockTimeout = "2s"

// pgStore is the shuffler's state in PostgreSQL, shared by replicas.
type pgStore struct {
	pool *pgxpool.Pool
	// owner names this process in the leases of outgoing batches.
	owner []byte
}

// openPGStore connects to url and migrates the shuffler's schema.
func openPGStore(ctx context.Context, url string) (*pgStore, error) {
	pool, err := pgdb.Open(ctx, url, pgSchema, pgMigrations, 0)
	if err != nil {
		return nil, fmt.Errorf("shuffler: %w", err)
	}
	owner := make([]byte, 16)
	rand.Read(owner)
	return &pgStore{pool: pool, owner: owner}, nil
}

func (st *pgStore) meta(ctx context.Context, key string, value []byte) ([]byte, error) {
	if _, err := st.pool.Exec(ctx, `INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING`, key, value); err != nil {
		return nil, fmt.Errorf("shuffler: meta: %w", err)
	}
	var out []byte
	if err := st.pool.QueryRow(ctx, `SELECT value FROM meta WHERE key = $1`, key).Scan(&out); err != nil {
		return nil, fmt.Errorf("shuffler: meta: %w", err)
	}
	return out, nil
}

func (st *pgStore) salt(ctx context.Context) ([]byte, error) {
	salt := make([]byte, 32)
	rand.Read(salt)
	return st.meta(ctx, "salt", salt)
}

func (st *pgStore) learned(ctx context.Context) ([]string, []int64, error) {
	pools, err := pgdb.Collect(ctx, st.pool, `SELECT name FROM pools`, pgx.RowTo[string])
	if err != nil {
		return nil, nil, fmt.Errorf("shuffler: learned pools: %w", err)
	}
	lengths, err := pgdb.Collect(ctx, st.pool, `SELECT seconds FROM period_lengths`, pgx.RowTo[int64])
	if err != nil {
		return nil, nil, fmt.Errorf("shuffler: learned period lengths: %w", err)
	}
	return pools, lengths, nil
}

func (st *pgStore) learn(ctx context.Context, pools []string, lengths []int64) error {
	if _, err := st.pool.Exec(ctx, `INSERT INTO pools (name) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING`, pools); err != nil {
		return err
	}
	_, err := st.pool.Exec(ctx, `INSERT INTO period_lengths (seconds) SELECT unnest($1::bigint[]) ON CONFLICT DO NOTHING`, lengths)
	return err
}

// readForgotten reads the forgotten table through db.
func readForgotten(ctx context.Context, db pgdb.Querier) (map[int64]int64, error) {
	type row struct{ Len, End int64 }
	rows, err := pgdb.Collect(ctx, db, `SELECT period_len, period_end FROM forgotten`, pgx.RowToStructByPos[row])
	if err != nil {
		return nil, fmt.Errorf("shuffler: forgotten periods: %w", err)
	}
	m := make(map[int64]int64, len(rows))
	for _, r := range rows {
		m[r.Len] = r.End
	}
	return m, nil
}

func (st *pgStore) forgotten(ctx context.Context) (map[int64]int64, error) {
	return readForgotten(ctx, st.pool)
}

// errForgottenRace rolls back an accept that raced a forget.
var errForgottenRace = errors.New("a period was forgotten during the accept")

// periodLock returns the second key of period p's advisory lock (under
// pgdb.PeriodLockClass): accepts that pool reports of p hold it shared,
// closePeriod exclusive.
func periodLock(p report.Period) string {
	return "period " + strconv.FormatInt(p.Length, 10) + " " + strconv.FormatInt(p.End(), 10)
}

// closePeriodTries and closePeriodPause bound how long closePeriod tries
// for a period's lock: accepts hold it for one commit, milliseconds; one
// held longer (a stalled replica mid-accept) makes closePeriod give up
// with errPeriodBusy instead of waiting, since a waiting exclusive request
// would queue every later accept of the period behind it.
const (
	closePeriodTries = 20
	closePeriodPause = 50 * time.Millisecond
)

// setGrace does nothing: forget is given the grace each time.
func (st *pgStore) setGrace(int64) {}

func (st *pgStore) closePeriod(ctx context.Context, p report.Period) error {
	for range closePeriodTries {
		got := false
		err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
			// Taken once no accept holds p's lock shared (each has
			// committed or rolled back); an accept asking for it later
			// waits for this commit, and then reads p as closed.
			if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, hashtext($2))`, pgdb.PeriodLockClass, periodLock(p)).Scan(&got); err != nil || !got {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO forgotten (period_len, period_end) VALUES ($1, $2)
				ON CONFLICT (period_len) DO UPDATE SET period_end = greatest(forgotten.period_end, excluded.period_end)`, p.Length, p.End())
			return err
		})
		if err != nil {
			return fmt.Errorf("shuffler: closing period %s: %w", p, err)
		}
		if got {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("shuffler: closing period %s: %w", p, ctx.Err())
		case <-time.After(closePeriodPause):
		}
	}
	return fmt.Errorf("shuffler: closing period %s: %w", p, errPeriodBusy)
}

func (st *pgStore) accept(ctx context.Context, group []*acceptReq) ([]acceptRes, bool, error) {
	forgotten, err := st.forgotten(ctx)
	if err != nil {
		return nil, false, err
	}
	changed := false
	for {
		results, err := st.acceptOnce(ctx, group, &forgotten)
		if errors.Is(err, errForgottenRace) {
			// forgotten is the newer table: its periods are refused now.
			changed = true
			continue
		}
		return results, changed, err
	}
}

// acceptOnce is one attempt of accept; it returns errForgottenRace, with
// *forgotten updated, when a period it pooled was forgotten meanwhile.
func (st *pgStore) acceptOnce(ctx context.Context, group []*acceptReq, forgotten *map[int64]int64) ([]acceptRes, error) {
	results := make([]acceptRes, len(group))
	var (
		hs, sealed, ks  [][]byte
		metrics         []string
		suites, ords    []int32
		ends, lens      []int64
		req, idx        []int // per ord: the group's request, the upload's index
		locks           []string
		forgottenBefore = *forgotten
	)
	for i, r := range group {
		for _, it := range r.items {
			if f, ok := forgottenBefore[it.period.Length]; ok && it.period.End() <= f {
				results[i].late = append(results[i].late, it.index)
				continue
			}
			ords = append(ords, int32(len(ords)))
			locks = append(locks, periodLock(it.period))
			req, idx = append(req, i), append(idx, it.index)
			hs, sealed, metrics = append(hs, it.h), append(sealed, it.sealed), append(metrics, it.metric)
			ks = append(ks, it.spent) // NULL without a token
			suites = append(suites, int32(it.suite))
			ends, lens = append(ends, it.period.End()), append(lens, it.period.Length)
		}
	}
	if len(ords) == 0 {
		return results, nil
	}
	// The periods pooled into, in one order for every accept: shared
	// locks taken in the same order never wait on each other in a cycle
	// (closePeriod takes one lock only).
	slices.Sort(locks)
	locks = slices.Compact(locks)
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		// A replica stalled mid-accept holds the locks of its ids; a
		// retry of one of them here waits at most this long (the group
		// is answered 503 and retried), not holding up every later
		// upload to this replica behind it.
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '`+acceptLockTimeout+`'`); err != nil {
			return err
		}
		// The periods' locks, shared, until the commit: a closePeriod of
		// one of them waits for this transaction, or this one for it,
		// and the closed periods are read only then, by the next
		// statement (a snapshot taken after the locks are held).
		if _, err := tx.Exec(ctx, `SELECT count(pg_advisory_xact_lock_shared($1, hashtext(k))) FROM (SELECT unnest($2::text[]) AS k ORDER BY 1) AS l`, pgdb.PeriodLockClass, locks); err != nil {
			return err
		}
		closed, err := readForgotten(ctx, tx)
		if err != nil {
			return err
		}
		for o := range ords {
			if f, ok := closed[lens[o]]; ok && ends[o] <= f {
				// Closed since forgottenBefore was read: retried with
				// the newer table, which refuses its envelopes.
				*forgotten = closed
				return errForgottenRace
			}
		}
		// The ids first, deduplicated by id hash (the first of an id
		// twice in one group wins): a retry of an accepted report is a
		// duplicate whatever its token, never a second spend. An insert
		// racing another replica's of the same id waits for it and,
		// once it commits, finds the id: a duplicate.
		fresh, err := pgdb.Collect(ctx, tx, `WITH input AS (
				SELECT DISTINCT ON (h) * FROM unnest($1::bytea[], $2::bigint[], $3::bigint[], $4::int[]) AS t(h, period_end, period_len, ord)
				ORDER BY h, ord
			), ins AS (
				INSERT INTO seen (h, period_end, period_len) SELECT h, period_end, period_len FROM input
				ON CONFLICT DO NOTHING RETURNING h
			)
			SELECT i.ord FROM input i JOIN ins USING (h) ORDER BY i.ord`, pgx.RowTo[int32],
			hs, ends, lens, ords)
		if err != nil {
			return err
		}
		// Then the tokens of the new ids, by primary key: of two
		// accepts spending one token (two replicas, or two envelopes of
		// one group), the later insert waits for the earlier's
		// transaction and, once it commits, finds the key; then its
		// envelope is refused and its id forgotten again, in this
		// transaction. Its report is pooled only with its token stored.
		// Keys are inserted in key order, so that two accepts' inserts
		// do not wait on each other in a cycle.
		type outcome struct {
			Ord    int32
			Pooled bool
		}
		pick := func(xs [][]byte) [][]byte {
			out := make([][]byte, len(fresh))
			for j, o := range fresh {
				out[j] = xs[o]
			}
			return out
		}
		freshMetrics, freshSuites := make([]string, len(fresh)), make([]int32, len(fresh))
		freshEnds, freshLens := make([]int64, len(fresh)), make([]int64, len(fresh))
		for j, o := range fresh {
			freshMetrics[j], freshSuites[j], freshEnds[j], freshLens[j] = metrics[o], suites[o], ends[o], lens[o]
		}
		outcomes, err := pgdb.Collect(ctx, tx, `WITH input AS (
				SELECT * FROM unnest($1::int[], $2::bytea[], $3::bytea[], $4::text[], $5::int[], $6::bytea[], $7::bigint[], $8::bigint[])
					AS t(ord, h, k, metric, suite, sealed, period_end, period_len)
			), firsts AS (
				SELECT DISTINCT ON (k) * FROM input WHERE k IS NOT NULL ORDER BY k, ord
			), sp AS (
				INSERT INTO spent (k, period_end, period_len) SELECT k, period_end, period_len FROM firsts
				ON CONFLICT DO NOTHING RETURNING k
			), taken AS (
				SELECT * FROM input WHERE k IS NULL
				UNION ALL
				SELECT f.* FROM firsts f JOIN sp USING (k)
			), unseen AS (
				DELETE FROM seen WHERE h IN (SELECT h FROM input EXCEPT SELECT h FROM taken)
			), pooled AS (
				INSERT INTO pool (metric, suite, sealed) SELECT metric, suite, sealed FROM taken ORDER BY ord
			)
			SELECT i.ord, t.ord IS NOT NULL FROM input i LEFT JOIN taken t USING (ord)`, pgx.RowToStructByPos[outcome],
			fresh, pick(hs), pick(ks), freshMetrics, freshSuites, pick(sealed), freshEnds, freshLens)
		if err != nil {
			return err
		}
		accepted := make([]int32, 0, len(outcomes))
		isFresh := make([]bool, len(ords))
		for _, o := range fresh {
			isFresh[o] = true
		}
		isSpent := make([]bool, len(ords))
		spentIDs := map[string]bool{}
		for _, o := range outcomes {
			if o.Pooled {
				accepted = append(accepted, o.Ord)
			} else {
				isSpent[o.Ord] = true
				spentIDs[string(hs[o.Ord])] = true
			}
		}
		// An id twice in the group whose first was refused as spent: the
		// second is refused too (nothing of that id is stored).
		for o := range ords {
			if !isFresh[o] && spentIDs[string(hs[o])] {
				isSpent[o] = true
			}
		}
		// A deletion of one of these ids that the inserts waited for has
		// committed by now; its period is then in forgotten.
		now, err := readForgotten(ctx, tx)
		if err != nil {
			return err
		}
		for _, o := range accepted {
			if f, ok := now[lens[o]]; ok && ends[o] <= f {
				*forgotten = now
				return errForgottenRace
			}
		}
		for o := range ords {
			switch {
			case isSpent[o]:
				results[req[o]].spent = append(results[req[o]].spent, idx[o])
			case isFresh[o]:
				results[req[o]].accepted++
			default:
				results[req[o]].duplicates++
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

func (st *pgStore) forget(ctx context.Context, now, grace int64) (bool, error) {
	// One statement: the periods recorded are exactly those of the ids
	// and spent tokens deleted (two statements would see two snapshots,
	// and an id committed between them would go unrecorded).
	// period_end <= now is implied (grace >= 0) and uses the indexes.
	tag, err := st.pool.Exec(ctx, `WITH gone AS (
			DELETE FROM seen WHERE period_end <= $2 AND period_end + (CASE WHEN $1::bigint > 0 THEN $1::bigint ELSE period_len END) <= $2
			RETURNING period_len, period_end
		), spent_gone AS (
			DELETE FROM spent WHERE period_end <= $2 AND period_end + (CASE WHEN $1::bigint > 0 THEN $1::bigint ELSE period_len END) <= $2
			RETURNING period_len, period_end
		)
		INSERT INTO forgotten (period_len, period_end)
		SELECT period_len, max(period_end) FROM (SELECT * FROM gone UNION ALL SELECT * FROM spent_gone) AS g GROUP BY period_len
		ON CONFLICT (period_len) DO UPDATE SET period_end = greatest(forgotten.period_end, excluded.period_end)`, grace, now)
	return tag.RowsAffected() > 0, err
}

func (st *pgStore) poolSizes(ctx context.Context) ([]poolSize, error) {
	type row struct {
		Metric string
		Suite  int32
		N      int64
	}
	rows, err := pgdb.Collect(ctx, st.pool, `SELECT metric, suite, count(*) FROM pool GROUP BY metric, suite ORDER BY metric, suite`, pgx.RowToStructByPos[row])
	if err != nil {
		return nil, fmt.Errorf("shuffler: pool sizes: %w", err)
	}
	out := make([]poolSize, len(rows))
	for i, r := range rows {
		out[i] = poolSize{metric: r.Metric, suite: uint16(r.Suite), n: r.N}
	}
	return out, nil
}

// lockPool takes the pool's transaction-scoped advisory lock if it is
// free.
func lockPool(ctx context.Context, tx pgx.Tx, key string, suite uint16) (bool, error) {
	var got bool
	err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, hashtext($2))`, pgdb.PoolLockClass, key+"|"+strconv.Itoa(int(suite))).Scan(&got)
	return got, err
}

// errSkip rolls back a transaction that has nothing to do.
var errSkip = errors.New("skip")

// cmpOr returns err, or skip when err is nil.
func cmpOr(err, skip error) error {
	if err != nil {
		return err
	}
	return skip
}

func (st *pgStore) expire(ctx context.Context, key string, suite uint16, nMin int) (int64, error) {
	var n int64
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if got, err := lockPool(ctx, tx, key, suite); err != nil || !got {
			return cmpOr(err, errSkip)
		}
		// Only below n_min now: reports another replica pooled since the
		// caller looked may have brought the pool to n_min.
		tag, err := tx.Exec(ctx, `DELETE FROM pool WHERE metric = $1 AND suite = $2
			AND (SELECT count(*) FROM pool WHERE metric = $1 AND suite = $2) < $3`, key, int32(suite), nMin)
		n = tag.RowsAffected()
		return err
	})
	if errors.Is(err, errSkip) {
		return 0, nil
	}
	return n, err
}

func (st *pgStore) release(ctx context.Context, key string, suite uint16, nMin, keep, maxBatch int, seal func([][]byte) (report.ID, []byte)) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if got, err := lockPool(ctx, tx, key, suite); err != nil || !got {
			return cmpOr(err, errSkip)
		}
		// Counted after the lock is held: only a release or an expiry
		// removes reports, each under this lock, so the pool holds at
		// least c until the commit (accepts only add).
		var c int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM pool WHERE metric = $1 AND suite = $2`, key, int32(suite)).Scan(&c); err != nil {
			return err
		}
		k := batchSize(c, nMin, keep, maxBatch)
		if k == 0 {
			return errSkip
		}
		type row struct {
			ID     int64
			Sealed []byte
		}
		rows, err := pgdb.Collect(ctx, tx, `DELETE FROM pool WHERE id IN (
				SELECT id FROM pool WHERE metric = $1 AND suite = $2 ORDER BY id LIMIT $3
			) RETURNING id, sealed`, pgx.RowToStructByPos[row], key, int32(suite), k)
		if err != nil {
			return err
		}
		if len(rows) != k {
			return fmt.Errorf("shuffler: pool %s counted %d reports, deleted %d of the %d to release", key, c, len(rows), k)
		}
		// In pool order, as the SQLite store reads them: the shuffle
		// alone decides the batch's order (and a seeded one repeats).
		slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(a.ID, b.ID) })
		sealed := make([][]byte, len(rows))
		for i, r := range rows {
			sealed[i] = r.Sealed
		}
		id, body := seal(sealed)
		if _, err := tx.Exec(ctx, `INSERT INTO outgoing (id, metric, n, body) VALUES ($1, $2, $3, $4)`, id[:], key, len(sealed), body); err != nil {
			return err
		}
		n = len(sealed)
		return nil
	})
	if errors.Is(err, errSkip) {
		return 0, nil
	}
	return n, err
}

func (st *pgStore) outgoing(ctx context.Context) ([]outgoingBatch, error) {
	type row struct {
		ID     []byte
		Metric string
		N      int32
	}
	rows, err := pgdb.Collect(ctx, st.pool, `SELECT id, metric, n FROM outgoing ORDER BY seq`, pgx.RowToStructByPos[row])
	if err != nil {
		return nil, fmt.Errorf("shuffler: listing outgoing batches: %w", err)
	}
	out := make([]outgoingBatch, len(rows))
	for i, r := range rows {
		copy(out[i].id[:], r.ID)
		out[i].metric, out[i].n = r.Metric, int(r.N)
	}
	return out, nil
}

func (st *pgStore) claim(ctx context.Context, id report.ID, lease int64) ([]byte, time.Time, error) {
	var body []byte
	err := st.pool.QueryRow(ctx, `UPDATE outgoing SET owner = $2, lease_until = now() + make_interval(secs => $3)
		WHERE id = $1 AND (owner = $2 OR lease_until <= now()) RETURNING body`, id[:], st.owner, float64(lease)).Scan(&body)
	if !errors.Is(err, pgx.ErrNoRows) {
		return body, time.Time{}, err
	}
	var until time.Time
	err = st.pool.QueryRow(ctx, `SELECT lease_until FROM outgoing WHERE id = $1`, id[:]).Scan(&until)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, time.Time{}, nil // acknowledged meanwhile
	}
	return nil, until, err
}

func (st *pgStore) renew(ctx context.Context, id report.ID, lease int64) error {
	_, err := st.pool.Exec(ctx, `UPDATE outgoing SET lease_until = now() + make_interval(secs => $3) WHERE id = $1 AND owner = $2`, id[:], st.owner, float64(lease))
	return err
}

func (st *pgStore) acknowledged(ctx context.Context, id report.ID) error {
	_, err := st.pool.Exec(ctx, `DELETE FROM outgoing WHERE id = $1`, id[:])
	return err
}

func (st *pgStore) outgoingCount(ctx context.Context) (int64, error) {
	var n int64
	err := st.pool.QueryRow(ctx, `SELECT count(*) FROM outgoing`).Scan(&n)
	return n, err
}

func (st *pgStore) oldestOutgoing(ctx context.Context) (time.Duration, bool, error) {
	var age *float64
	if err := st.pool.QueryRow(ctx, `SELECT EXTRACT(EPOCH FROM now() - min(released_at))::float8 FROM outgoing`).Scan(&age); err != nil || age == nil {
		return 0, false, err
	}
	return time.Duration(max(0, *age) * float64(time.Second)), true, nil
}

func (st *pgStore) ready(ctx context.Context) error { return pgdb.Ready(ctx, st.pool) }

func (st *pgStore) close() error {
	st.pool.Close()
	return nil
}
