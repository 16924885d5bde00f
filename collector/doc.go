// Package collector is the server side of Blanket: the shuffler role, which
// takes sealed reports from apps and forwards them to the collector in
// shuffled batches of at least n_min, and the collector (analyzer) role,
// which opens the reports, aggregates them with the metric's plugin and
// serves estimates with their central privacy guarantee. The roles are
// separable (two processes, two data directories) or run in one process
// (blanket serve); each keeps its state in an embedded SQLite database.
//
//	ps := collector.NewPlugins()
//	defer ps.Close()
//	c, err := collector.OpenCollector(ctx, collector.CollectorOptions{Plan: p, Dir: dir, Open: ps.Open, Token: tok})
//	s, err := collector.OpenShuffler(ctx, collector.ShufflerOptions{Plan: p, Dir: dir, Collector: url, Token: tok})
//	mux := http.NewServeMux()
//	c.Register(mux)
//	s.Register(mux)
//	srv := collector.NewHTTPServer(mux, logger)
//	go s.Run(ctx) // release and forward batches
//
// # Pools and travel
//
// The shuffler pools what the plan's travel mode says the accountant
// assumes (plan.Plan.Pools). With separate travel each metric is a pool and
// a batch holds one metric's reports. With joint or parallel travel the
// plan has one pool, "@joint" or "@parallel": every envelope is a sealed
// message (report.EncodeMessage under report.PoolBinding) carrying every
// metric (joint) or one metric chosen at random (parallel), so a batch
// mixes the metrics exactly as the joint and parallel compositions model.
// The collector splits each valid message into its metrics' statistics and
// records, on each metric's row of the batch, the guarantee of the plan's
// mechanism at the batch's number of valid messages (for parallel travel,
// weighted by the batch's actual mix of metrics).
//
// Apps tag every envelope with the epoch of the plan they sealed it under
// (report.PoolKey: "ui/screen#<epoch>"), and the epoch is bound into the
// HPKE info. The shuffler pools each (pool, epoch) apart, so a released
// batch holds at least n_min reports of one plan, and the collector opens
// a tagged batch under that epoch's plan only, loading an earlier epoch
// from its database when needed; a batch of an epoch it cannot open is
// acknowledged once with every report malformed. Untagged batches are
// opened under the epochs whose plans have their pool, current first (the
// current and the MaxOlderEpochs before it). Apps also tag each envelope
// with its reporting period (report.PeriodPoolKey:
// "ui/screen#<epoch>#<start>+<length>", Unix seconds), bound into the HPKE
// info too: the shuffler's pools are then per (pool, epoch, period), a
// batch is one period's, a report replayed into another period's batch
// does not open, and the collector keeps statistics and estimates per
// metric, epoch and period (a batch of a period length its epoch's plan
// does not have is refused). A period's pools take reports until
// ShufflerOptions.PeriodGrace (default: one period) after it ends; then a
// pool still below n_min is deleted, never released, and counted
// (ShufflerStats.Expired), and later envelopes of it are rejected
// (ShufflerStats.Late), as are envelopes of a period starting more than one
// period ahead of the shuffler's clock. The shuffler holds at most
// MaxEpochsPerPool epochs of a pool at once, takes the pools of every plan
// it relays (stored, so a restart keeps them), and under blanket serve the
// pools of every plan the collector published.
//
// The shuffler rejects envelopes without a period (untagged or tagged with
// an epoch only: an SDK older than reporting periods, whose reports no
// per-period guarantee covers) with a reason that says so. Pools of such
// reports already in its database from before the upgrade are still
// released, and the collector still ingests their batches (into no
// period; the horizon guarantee is then unknown), so that nothing a
// shuffler acknowledged is lost.
//
// # HTTP API
//
// Shuffler:
//
//	POST /v1/reports   body: report.EncodeEnvelopes bytes (application/octet-stream)
//	  202 {"accepted": n, "duplicates": d, "rejected": r, "errors": [{"index": i, "error": "..."}]}
//	  400 undecodable body, 413 body or envelope count over the limit,
//	  415 wrong content type, 429 connection over its rate (Retry-After),
//	  503 storage failed (retry). Error bodies are {"error": "..."}.
//
// An upload is stored durably before the 202; duplicates (an id already
// accepted: a retry after a lost acknowledgement) are stored already and
// rejected envelopes (unknown metric, unsupported suite, too short) will
// never be, so the client can drop all three from its outbox.
//
// Collector:
//
//	GET  /v1/plan             the calibrated plan as JSON, collector_key = base64 HPKE public key
//	POST /v1/batches          body: report.EncodeBatch bytes; Authorization: Bearer <token>
//	  200 IngestResult: {"batch", "metric", "epoch", "period": {"start", "end"}, "duplicate", "reports", "n", "malformed", "parts", "eps", "delta"}
//	  400 undecodable, 401 token, 413 too large, 422 refused (not a pool of
//	  the plan, suite, fewer than n_min reports), 500 not stored (retry)
//	GET  /v1/metrics          MetricList: {"epoch", "metrics": [{"name", "plugin", "in_plan", "epochs", "n", "malformed", "batches"}], "ingest": {...}}
//	GET  /v1/metrics/{name}[?from=RFC3339&to=RFC3339][&horizon=0]
//	                          MetricDetail: "periods", per period (start, end; null for
//	                          reports sealed before periods existed) and epoch the estimates
//	                          (value, variance, CI, post-processed), n, malformed, batches,
//	                          the weakest batch's guarantee and every batch's (eps, delta);
//	                          "horizon": the per-user guarantee over the plan's horizon at
//	                          the stored batch sizes, weakest window (horizon.go), next to
//	                          the target (skipped with horizon=0); 400 for a bad from or to
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
//	pools(name PK)                        pools learned from relayed plans
//	period_lengths(seconds PK)            their period lengths
//	outgoing(id BLOB PK, metric, n, body) released batches until acknowledged
//
// collector.db:
//
//	epochs(epoch PK, source, key, plan)   every published plan
//	batches(id, metric, epoch, n, malformed, messages, eps, delta, period_start, period_len; PK (id, metric, epoch))
//	statistics(metric, epoch, period_start, period_len, stat, batches; PK (metric, epoch, period_start))
//
// A database written before periods existed migrates at open: its rows
// become those of the zero period (period_start = period_len = 0).
//
// Every acknowledgement follows a committed transaction (WAL,
// synchronous=FULL). Accepting an upload inserts its ids into seen and its
// reports into pool in one transaction (concurrent uploads share it: group
// commit). Releasing moves reports from pool to outgoing in one
// transaction. Ingesting inserts the batch's rows and merges its
// statistics in one transaction, and a batch id already present is acknowledged without
// counting, so a batch is counted once however often it is delivered and
// wherever the collector dies.
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
//
// Epochs: statistics merge only within an epoch and period; the epoch is
// the first 16 hex digits of the published plan's digest (which covers
// every eps0 and the key).
package collector
