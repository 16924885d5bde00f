package issuer

// The PostgreSQL store: replicas of the issuer share one database (the
// schema blanket_issuer), so that an instance is granted a pool key once
// whichever replica it reaches.
//
// Why no identity is granted a pool key twice, with any number of
// replicas:
//
//   - A grant is one INSERT … ON CONFLICT (identity, pool_key) DO UPDATE
//     … RETURNING: of two replicas granting the same identity and pool
//     key at once, the second waits on the first's index entry, then
//     locks and returns the first's row, so both answer from one row.
//     (DO NOTHING would return nothing for the conflict, and a SELECT in
//     the same statement would not see the row the wait ended on.) The
//     items of a request are inserted in key order, so two requests of
//     one identity lock their rows in the same order.
//   - Grants are forgotten (forget) only past their deadline, and the
//     latest forgotten end per period length is recorded by the same
//     statement, from the rows it deletes. A grant reads the forgotten
//     periods before its insert and again after it, in its own
//     transaction, and rolls back when one of its items turns out
//     forgotten: an insert that raced the deletion of the same row waited
//     for that deletion to commit, so the second read sees it. No row is
//     thus granted again after it was forgotten, whatever the replicas'
//     clocks or graces.
//   - The answer is sent after the transaction commits (Issuer.Issue),
//     so a retry after a crash finds the grant.

import (
	"context"
	"errors"
	"fmt"

	"github.com/blanket-dp/blanket/internal/pgdb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgSchema is the schema of the issuer's tables.
const pgSchema = "blanket_issuer"

// pgMigrations bring the schema from version i to i+1.
var pgMigrations = []string{
	`CREATE TABLE grants (
		identity bytea NOT NULL,
		pool_key text NOT NULL,
		blinded bytea NOT NULL,
		evaluated bytea NOT NULL,
		period_len bigint NOT NULL,
		period_end bigint NOT NULL,
		deadline bigint NOT NULL,
		PRIMARY KEY (identity, pool_key)
	);
	CREATE INDEX grants_deadline ON grants (deadline);
	CREATE TABLE forgotten (
		period_len bigint PRIMARY KEY,
		period_end bigint NOT NULL
	)`,
}

// pgStore keeps the grants in PostgreSQL, shared by replicas.
type pgStore struct {
	pool *pgxpool.Pool
}

// openPGStore connects to url and migrates the issuer's schema.
func openPGStore(ctx context.Context, url string) (*pgStore, error) {
	pool, err := pgdb.Open(ctx, url, pgSchema, pgMigrations, 0)
	if err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	return &pgStore{pool: pool}, nil
}

// readForgottenPG reads the forgotten table through db.
func readForgottenPG(ctx context.Context, db pgdb.Querier) (map[int64]int64, error) {
	type row struct{ Len, End int64 }
	rows, err := pgdb.Collect(ctx, db, `SELECT period_len, period_end FROM forgotten`, pgx.RowToStructByPos[row])
	if err != nil {
		return nil, err
	}
	m := make(map[int64]int64, len(rows))
	for _, r := range rows {
		m[r.Len] = r.End
	}
	return m, nil
}

// errForgetRace rolls back a grant that raced a forget of its period.
var errForgetRace = errors.New("a period was forgotten during the grant")

// grantTries bounds the attempts of a grant that races forgets.
const grantTries = 3

func (st *pgStore) grant(ctx context.Context, gs []grant) ([]stored, error) {
	for range grantTries {
		out, err := st.grantOnce(ctx, gs)
		if !errors.Is(err, errForgetRace) {
			return out, err
		}
	}
	return nil, fmt.Errorf("issuer: grant: %w, %d times", errForgetRace, grantTries)
}

// grantOnce is one attempt of grant.
func (st *pgStore) grantOnce(ctx context.Context, gs []grant) ([]stored, error) {
	out := make([]stored, len(gs))
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		forgotten, err := readForgottenPG(ctx, tx)
		if err != nil {
			return err
		}
		var (
			ids, blinded, evaluated [][]byte
			pools                   []string
			lens, ends, deadlines   []int64
			index                   = map[string]int{}
		)
		for i, g := range gs {
			if isClosed(forgotten, g.period) {
				out[i].closed = true
				continue
			}
			ids = append(ids, g.identity[:])
			pools = append(pools, g.pool)
			blinded = append(blinded, g.blinded[:])
			evaluated = append(evaluated, g.evaluated)
			lens = append(lens, g.period.Length)
			ends = append(ends, g.period.End())
			deadlines = append(deadlines, g.deadline)
			index[string(g.identity[:])+"\x00"+g.pool] = i
		}
		if len(ids) == 0 {
			return nil
		}
		rows, err := tx.Query(ctx, `INSERT INTO grants (identity, pool_key, blinded, evaluated, period_len, period_end, deadline)
			SELECT * FROM unnest($1::bytea[], $2::text[], $3::bytea[], $4::bytea[], $5::bigint[], $6::bigint[], $7::bigint[])
			ORDER BY 1, 2
			ON CONFLICT (identity, pool_key) DO UPDATE SET deadline = grants.deadline
			RETURNING identity, pool_key, blinded, evaluated`,
			ids, pools, blinded, evaluated, lens, ends, deadlines)
		if err != nil {
			return err
		}
		n := 0
		for rows.Next() {
			var id, b, e []byte
			var pool string
			if err := rows.Scan(&id, &pool, &b, &e); err != nil {
				rows.Close()
				return err
			}
			i, ok := index[string(id)+"\x00"+pool]
			if !ok {
				rows.Close()
				return fmt.Errorf("the insert returned a row of pool key %q it was not given", pool)
			}
			copy(out[i].blinded[:], b)
			out[i].evaluated = e
			n++
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if n != len(ids) {
			return fmt.Errorf("the insert returned %d rows for %d grants", n, len(ids))
		}
		if forgotten, err = readForgottenPG(ctx, tx); err != nil {
			return err
		}
		for i, g := range gs {
			if !out[i].closed && isClosed(forgotten, g.period) {
				return errForgetRace
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, errForgetRace) {
			return nil, err
		}
		return nil, fmt.Errorf("issuer: grant: %w", err)
	}
	return out, nil
}

// forget forgets up to now or the database server's clock, whichever is
// earlier: a replica whose clock jumped ahead would otherwise forget, and
// so close for every replica, periods still being granted (reports then
// dropped for want of a token). A replica whose clock is behind forgets
// late, which only keeps grants longer. statement_timestamp, not
// clock_timestamp: the latter is volatile, and a volatile bound keeps
// PostgreSQL from using the deadline index (a scan of every grant).
func (st *pgStore) forget(ctx context.Context, now int64) (int64, error) {
	var n int64
	err := st.pool.QueryRow(ctx, `WITH gone AS (
			DELETE FROM grants WHERE deadline <= least($1, floor(extract(epoch FROM statement_timestamp()))::bigint)
			RETURNING period_len, period_end
		), recorded AS (
			INSERT INTO forgotten (period_len, period_end)
			SELECT period_len, max(period_end) FROM gone GROUP BY period_len
			ON CONFLICT (period_len) DO UPDATE SET period_end = greatest(forgotten.period_end, excluded.period_end)
		)
		SELECT count(*) FROM gone`, now).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("issuer: forget: %w", err)
	}
	return n, nil
}

func (st *pgStore) ready(ctx context.Context) error { return pgdb.Ready(ctx, st.pool) }

func (st *pgStore) close() error {
	st.pool.Close()
	return nil
}
