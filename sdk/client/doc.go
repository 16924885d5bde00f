// Package client is the app side of Blanket: it records telemetry values
// with differential privacy in the shuffle model. The values of a metric
// are gathered on the device over a reporting period of the collector's
// plan (a day by default); once the period has closed, its value is
// randomized by the metric's local randomizer at the budget eps0 fixed by
// the plan, sealed to the collector's public key (HPKE), committed to a
// durable outbox, and uploaded in the background to the shuffler, which
// strips who sent it and forwards it only in large, randomly ordered
// batches of reports of the same period.
//
// The API follows the OpenTelemetry metric API — a Provider hands out
// Meters, a Meter hands out instruments, instruments Record with a context —
// and the consent modes of golang.org/x/telemetry: off, local, on.
//
//	logger := slog.Default() // or the app's own
//	p, err := client.NewProvider(ctx, client.Config{
//		Mode:     client.ModeFromEnvLogged(logger), // $BLANKET_TELEMETRY: off, local (default) or on
//		Endpoint: "https://telemetry.example.com",
//		PlanKey:  "tq7knJGuexpg1nMpln0It1RovF4QhZO5/+9DWnS3Dqo=", // `blanket collector plan-key`
//		DataDir:  filepath.Join(cacheDir, "myapp", "telemetry"),
//		MaxEps0:  8,      // refuse any plan asking for more local budget
//		Logger:   logger, // says what was dropped, and why
//	})
//	if err != nil {
//		log.Printf("telemetry disabled: %v", err) // p is nil; a nil Provider records nothing
//	}
//	defer p.Shutdown(ctx)
//	m := p.Meter("myapp")                            // metrics "myapp/..."
//	m.Categorical("ui/screen").Record(ctx, "search") // plan metric "myapp/ui/screen"
//	m.Sum("sync/bytes").Record(ctx, 1234)
//	m.Mean("sync/latency").Record(ctx, 0.25)         // a metric of plan aggregate "mean"
//
// # The plan
//
// In ModeOn, NewProvider fetches the calibrated plan from the collector
// (GET /v1/plan) and verifies it before reporting anything: it must be
// signed by the collector's plan-signing key the app pins
// (Config.PlanKey), or by a key that one endorsed in a key rollover
// statement served with it, so that whoever relays the plan cannot swap
// the collector's key (an unsigned or wrongly signed plan is refused with
// an error wrapping ErrPlanRefused and plan.ErrUnsigned or
// plan.ErrBadSignature; a plan cached in DataDir is checked again, and a
// cache that does not decode or authenticate is ignored with a warning,
// as if none were cached); and it
// must be calibrated, carry the collector's key, ask no metric for an eps0 above
// the app's ceiling Config.MaxEps0, and name only randomizers the app can
// open (DefaultRandomizers in process, unless Config.Randomizers links
// others) at the plan's report format version. Otherwise
// NewProvider fails with an error wrapping ErrPlanRefused. The verified plan
// is cached in Config.DataDir, so that an app starting offline reports by
// the last plan it accepted. NewProvider waits for the collector at most
// Config.PlanTimeout (1 s by default), whatever its context allows (at
// most half of what a deadline leaves): a collector that does not answer
// in time, refuses the connection or answers an error costs the app that
// long at most, and NewProvider reports by the cached plan (it fails with
// ErrPlanUnavailable only when none is cached).
//
// When the collector publishes a new plan (a new epoch: another target, a
// recalibration, a new metric), a Provider in ModeOn picks it up within
// Config.PlanRefresh (Provider.RefreshPlan; a conditional GET answered 304
// while nothing changed), verifies it the same way and reports by it from
// then on. A refused plan leaves the Provider on the plan it has. Every
// report carries the epoch of the plan it was sealed under (in its HPKE
// binding and its envelope's pool key), so reports sealed under the
// earlier plan still count, in that plan's epoch, and the shuffler batches
// each epoch apart. Values staged under the earlier plan for a period
// still open are dropped when it closes (Stats.Superseded): a Provider
// holds one plan, and a report of an earlier epoch cannot be sealed
// without that plan's binding.
//
// # Randomizers and what an app links
//
// A Provider runs the plan's randomizers in process (package sdk/host):
// DefaultRandomizers, which are krr, hadamard, rappor, summation and
// longitudinal. The package links no gRPC, go-plugin, gonum, accountant
// or Google differential-privacy code (a test guards its dependencies). An
// app that needs Blanket's laplace randomizer, or a randomizer served by a
// plugin binary, says so in Config.Randomizers and links what that takes
// (see DefaultRandomizers).
//
// # Periods
//
// The plan fixes a reporting period (plan.Plan.Period, 24 h by default,
// UTC, starting at multiples of the period since the Unix epoch) and a
// horizon of periods over which its target (eps, delta) holds. The
// guarantee assumes that a user sends at most one report per metric per
// period (separate travel) or one message per period (joint, parallel
// travel); the Provider enforces that bound from the plan, whatever the app
// does. A Record does not report its value: it takes it for the period
// holding Config.Now, in memory, and the value is staged in the outbox
// within Config.StageInterval (see Durability). Within a period a categorical metric keeps its last
// value, a sum adds up its values (the period's total, clamped to the
// metric's range [lo, hi] only when the period closes), and a mean (a real
// metric of plan aggregate "mean", plan.Metric.Aggregate) adds them up and
// counts them (the period's total over their number, clamped to [lo, hi]
// when the period closes). Whatever the number of Records, the period
// sends one value of the metric.
//
// A period closes at the first of: the staging of the next Record after
// its end (within Config.StageInterval of it), the next upload tick
// (Config.UploadInterval) or Flush, and the next start of a Provider on
// the same outbox. Closing randomizes the period's values at
// the plan's eps0, seals them under the period's binding (the plan's
// binding with the period set, report.Binding.Period, so that a report
// does not open in another period), and commits the envelope, tagged with
// its pool, the plan's epoch and the period (report.PeriodPoolKey), in one
// transaction with removing the staged values, charging the ledger and
// marking the period closed, for its pool and for every metric the
// envelope carries. A period once closed never reopens: a Record
// into it is dropped and counted (Stats.Late), so that neither a clock
// going back nor a second process on the outbox sends a second report for
// it. A period is closed only by closing it: after the clock went back, a
// Record into an earlier period that was never closed for its metric
// (separate travel) or the plan's pool (joint, parallel) is staged for that
// period and sent once, as any other.
//
// A staged period that could not close within Config.PeriodGrace of its
// end (default: the plan's grace, plan.Plan.GraceLength, which the
// shuffler follows too: 8 periods unless the plan sets grace) is dropped
// unsent and counted (Stats.Expired), never sent late into another period.
// A closed period is sealed and sent at the first chance: the next start,
// staging of a Record, upload tick or Shutdown; an app used once a week
// under a daily plan sends the last day it was used at its next start.
//
// # What the app is told
//
// Telemetry the app recorded that will not reach the collector is a Drop:
// a Record into a closed period (DropLate, Stats.Late), a period that
// expired unsent (DropExpired, Stats.Expired), a report the shuffler
// refused (DropRefused: named in its 202 answer, Stats.Rejected, or an
// upload of it alone answered 400 or 413, Stats.Dropped; DropTokenInvalid,
// DropTokenSpent and DropNoToken when it refused the report's admission
// token, or its lack of one), a report for which no admission token could
// be obtained by its period's deadline (DropNoToken, Stats.NoToken). Each is logged
// as a warning through Config.Logger with its reason, metric and period,
// and passed to Config.OnDrop when set: on a goroutine of the Provider's,
// in order, with no lock held (it may call the Provider), and it must not
// block.
//
// # Admission
//
// A shuffler open to the Internet may require admission tokens: it takes
// an envelope only with a valid token of its pool key (pool, plan epoch,
// period), not spent before, and an issuer grants each authenticated app
// instance at most one per pool key, blinded (package admission), so that
// a token spent at the shuffler does not tell which instance fetched it.
// The plan route says so (AdmissionHeader: AdmissionTokens); NewProvider
// in ModeOn then fails with ErrCredentialRequired unless
// Config.Credential is set:
//
//	cfg.Credential = func(ctx context.Context) (string, error) { return idToken(ctx) } // the instance's JWT
//	cfg.Issuer = "https://tokens.example.com"                                         // defaults to Endpoint
//
// With a Credential, in ModeOn, the Provider fetches tokens at start,
// every Config.UploadInterval and at Flush, never on the Record path: in
// one request, for every pool of the plan (each metric's under separate
// travel, the plan's pool under joint and parallel travel) in the current
// period and the next Config.TokenPrefetch (default 1), whatever the app
// recorded, and for the pool keys of reports sealed without one yet. So
// what the issuer sees (the instance, the pool keys, the times it asks)
// does not depend on which metrics the app used, and, fetched a period
// ahead, does not point at an upload; only an app that did not run before
// a period asks for that period's pool keys shortly before it uploads its
// reports. A request is stored in the outbox, with its blinds, before it
// is sent, and sent again as it is after a crash or a failed POST: the
// issuer answers the same blinded elements with the same evaluations. The
// issuer's refusals are stored and not asked again (a period it does not
// grant yet is asked again a period later). A report is uploaded only
// with its pool key's token (reports waiting for one hold back no
// other), and dropped unsent at its period's deadline when none could be
// obtained (DropNoToken, uncharged: UploadNoToken). ModeLocal and ModeOff
// never contact the issuer.
//
// # Travel
//
// The plan says how a user's values travel, and the accountant's guarantee
// assumes exactly that; the Provider follows it without the app changing a
// line:
//
//   - separate: each metric recorded in a period sends one report of it,
//     shuffled with that metric's reports of the period. A metric not
//     recorded in a period sends nothing for it.
//   - joint: each period sends one message carrying every metric of the
//     plan, in plan order. A sum not recorded in the period counts 0; a
//     categorical metric or a mean not recorded leaves the period without
//     a message (Stats.Incomplete). The shuffler pools the plan's messages
//     together.
//   - parallel: each period draws one metric, with the plan's weights,
//     from crypto randomness; the period sends a message carrying that
//     metric's value alone (nothing when it was not recorded). Records of
//     the other metrics are dropped (Stats.Skipped), and their
//     instruments' Enabled is false, so an app can skip computing them.
//     The draw is staged in the outbox with the values: a restart does
//     not draw again (which would let a user pick the metric).
//
// # State metrics
//
// A metric whose randomizer keeps per-user state across periods (its
// description says Stateful, such as the longitudinal protocol: its random
// choices are drawn once and kept, which is what makes its whole
// transcript private) is a state metric. Only separate travel has them:
// NewProvider refuses a joint or parallel plan with one, as plan.Calibrate
// does. It is recorded with a Categorical instrument, and its value in a
// period is the last value recorded, carried forward over periods without
// a Record (the app may record only when the state changes). Each period
// that ends within the grace once the metric has a value is closed by one
// step of the randomizer with that value and the state it returned at the
// last step (sdk.Stateful.Step), in increasing order of period, including
// periods without a Record; a step may send no report. The new state is
// committed in the transaction that commits the period's report, so that
// neither a crash nor a second process loses a state or steps a period
// twice once a step is committed; a crash before the commit steps the
// period again at the next closing (nothing was sent). A period that ended
// more than the grace ago is stepped only if a value was recorded in it,
// and its report is dropped (Stats.Expired); the randomizer carries its
// state over the others. So the randomizer follows the state history the
// guarantee is stated for: the last value recorded at or before each
// period (docs/time.md §5). States belong to one plan (a new plan, say with
// another eps0, is a new protocol run, and the accountant composes plan
// epochs): a new plan starts from no state, and the carried value goes on.
// The carried value stays in clear on the device as long as the outbox.
//
// # Instruments
//
// Categorical, Sum and Mean never fail to construct. An instrument whose
// metric is not in the plan, or whose kind does not match the metric (a
// Sum on a categorical metric, a Sum on a metric of plan aggregate "mean",
// a Mean on one of aggregate "sum", the default), returns an error
// wrapping ErrUnknownMetric or ErrWrongKind from every Record, and from
// Err at once.
// A Record checks its value before it returns, although the randomizer
// sees it only at closing: a category outside the plan's without an other
// bucket, NaN or an infinity fails with ErrBadValue and stages nothing.
// Instruments carry no attributes: a report holds one value of one metric,
// so that nothing in it singles out its sender.
//
// # Consent
//
// In ModeOff nothing is fetched, stored or sent, and Record returns nil.
// In ModeLocal nothing leaves the device: no plan is fetched and nothing
// is uploaded, so the server never learns of the device. The plan is the
// one an earlier run in ModeOn cached in Config.DataDir (or Config.Plan,
// for an app that ships its plan); without one nothing is recorded (Record
// returns nil, Enabled is false). With one, values are staged, and each
// period's report sealed, as in ModeOn and kept in the outbox, never
// uploaded (not even after the user switches to on, as in x/telemetry),
// for Config.LocalRetention days; without an uploader a period closes at
// the staging of the next Record, at Flush, or at the next start. ModeOn fetches the plan and uploads.
// ModeFromEnv reads the mode from $BLANKET_TELEMETRY (unset: local); a
// value it does not know means off, and ModeFromEnvLogged logs it.
//
// # Durability and what the device keeps
//
// A Record returns without disk I/O, and without a lock that disk I/O
// holds (about 0.1 to 0.3 µs, no allocation): its value waits in memory,
// merged with the period's other Records as the outbox would merge them
// (the last category, the running sum and count), and is staged in one
// SQLite transaction per metric and period (WAL, synchronous=FULL)
// Config.StageInterval (1 s) after the first Record into an empty buffer,
// at every closing of periods, at Flush and at Shutdown. What a crash
// (kill -9, a power cut) or an exit without Shutdown loses is the
// Records of that last interval; a crash loses nothing staged, and the
// next start closes the periods that ended meanwhile. With every consent
// mode the same holds: in ModeLocal the Records wait in memory as in
// ModeOn. An app that must not lose a Record to a crash sets
// StageInterval negative, and each Record stages itself before it returns,
// for an fsync each (about 200 µs on a server's disk, more on a phone's
// flash): off the hot path only. The values of
// the open period are kept in clear in the app's data dir (Config.DataDir,
// the user's own device, created 0700) until the period closes, in an
// outbox file readable by its owner only (0600, with its WAL and
// shared-memory files); they are never uploaded unrandomized, and closing
// removes them in the transaction that commits the sealed report. The
// uploader deletes reports from the outbox only after the shuffler
// answered them with HTTP 202, which it sends after storing them durably.
// A crash between the two sends the reports again at the next start, and
// the shuffler drops them by id: nothing recorded is lost or counted
// twice. Uploads retry with exponential backoff and jitter, and honour
// Retry-After on 429 and 503. Shutdown does not retry: it makes one
// attempt, bounded by Config.ShutdownTimeout, and none when the server did
// not answer this run (so a short-lived tool never waits on a dead
// server at exit); what it does not send waits in the outbox for the next
// run. With admission tokens the outbox also holds each token request's
// inputs and blinds until the issuer answered it, and the tokens until
// their period's deadline: with them the tokens spent can be linked to
// this instance, so they never leave the device. An outbox file of a
// pre-release schema version is refused when opened, with an error that
// says so: nothing migrates it.
//
// # The ledger
//
// Provider.Ledger reads the local privacy ledger: for each period and
// metric, the report committed (at most one) and its eps0, the metric's
// local privacy loss in the period, and what became of the report
// (LedgerEntry.Upload: local, pending, acknowledged by the shuffler,
// refused by it, dropped). A report is charged when it is committed, since
// from then on it may reach the shuffler at any time; the charge of a
// report the shuffler refused by name at its first upload is taken back
// (kept apart in LedgerEntry.RefusedEps0): the shuffler refuses before
// storing, so the report is in no batch and the collector, the only
// holder of the key it is sealed to, never opens it (see UploadRefused
// for the trust this takes). A refusal of a report an earlier upload
// without an answer carried keeps its charge: that upload may have stored
// it. Provider.LedgerWindow sums it over the
// plan's horizon ending with the current period, the window the plan's
// target covers: the reports sent and their local loss by basic
// composition (the sum of their eps0, a bound that does not trust the
// shuffler), beside the plan's central guarantee over the horizon (which
// holds given the shuffler's batches of at least n_min), and the reports
// of the window sealed under another plan, which that guarantee does not
// cover.
//
// # Simulations
//
// A process running many Providers (the fleet example runs 100,000) gives
// each a MemoryOutbox (not durable), and shares one RandomizerCache and one
// http.Client among them. Config.Now runs them on a simulated clock: a
// Provider seals a period once its clock has passed the period's end (at
// the next Record, Flush or start), so a simulation advances the clock past
// a period and calls Flush to send it.
package client
