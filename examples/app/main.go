// Command app is the smallest app that reports telemetry with Blanket: a
// screen view and the bytes it synced, kept on the device for the
// reporting period, then randomized, sealed for the collector and uploaded
// only with the user's consent (BLANKET_TELEMETRY=on; local, the default,
// keeps everything on the device). See README.md for a development plan
// that reports every minute.
//
//	blanket serve --data /tmp/blanket --plan examples/plan.yaml --addr 127.0.0.1:8080 --admission open &
//	BLANKET_TELEMETRY=on go run ./examples/app -endpoint http://127.0.0.1:8080 \
//		-plan-key "$(blanket collector plan-key --data /tmp/blanket)"
package main

import (
	"context"
	"flag"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/blanket-dp/blanket/sdk/client"
)

func main() {
	endpoint := flag.String("endpoint", "http://127.0.0.1:8080", "Blanket server")
	planKey := flag.String("plan-key", os.Getenv("BLANKET_PLAN_KEY"), "the collector's plan-signing key, as `blanket collector plan-key --data DIR` prints it (default $BLANKET_PLAN_KEY); a real app compiles it in")
	dataDir := flag.String("data", "", "telemetry data dir: the outbox, the privacy ledger and the cached plan (default: blanket-example-app in the user cache dir); one per simulated user")
	screen := flag.String("screen", "search", "the screen value to record")
	flag.Parse()
	ctx := context.Background()
	if *dataDir == "" {
		dir, _ := os.UserCacheDir()
		*dataDir = filepath.Join(dir, "blanket-example-app")
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))

	p, err := client.NewProvider(ctx, client.Config{
		Mode:     client.ModeFromEnvLogged(logger), // BLANKET_TELEMETRY=off|local|on; unset means local
		Endpoint: *endpoint,
		PlanKey:  *planKey, // the plan must be signed by this key: a relay cannot swap the collector's key
		DataDir:  *dataDir,
		MaxEps0:  8,      // never report with a local budget above 8
		Logger:   logger, // a failed upload, a fallback to the cached plan, each dropped value or report
		OnDrop: func(d client.Drop) { // optional: the app's own handling of what will not be counted
			log.Printf("dropped: %s %s of period %s: %s", d.Reason, d.Metric, d.Start.Format(time.RFC3339), d.Detail)
		},
	})
	if err != nil {
		log.Printf("telemetry disabled: %v", err) // a nil Provider records nothing
	}
	defer func() {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		// One bounded attempt to upload the reports of the periods that
		// ended; what it does not send waits in the outbox for the next run.
		if err := p.Shutdown(ctx); err != nil {
			log.Printf("telemetry: %v", err)
		}
		st := p.Stats()
		log.Printf("recorded %d, sealed %d, uploaded %d, refused %d, late %d, expired %d", st.Recorded, st.Messages, st.Uploaded, st.Rejected+st.Dropped, st.Late, st.Expired)
	}()

	m := p.Meter("demo")
	if err := m.Categorical("screen").Record(ctx, *screen); err != nil {
		log.Print(err)
	}
	if err := m.Sum("sync-bytes").Record(ctx, 123456); err != nil {
		log.Print(err)
	}
	ledger, _ := p.Ledger(ctx)
	for _, e := range ledger {
		log.Printf("%s %s: %d reports (%s), eps0 spent %.3g (%d kept local)", e.Start.Format(time.RFC3339), e.Metric, e.Reports, e.Upload, e.Eps0, e.LocalReports)
	}
}
