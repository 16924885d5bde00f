// Command app is the smallest app that reports telemetry with Blanket: a
// screen view and the bytes it synced, randomized on the device, sealed for
// the collector and uploaded only with the user's consent
// (BLANKET_TELEMETRY=on; local, the default, keeps them on the device).
//
//	blanket serve --data /tmp/blanket --plan examples/plan.yaml --addr 127.0.0.1:8080 &
//	BLANKET_TELEMETRY=on go run ./examples/app -endpoint http://127.0.0.1:8080
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/blanket-dp/blanket/sdk/client"
)

func main() {
	endpoint := flag.String("endpoint", "http://127.0.0.1:8080", "Blanket server")
	flag.Parse()
	ctx := context.Background()
	dir, _ := os.UserCacheDir()

	p, err := client.NewProvider(ctx, client.Config{
		Mode:     client.ModeFromEnv(), // BLANKET_TELEMETRY=off|local|on
		Endpoint: *endpoint,
		DataDir:  filepath.Join(dir, "blanket-example-app"),
		MaxEps0:  8, // never report with a local budget above 8
	})
	if err != nil {
		log.Printf("telemetry disabled: %v", err) // a nil Provider records nothing
	}
	defer func() {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		p.Shutdown(ctx) // uploads what it can; the rest waits in the outbox
	}()

	m := p.Meter("demo")
	if err := m.Categorical("screen").Record(ctx, "search"); err != nil {
		log.Print(err)
	}
	if err := m.Sum("sync-bytes").Record(ctx, 123456); err != nil {
		log.Print(err)
	}
	ledger, _ := p.Ledger(ctx)
	for _, e := range ledger {
		log.Printf("%s %s: %d reports, eps0 spent %.3g (%d kept local)", e.Start.Format(time.DateOnly), e.Metric, e.Reports, e.Eps0, e.LocalReports)
	}
}
