package client

import (
	"context"
	"database/sql"

	"github.com/blanket-dp/blanket/sdk/report"
)

// The admission tokens' part of the SQLite outbox: the requests stored
// before they are sent (token_requests, token_request_pools) and what is
// held per pool key (pool_tokens). Ack marks the token of an envelope's
// pool key spent in the transaction that removes the envelope.

// AddTokenRequest implements Outbox.
func (o *SQLiteOutbox) AddTokenRequest(ctx context.Context, r TokenRequest) (int64, error) {
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, o.errf("begin: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, "INSERT INTO token_requests (pending, deadline) VALUES (?, ?)", r.Pending, r.Deadline)
	if err != nil {
		return 0, o.errf("token request: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, o.errf("token request: %w", err)
	}
	for i, pool := range r.Pools {
		// The primary key refuses a pool key in a stored request.
		if _, err := tx.ExecContext(ctx, "INSERT INTO token_request_pools (pool_key, request, seq) VALUES (?, ?, ?)", pool, id, i); err != nil {
			return 0, o.errf("token request: pool key %q: %w", pool, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, o.errf("commit: %w", err)
	}
	return id, nil
}

// TokenRequests implements Outbox.
func (o *SQLiteOutbox) TokenRequests(ctx context.Context) ([]TokenRequest, error) {
	rows, err := o.db.QueryContext(ctx, `SELECT r.id, r.pending, r.deadline, p.pool_key FROM token_requests r
		JOIN token_request_pools p ON p.request = r.id ORDER BY r.id, p.seq`)
	if err != nil {
		return nil, o.errf("token requests: %w", err)
	}
	defer rows.Close()
	var out []TokenRequest
	for rows.Next() {
		var r TokenRequest
		var pool string
		if err := rows.Scan(&r.ID, &r.Pending, &r.Deadline, &pool); err != nil {
			return nil, o.errf("token requests: %w", err)
		}
		if n := len(out); n > 0 && out[n-1].ID == r.ID {
			out[n-1].Pools = append(out[n-1].Pools, pool)
			continue
		}
		r.Pools = []string{pool}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, o.errf("token requests: %w", err)
	}
	return out, nil
}

// SettleTokenRequest implements Outbox.
func (o *SQLiteOutbox) SettleTokenRequest(ctx context.Context, id int64, answer []PoolToken) error {
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return o.errf("begin: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, "DELETE FROM token_requests WHERE id = ?", id)
	if err != nil {
		return o.errf("settle token request: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return o.errf("settle token request: %w", err)
	} else if n == 0 {
		return nil // settled by another process
	}
	// The request's pool keys go with it (ON DELETE CASCADE).
	for _, t := range answer {
		if _, err := tx.ExecContext(ctx, `INSERT INTO pool_tokens (pool_key, token, refused, reason, deadline, retry) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (pool_key) DO UPDATE SET token = excluded.token, refused = excluded.refused, reason = excluded.reason,
			deadline = excluded.deadline, retry = excluded.retry`,
			t.PoolKey, t.Token, t.Refused, t.Reason, t.Deadline, t.Retry); err != nil {
			return o.errf("settle token request: pool key %q: %w", t.PoolKey, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return o.errf("commit: %w", err)
	}
	return nil
}

// PoolTokens implements Outbox.
func (o *SQLiteOutbox) PoolTokens(ctx context.Context) ([]PoolToken, error) {
	rows, err := o.db.QueryContext(ctx, "SELECT pool_key, token, refused, reason, deadline, retry FROM pool_tokens ORDER BY pool_key")
	if err != nil {
		return nil, o.errf("pool tokens: %w", err)
	}
	defer rows.Close()
	var out []PoolToken
	for rows.Next() {
		var t PoolToken
		if err := rows.Scan(&t.PoolKey, &t.Token, &t.Refused, &t.Reason, &t.Deadline, &t.Retry); err != nil {
			return nil, o.errf("pool tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, o.errf("pool tokens: %w", err)
	}
	return out, nil
}

// DiscardToken implements Outbox.
func (o *SQLiteOutbox) DiscardToken(ctx context.Context, poolKey string) error {
	if _, err := o.db.ExecContext(ctx, "DELETE FROM pool_tokens WHERE pool_key = ?", poolKey); err != nil {
		return o.errf("discard token: %w", err)
	}
	return nil
}

// ForgetTokens implements Outbox.
func (o *SQLiteOutbox) ForgetTokens(ctx context.Context, now int64) (int, error) {
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, o.errf("begin: %w", err)
	}
	defer tx.Rollback()
	var n int64
	for _, q := range []string{"DELETE FROM token_requests WHERE deadline <= ?", "DELETE FROM pool_tokens WHERE deadline <= ?"} {
		res, err := tx.ExecContext(ctx, q, now)
		if err != nil {
			return 0, o.errf("forget tokens: %w", err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return 0, o.errf("forget tokens: %w", err)
		}
		n += k
	}
	if n == 0 {
		return 0, nil
	}
	if err := tx.Commit(); err != nil {
		return 0, o.errf("commit: %w", err)
	}
	return int(n), nil
}

// PendingWithToken implements Outbox.
func (o *SQLiteOutbox) PendingWithToken(ctx context.Context, limit int) ([]report.Envelope, error) {
	return o.pending(ctx, `SELECT o.id, o.metric, o.suite, o.sealed, t.token FROM outbox o
		JOIN pool_tokens t ON t.pool_key = o.metric AND t.token IS NOT NULL
		WHERE o.local = 0 ORDER BY o.seq LIMIT ?`, limit)
}

// Tokenless implements Outbox.
func (o *SQLiteOutbox) Tokenless(ctx context.Context) ([]TokenlessEnvelope, error) {
	rows, err := o.db.QueryContext(ctx, `SELECT o.id, o.metric, o.sent FROM outbox o
		LEFT JOIN pool_tokens t ON t.pool_key = o.metric
		WHERE o.local = 0 AND t.token IS NULL ORDER BY o.seq`)
	if err != nil {
		return nil, o.errf("tokenless: %w", err)
	}
	defer rows.Close()
	var out []TokenlessEnvelope
	for rows.Next() {
		var (
			id   []byte
			e    TokenlessEnvelope
			sent int
		)
		if err := rows.Scan(&id, &e.PoolKey, &sent); err != nil {
			return nil, o.errf("tokenless: %w", err)
		}
		if len(id) != len(e.ID) {
			return nil, o.errf("tokenless: stored report id has %d bytes, want %d", len(id), len(e.ID))
		}
		copy(e.ID[:], id)
		e.Sent = sent != 0
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, o.errf("tokenless: %w", err)
	}
	return out, nil
}

// spendTokens marks spent, in tx, the tokens of the pool keys of the
// stored envelopes among ids (an SQL list and its arguments,
// forIDChunks), before Ack removes them.
func spendTokens(ctx context.Context, tx *sql.Tx, in string, args []any) error {
	_, err := tx.ExecContext(ctx, "UPDATE pool_tokens SET token = NULL WHERE token IS NOT NULL AND pool_key IN (SELECT metric FROM outbox WHERE id IN "+in+")", args...)
	return err
}
