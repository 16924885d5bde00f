package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/blanket-dp/blanket/sdk/client"
)

// An app reports a screen view and the bytes it synced. The collector here
// is a stand-in serving a plan with metrics "app/screen" (k-RR) and
// "app/bytes" (summation), both at eps0 = 2, and a reporting period of one
// day (the default). Records stage their values for the day; the day's
// reports are sealed and sent once it has ended. The clock is simulated
// so that the example need not wait a day: an app leaves Config.Now unset.
func Example() {
	collector, err := startFake(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer collector.Close()
	dir, err := os.MkdirTemp("", "blanket-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	p, err := client.NewProvider(ctx, client.Config{
		Mode:     client.ModeOn, // usually client.ModeFromEnv()
		Endpoint: collector.URL,
		PlanKey:  testPlanKey, // `blanket collector plan-key` prints it
		DataDir:  dir,
		MaxEps0:  8,
		Now:      func() time.Time { return now },
	})
	if err != nil {
		log.Printf("telemetry disabled: %v", err) // a nil Provider records nothing
	}
	defer p.Shutdown(ctx)

	m := p.Meter("app")
	if err := m.Categorical("screen").Record(ctx, "search"); err != nil {
		log.Print(err)
	}
	for range 3 {
		if err := m.Sum("bytes").Record(ctx, 42); err != nil { // the day's total, 126, is sent clamped to [0, 100]
			log.Print(err)
		}
	}
	now = now.Add(24 * time.Hour)        // the next day: the first has ended
	if err := p.Flush(ctx); err != nil { // closes the ended day, uploads; Shutdown flushes too
		log.Print(err)
	}
	ledger, _ := p.Ledger(ctx)
	for _, e := range ledger {
		fmt.Printf("%s %s: %d report, eps0 %g\n", e.Start.Format(time.DateOnly), e.Metric, e.Reports, e.Eps0)
	}
	st := p.Stats()
	fmt.Println("recorded:", st.Recorded, "uploaded:", st.Uploaded)
	// Output:
	// 2026-03-01 app/bytes: 1 report, eps0 2
	// 2026-03-01 app/screen: 1 report, eps0 2
	// recorded: 4 uploaded: 2
}

// In ModeOff nothing is fetched, stored or sent, and instruments record
// nothing without error; the zero Config is off.
func ExampleModeOff() {
	p, err := client.NewProvider(context.Background(), client.Config{Mode: client.ModeOff})
	fmt.Println(err)
	fmt.Println(p.Meter("app").Categorical("anything").Record(context.Background(), "x"))
	// Output:
	// <nil>
	// <nil>
}

// An instrument whose metric is not in the plan fails at every Record with
// ErrUnknownMetric; Err reports it at once.
func ExampleMeter_Categorical() {
	collector, err := startFake(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer collector.Close()
	ctx := context.Background()
	p, err := client.NewProvider(ctx, client.Config{
		Mode:     client.ModeOn,
		Endpoint: collector.URL,
		PlanKey:  testPlanKey,
		Outbox:   client.NewMemoryOutbox(),
		MaxEps0:  8,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Shutdown(ctx)
	fmt.Println(p.Meter("app").Categorical("screen").Err())
	fmt.Println(p.Meter("app").Categorical("colour").Err())
	// Output:
	// <nil>
	// client: metric not in the plan: "app/colour" (the plan has "app/screen", "app/feature", "app/bytes")
}
