// Package collector is the analyzer role of Blanket: it publishes the
// calibrated plan with its report key schedule, opens the reports of the shuffled
// batches the shuffler (package collector/shuffler) forwards, aggregates
// them with each metric's plugin, and serves estimates with their central
// privacy guarantee, per batch and over the plan's horizon. The shuffler
// and the collector are separate trust domains: separate processes with
// separate databases (blanket shuffler, blanket collector), or one process
// for a single machine (blanket serve). The collector keeps its state in an
// embedded SQLite database.
//
//	ps := collector.NewPlugins()
//	defer ps.Close()
//	c, err := collector.OpenCollector(ctx, collector.CollectorOptions{Plan: p, Dir: dir, Open: ps.Open, Token: tok})
//	mux := http.NewServeMux()
//	c.Register(mux)
//	go c.Run(ctx) // rotates and erases the report keys
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
// and its reporting period (report.PeriodPoolKey:
// "ui/screen#<epoch>#<start>+<length>", Unix seconds), both bound into the
// HPKE info. The shuffler pools each (pool, epoch, period) apart, so a
// released batch holds at least n_min reports of one plan and one period,
// and a report replayed into another period's batch does not open. The
// collector opens a batch under its epoch's plan only, loading an earlier
// epoch from its database when needed, with the report key of its period
// (keys.go), and keeps statistics and estimates per metric, epoch and
// period. A batch whose pool key lacks the epoch or the period tag is
// refused (422); one of an epoch it never published, of a period length
// its epoch's plan does not have, or of a period whose report key was
// deleted, is acknowledged once with every report malformed; one of an epoch
// published but whose plugins do not open here is refused with 500,
// nothing stored, so that the shuffler retries it (another replica, or
// this one once the plugin is back, counts it).
//
// A batch of which fewer than n_min reports open and validate (junk can
// pass the shuffler's length check) is stored and counted but held out of
// every estimate, and published with later batches of its pool, epoch and
// period once they reach n_min together (ingest.go says why that is
// sound, and what guarantee is stated).
//
// # HTTP API
//
//	GET  /v1/plan             the calibrated plan as JSON, collector_keys = the report key schedule
//	                          (plan.CollectorKey: id, base64 HPKE public key, first period),
//	                          signed: Blanket-Plan-Signature (PlanSigningKey, PlanKeyFile)
//	POST /v1/batches          body: report.EncodeBatch bytes; Authorization: Bearer <token>
//	  200 IngestResult: {"batch", "metric", "epoch", "period": {"start", "end"}, "duplicate", "reports", "n", "malformed", "held", "parts", "eps", "delta"}
//	  400 undecodable, 401 token, 413 too large, 422 refused (no epoch or
//	  period tag, not a pool of the plan, suite, fewer than n_min
//	  reports), 500 not stored (retry)
//	GET  /v1/metrics          MetricList: {"epoch", "metrics": [{"name", "plugin", "in_plan", "epochs", "n", "malformed", "batches", "held"}], "ingest": {...}}
//	GET  /v1/metrics/{name}[?from=RFC3339&to=RFC3339][&horizon=0]
//	                          MetricDetail: "periods", per period (start, end) and epoch the estimates
//	                          (value, variance, CI, post-processed), n, malformed, batches,
//	                          held, the weakest batch's guarantee and every batch's (eps,
//	                          delta, held);
//	                          "horizon": the per-user guarantee over the plan's horizon at
//	                          the stored batch sizes, weakest window (horizon.go), next to
//	                          the target (skipped with horizon=0); 400 for a bad from or to
//
// # Storage
//
// collector.db:
//
//	epochs(epoch PK, source, plan)        every published plan, without its key schedule
//	report_keys(id PK, public, valid_from, created, deleted)  the report key schedule;
//	                          the private halves are files report-<id>.key (ReportKeyFile)
//	batches(id, metric, epoch, n, malformed, messages, eps, delta, period_start, period_len, held; PK (id, metric, epoch))
//	statistics(metric, epoch, period_start, period_len, stat, batches; PK (metric, epoch, period_start))
//	held_statistics(as statistics)        the held batches' merged statistics
//	held_pools(pool, epoch, period_start, messages, batches)  their valid reports per pool key
//
// A file of a pre-release schema (a table without its newest column) is
// refused at open, naming the column: nothing migrates it.
//
// Every acknowledgement follows a committed transaction (WAL,
// synchronous=FULL). Ingesting inserts the batch's rows and merges its
// statistics in one transaction, and a batch id already present is
// acknowledged without counting, so a batch is counted once however often
// it is delivered and wherever the collector dies.
//
// # Replicas
//
// With CollectorOptions.Store a PostgreSQL URL, the collector keeps its
// state in that database (schema blanket_collector, created and migrated at
// start), its report keys' private halves included unless KeyDir names a
// directory every replica shares, and any number of collector processes
// may share it, behind one address for the shufflers. The first replica to
// start generates the first key and publishes (calibrates) the plan; the
// others, serialized by an advisory lock, reuse both, and every change of
// the key schedule is made under the same lock, so every replica serves
// the same plan and keys. A batch is counted once whichever replica ingests it,
// however often (its id is the primary key of the table ingested, written
// in the ingest's transaction), and the statistics are merged under row
// locks (store_postgres.go has the argument). Opening reports (HPKE) is
// the collector's main cost: throughput grows with the replicas' cores.
//
// Epochs: statistics merge only within an epoch and period; the epoch is
// the first 16 hex digits of the published plan's digest without its key
// schedule (plan.Plan.EpochDigest: it covers every eps0, not the keys, so
// a key rotation is no new epoch; keys.go says why that is sound).
package collector
