package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/blanket-dp/blanket/collector"
	"github.com/blanket-dp/blanket/internal/pgdb"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// planKeyFlags are the flags of the plan-signing key commands: where the
// collector keeps its state.
type planKeyFlags struct {
	data, store string
}

func (f *planKeyFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.data, "data", "", "the collector's data directory (as given to blanket collector or serve); the key is DIR/"+collector.PlanKeyFile+" with SQLite")
	cmd.Flags().StringVar(&f.store, "store", os.Getenv("BLANKET_STORE"), "a PostgreSQL URL when the collector keeps its state there (default $BLANKET_STORE)")
}

func (f *planKeyFlags) check(cmd *cobra.Command) error {
	if pgdb.IsURL(f.store) {
		return nil
	}
	if f.store != "" && strings.Contains(f.store, "://") {
		return usageErrorf("--store %q: a PostgreSQL URL starts with postgres:// or postgresql://", f.store)
	}
	return requireFlags(cmd, "data")
}

// newPlanKeyCmd is `blanket collector plan-key`.
func newPlanKeyCmd() *cobra.Command {
	var f planKeyFlags
	cmd := &cobra.Command{
		Use:   "plan-key --data DIR [--store postgres://…]",
		Short: "Print the collector's plan-signing public key, which apps pin",
		Long: `Print the public half of the Ed25519 key the collector signs its plan with
(GET /v1/plan), standard base64: what every app is configured with
(client.Config.PlanKey), out of band, so that whoever relays the plan (a
shuffler, a CDN) cannot swap the collector's report key. The key is generated
when there is none yet (DIR/` + collector.PlanKeyFile + `, mode 0600, or the collector's
PostgreSQL database), so apps can be configured before the collector first
starts; the collector started with the same --data and --store signs with it.
The same works for blanket serve's --data. Never configure an app with a line
of the key file: its first line is the private key (` + plan.SigningSeedPrefix + `…),
which apps refuse.`,
		Example: `  blanket collector plan-key --data ./collector-data`,
		Args:    cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command) error {
			if err := f.check(cmd); err != nil {
				return err
			}
			k, err := collector.PlanSigningKey(cmd.Context(), f.data, f.store)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), plan.FormatSigningKey(k))
			return nil
		}),
	}
	f.add(cmd)
	return cmd
}

// newRotatePlanKeyCmd is `blanket collector rotate-plan-key`.
func newRotatePlanKeyCmd() *cobra.Command {
	var (
		f         planKeyFlags
		notBefore string
	)
	cmd := &cobra.Command{
		Use:   "rotate-plan-key --data DIR [--store postgres://…] [--not-before TIME]",
		Short: "Replace the plan-signing key, endorsed by the old one",
		Long: `Replace the collector's plan-signing key by a new one, and add to its rollover
chain a statement signed by the old key that the new key signs plans from
--not-before on (default now). The collector serves the chain with every plan
(Blanket-Plan-Endorsements), so that apps pinned to the old key, or to any
earlier key of the chain, accept plans signed by the new one; configure new
app releases with the new key (printed). Restart the collector (every replica)
to sign with the new key; until then it signs with the old one, which apps
still accept. The old private key is discarded. An app whose clock reads before
--not-before refuses the plan until it does, so leave --not-before at now
unless you start the collectors with the new key later.`,
		Example: `  blanket collector rotate-plan-key --data ./collector-data`,
		Args:    cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command) error {
			if err := f.check(cmd); err != nil {
				return err
			}
			nb := time.Now()
			if notBefore != "" {
				t, err := time.Parse(time.RFC3339, notBefore)
				if err != nil {
					return usageErrorf("--not-before %q: not RFC 3339 (2026-11-27T00:00:00Z)", notBefore)
				}
				nb = t
			}
			old, next, err := collector.RotatePlanSigningKey(cmd.Context(), f.data, f.store, nb)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "old plan key: %s\n", plan.FormatSigningKey(old))
			fmt.Fprintf(w, "new plan key: %s (endorsed by the old one from %s; restart the collector to sign with it)\n", plan.FormatSigningKey(next), nb.UTC().Format(time.RFC3339))
			return nil
		}),
	}
	f.add(cmd)
	cmd.Flags().StringVar(&notBefore, "not-before", "", "when the new key becomes valid, RFC 3339 (default now)")
	return cmd
}

// printPlanKey tells the operator the key apps pin.
func printPlanKey(cmd *cobra.Command, c *collector.Collector) {
	fmt.Fprintf(cmd.OutOrStdout(), "blanket plan key %s (pin it in apps: client.Config.PlanKey)\n", plan.FormatSigningKey(c.PlanSigningKey()))
}
