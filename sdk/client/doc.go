// Package client is the app side of Blanket: it records telemetry values
// with differential privacy in the shuffle model. Each value is randomized
// on the device by its metric's local randomizer at the budget eps0 fixed by
// the collector's plan, sealed to the collector's public key (HPKE), committed
// to a durable outbox, and uploaded in the background to the shuffler, which
// strips who sent it and forwards it only in large, randomly ordered batches.
//
// The API follows the OpenTelemetry metric API — a Provider hands out
// Meters, a Meter hands out instruments, instruments Record with a context —
// and the consent modes of golang.org/x/telemetry: off, local, on.
//
//	p, err := client.NewProvider(ctx, client.Config{
//		Mode:     client.ModeFromEnv(), // $BLANKET_TELEMETRY: off, local (default) or on
//		Endpoint: "https://telemetry.example.com",
//		DataDir:  filepath.Join(cacheDir, "myapp", "telemetry"),
//		MaxEps0:  8, // refuse any plan asking for more local budget
//	})
//	if err != nil {
//		log.Printf("telemetry disabled: %v", err) // p is nil; a nil Provider records nothing
//	}
//	defer p.Shutdown(ctx)
//	m := p.Meter("myapp")                            // metrics "myapp/..."
//	m.Categorical("ui/screen").Record(ctx, "search") // plan metric "myapp/ui/screen"
//	m.Sum("sync/bytes").Record(ctx, 1234)
//
// # The plan
//
// NewProvider fetches the calibrated plan from the collector (GET /v1/plan)
// and verifies it before reporting anything: it must be calibrated, carry
// the collector's key, ask no metric for an eps0 above
// the app's ceiling Config.MaxEps0, and name only randomizers the app can
// open (Blanket's built-ins in process, others as plugin binaries from
// Config.PluginDir) at the plan's report format version. Otherwise
// NewProvider fails with an error wrapping ErrPlanRefused. The verified plan
// is cached in Config.DataDir, so that an app starting offline reports by
// the last plan it accepted.
//
// When the collector publishes a new plan (a new epoch: another target, a
// recalibration, a new metric), a Provider in ModeOn picks it up within
// Config.PlanRefresh (Provider.RefreshPlan; a conditional GET answered 304
// while nothing changed), verifies it the same way and reports by it from
// then on. A refused plan leaves the Provider on the plan it has. Every
// report carries the epoch of the plan it was sealed under (in its HPKE
// binding and its envelope's pool key), so reports sealed under the
// earlier plan still count, in that plan's epoch, and the shuffler batches
// each epoch apart.
//
// # Travel
//
// The plan says how a user's values travel, and the accountant's guarantee
// assumes exactly that; the Provider follows it without the app changing a
// line:
//
//   - separate: every Record sends one report of its metric, shuffled with
//     that metric's reports.
//   - joint: a Record randomizes its value and stages it; once every metric
//     of the plan has a staged value, one message carrying all of them (in
//     plan order) is sealed and committed, and a new round starts. A metric
//     recorded again within a round replaces its staged value, so a user
//     sends at most one message per round. The shuffler pools the plan's
//     messages together.
//   - parallel: each round draws one metric, with the plan's weights, from
//     crypto randomness; the round's first Record of that metric sends a
//     message carrying it alone and ends the round. Records of the other
//     metrics send nothing (Stats.Skipped), and their instruments' Enabled
//     is false, so an app can skip computing them.
//
// Staged values and a round's draw live in the outbox, durable like
// reports: a restart loses no staged value and does not draw again (which
// would let a user pick the metric). Staged values are randomized already;
// nothing in clear is stored.
//
// # Instruments
//
// Categorical and Sum never fail to construct. An instrument whose metric
// is not in the plan, or whose kind does not match the metric's randomizer
// (a Sum on a categorical metric), returns an error wrapping
// ErrUnknownMetric or ErrWrongKind from every Record, and from Err at once.
// Instruments carry no attributes: a report holds one value of one metric,
// so that nothing in it singles out its sender.
//
// # Consent
//
// In ModeOff nothing is fetched, stored or sent, and Record returns nil. In
// ModeLocal values are randomized and sealed as in ModeOn and kept in the
// outbox, never uploaded (not even after the user switches to on, as in
// x/telemetry), for Config.LocalRetention days. ModeOn uploads.
//
// # Durability
//
// Record returns only after the sealed report, with its random id, and its
// ledger entry are committed in one SQLite transaction (WAL,
// synchronous=FULL). The uploader deletes reports from the outbox only after
// the shuffler acknowledged them with HTTP 202, which it sends after storing
// them durably. A crash between the two sends the reports again at the next
// start, and the shuffler drops them by id: nothing recorded is lost or
// counted twice. Uploads retry with exponential backoff and jitter, and
// honour Retry-After on 429 and 503.
//
// # The ledger
//
// Provider.Ledger reads the local privacy ledger: for each UTC day and
// metric, the reports committed and the sum of their eps0, the local privacy
// loss of the day by basic composition. Config.MaxReportsPerDay caps it.
//
// # Simulations
//
// A process running many Providers (the fleet example runs 100,000) gives
// each a MemoryOutbox (not durable), and shares one RandomizerCache and one
// http.Client among them.
package client
