package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/blanket-dp/blanket/collector"
)

// keyFlags are the report key flags of the commands that run a collector
// (collector, serve).
type keyFlags struct {
	rotation time.Duration
	dir      string
	slack    time.Duration
}

func (f *keyFlags) add(cmd *cobra.Command) {
	cmd.Flags().DurationVar(&f.rotation, "key-rotation", 0, "rotate the collector's report key this often, e.g. 720h (30 days): the next key is published as soon as one becomes active and used from the first period boundary this long after; at least one period (default 0: only by 'blanket collector rotate-key')")
	cmd.Flags().StringVar(&f.dir, "key-dir", os.Getenv("BLANKET_KEY_DIR"), "directory holding the private halves of the report keys, one file each (mode 0600), so that the database (and its dumps) holds none; replicas must share it (default $BLANKET_KEY_DIR, else the data directory with SQLite, the database with PostgreSQL)")
	cmd.Flags().DurationVar(&f.slack, "key-slack", collector.DefaultKeySlack, "how long after a retired report key's last period's deadline (its end plus the plan's grace) its private half is kept for batches still on their way, then erased; raise it when the shuffler runs a longer --period-grace than the plan's")
}

func (f *keyFlags) check() error {
	switch {
	case f.rotation < 0:
		return usageErrorf("--key-rotation %v, must be >= 0 (0: off)", f.rotation)
	case f.slack < 0:
		return usageErrorf("--key-slack %v, must be >= 0", f.slack)
	}
	return nil
}

func (f *keyFlags) options(o collector.CollectorOptions) collector.CollectorOptions {
	o.KeyRotation = f.rotation
	o.KeyDir = f.dir
	o.KeySlack = f.slack
	if f.slack == 0 {
		o.KeySlack = -1 // none, not the default
	}
	return o
}

// runBoth runs a and b until both return and returns the first error.
func runBoth(a, b func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, f := range []func(context.Context) error{a, b} {
			wg.Go(func() {
				errs[i] = f(ctx)
				cancel() // one stopping stops the other
			})
		}
		wg.Wait()
		if errs[0] != nil {
			return errs[0]
		}
		return errs[1]
	}
}

// newRotateKeyCmd is `blanket collector rotate-key`.
func newRotateKeyCmd() *cobra.Command {
	var (
		f      planKeyFlags
		keyDir string
	)
	cmd := &cobra.Command{
		Use:   "rotate-key --data DIR [--store postgres://…] [--key-dir DIR]",
		Short: "Schedule a new report key from the next period boundary at least one period ahead",
		Long: `Schedule a new HPKE report key for the collector: it seals the reports of the
periods from the first period boundary at least one period (and an hour) from
now, so that apps fetch it with the plan before it is used. A pending key (one
published but not used yet, as --key-rotation publishes them) is replaced and
erased: nothing was sealed to it. Running collectors (every replica) pick the
new key up within a minute and serve it in their plan; no restart is needed.
The key before it retires when the new one starts, still opens the reports of
its own periods until they cannot arrive any more (the plan's grace and
--key-slack after its last period), and is then erased: batches of its
periods can no longer be opened by whoever steals the collector's keys later.

Give it the --data, --store and --key-dir the collector runs with: with
--key-dir the private half goes there, and a key directory the collector does
not use is refused. The collector must have started once (it makes the first
key and publishes the plan whose period the boundary is of). It prints the new
key and the schedule; a retired key shows as retired until the collector
erases it.`,
		Example: `  blanket collector rotate-key --data ./collector-data
  PGPASSFILE=/etc/blanket/collector.pgpass blanket collector rotate-key --data ./c1 --store postgres://blanket_collector@db.internal/blanket_collector --key-dir /srv/blanket/keys`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command) error {
			if err := f.check(cmd); err != nil {
				return err
			}
			res, err := collector.RotateReportKey(cmd.Context(), collector.KeyOptions{Dir: f.data, Store: f.store, KeyDir: keyDir})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "new report key %s seals the periods from %s (running collectors serve it within a minute)\n", res.Added.ID, res.Added.From.Format(time.RFC3339))
			for _, id := range res.Withdrawn {
				fmt.Fprintf(w, "withdrew the pending report key %s (nothing was sealed to it)\n", id)
			}
			printReportKeys(w, res.Schedule)
			return nil
		}),
	}
	f.add(cmd)
	cmd.Flags().Lookup("data").Usage = "the collector's data directory (as given to blanket collector or serve): its report keys' files with SQLite (unless --key-dir), and the SQLite database"
	cmd.Flags().StringVar(&keyDir, "key-dir", os.Getenv("BLANKET_KEY_DIR"), "the collector's --key-dir, when it keeps its report keys there (default $BLANKET_KEY_DIR)")
	return cmd
}

// printReportKeys prints a report key schedule as a table.
func printReportKeys(w io.Writer, keys []collector.ReportKey) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "report key\tfrom\tstate\terased at")
	for _, k := range keys {
		from, until := k.From.Format(time.RFC3339), ""
		if k.From.Unix() == 0 {
			from = "the start"
		}
		if !k.Until.IsZero() {
			until = k.Until.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.ID, from, k.State, until)
	}
	tw.Flush()
}
