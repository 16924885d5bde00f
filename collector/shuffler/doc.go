// Package shuffler is the shuffler role of Blanket: it takes sealed
// reports from apps (POST /v1/reports), keeps nothing about their senders,
// pools them per plan pool, epoch and reporting period, and forwards
// batches of at least n_min reports of one pool, in a uniformly random
// order, to the collector (package collector), retrying until they are
// acknowledged. It never opens a report: only the collector holds the key.
//
//	s, err := shuffler.Open(ctx, shuffler.Options{Plan: p, Dir: dir, Collector: url, Token: tok})
//	mux := http.NewServeMux()
//	s.Register(mux)
//	srv := httpserver.New(mux, logger) // no peer address in any log
//	go s.Run(ctx) // release and forward batches
//
// # Pools and periods
//
// The shuffler pools what the plan's travel mode says the accountant
// assumes (plan.Plan.Pools): with separate travel each metric is a pool,
// with joint or parallel travel the plan has one pool whose sealed
// messages carry the metrics. Apps tag every envelope with the epoch of
// the plan they sealed it under and its reporting period
// (report.PeriodPoolKey); the shuffler pools each (pool, epoch, period)
// apart, so that a released batch holds at least n_min reports of one plan
// and one period. A period's pools take reports until Options.PeriodGrace
// (default: the plan's grace, 8 periods unless it sets one) after it ends,
// its deadline. Until then a pool is
// released only down to its last n_min reports (once it has settled,
// Options.Settle), so that a report arriving late always has company; at
// the deadline, or when the operator closes the period (ClosePeriods, POST
// /v1/pools/close), the rest goes out, and a pool that received fewer than
// n_min in all is deleted, never released, and counted (Stats.Expired).
// Every report acknowledged for a pool that reached n_min is thus released
// in a batch of at least n_min (release.go has the proof, for both stores
// and any number of replicas). Later envelopes of a closed period are
// rejected (Stats.Late), as are envelopes of a period starting more than
// one period ahead of the shuffler's clock. The shuffler holds at most
// MaxEpochsPerPool epochs of a pool at once, takes the pools of every plan
// it relays (stored, so a restart keeps them), and under blanket serve the
// pools of every plan the collector published.
//
// The shuffler rejects an envelope whose pool key lacks the epoch or the
// period tag (report.PeriodPoolKey), whose report no per-period guarantee
// could cover, with a reason that says so.
//
// # Admission
//
// With Options.Admission (the verifier of the issuer's seed, package
// admission/issuer), the shuffler takes an envelope only with an
// admission token of its pool key that no other report spent: one per
// authenticated app instance, pool and period, so that fake reports need
// credentials. After the checks above, an envelope without a token is
// refused (code token_missing), one whose token does not decode or is
// not one of its pool key (forged, of another pool or period, or of
// another seed) too (token_invalid); the accept transaction then takes
// the token's key (issuer.SpentKey) with the report, and refuses an
// envelope whose token another report spent (token_spent). A report id
// already accepted is a duplicate first, so a retry is never refused as
// spent. Spent keys are kept until the period's deadline, like ids.
// Without Options.Admission every envelope is taken, its token ignored.
//
// # HTTP API
//
//	POST /v1/reports   body: report.EncodeEnvelopes bytes (application/octet-stream)
//	  202 {"accepted": n, "duplicates": d, "rejected": r, "errors": [{"index": i, "code": "...", "error": "..."}]}
//	  400 undecodable body, 413 body or envelope count over the limit,
//	  415 wrong content type, 429 connection over its rate (Retry-After),
//	  503 storage failed (retry). Error bodies are {"error": "..."}.
//
// On the operator's listener (RegisterAdmin): GET /v1/pools, each pool's
// fill against n_min (PoolsStatus), and POST /v1/pools/close?through=T
// (RFC 3339, default now), which closes the periods of pooled reports
// ending by T before their deadline (ClosedPeriods).
//
// An upload is stored durably before the 202; duplicates (an id already
// accepted: a retry after a lost acknowledgement) are stored already and
// rejected envelopes (unknown metric, unsupported suite, too short, no
// valid unspent token) will never be, so the client can drop all three
// from its outbox. Every rejected envelope is named in errors, with a
// code (EnvelopeError.Code) a client can act on.
//
// # Privacy of the shuffler
//
// The shuffler keeps no client address, header or arrival time: its pool
// rows are (row number, metric, suite, sealed bytes), nothing it logs
// names a peer (net/http's error log is redacted, panics are recovered
// before net/http would log the address), and the rate limiter's state
// lives in the connection's context and dies with it. A released batch
// holds only the sealed bytes, in an order drawn uniformly from crypto
// randomness (Shuffle), under a random batch id.
//
// # Storage
//
// shuffler.db:
//
//	meta(key, value)                      dedup salt and generation
//	pool(id INTEGER PK, metric, suite, sealed)
//	seen(h BLOB PK, gen, period_end, period_len)  HMAC-SHA256(salt, report id)[:16]
//	spent(k BLOB PK, period_end, period_len)      spent admission tokens (issuer.SpentKey)
//	pools(name PK)                        pools learned from relayed plans
//	period_lengths(seconds PK)            their period lengths
//	outgoing(id BLOB PK, metric, n, body) released batches until acknowledged
//
// Every acknowledgement follows a committed transaction (WAL,
// synchronous=FULL; on PostgreSQL, keep synchronous_commit on, its
// default). Accepting an upload inserts its ids into seen, the keys of
// their admission tokens into spent, and its reports into pool in one
// transaction (concurrent uploads share it: group commit); spent keys
// go with their period's ids, at its deadline. Releasing moves reports from pool to outgoing in one
// transaction. The table forgotten holds, per period length, the latest
// end of a closed period (its ids forgotten, or its pools released whole);
// such periods are refused.
//
// # Replicas
//
// With Options.Store a PostgreSQL URL, the shuffler keeps its state in that
// database (schema blanket_shuffler, created and migrated at start), and
// any number of shuffler processes on any machines may share it: apps
// upload to any of them. The database must be the shuffler's own, apart
// from the collector's (the shuffler must not read what the collector
// stores). Across replicas:
//
//   - an id is remembered once: a retried upload is a duplicate whichever
//     replica took the first (the salt of the id hashes is in the
//     database);
//   - a pool is released by one replica at a time (a transaction-scoped
//     advisory lock per pool), never below n_min, its reports deleted in the
//     transaction that writes the batch: a replica killed mid-release
//     leaves them pooled; a period is closed (its pools released whole)
//     only once every upload of it in flight on any replica has committed,
//     and then every replica refuses it, so that no acknowledged report is
//     left behind (release.go);
//   - a released batch is forwarded by the replica holding its lease; if
//     that replica dies another takes over once the lease ends (within a
//     minute);
//   - ids are forgotten at their period's deadline (its end and the
//     grace) rather than after DedupWindow, and a period some of whose ids
//     are forgotten is refused by every replica (store_postgres.go has the
//     argument).
//
// PostgreSQL keeps deleted rows in its pages until VACUUM reuses them,
// where SQLite overwrites them (secure_delete): released reports linger in
// the shuffler's database files for a while; they are sealed to the
// collector's key.
//
// Dedup retention: ids are kept in generations of DedupWindow/4 accepted
// reports; when a generation fills, the ids of the oldest beyond the last
// four full ones are deleted, except those whose period's pools are still
// open (its end plus the grace is in the future): an app's retry within
// its period's grace is always a duplicate, so no period ever pools two
// copies of one report, and after the grace the period refuses it anyway.
// At least the DedupWindow most recent ids (default 2^22) are remembered,
// plus every id of an open period (about 50 bytes each in SQLite: a fleet
// of 10^7 apps reporting 3 metrics daily keeps about 3 GB for a day's
// period and its grace). The shuffler's database runs with secure_delete, so
// released reports do not linger in its free pages (the WAL keeps recent
// pages until they are overwritten).
package shuffler
