package main

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"time"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/admission/issuer"
	"github.com/blanket-dp/blanket/collector/shuffler"
	"github.com/blanket-dp/blanket/internal/health"
	"github.com/blanket-dp/blanket/internal/pgdb"
	"github.com/blanket-dp/blanket/internal/secrets"
	"github.com/blanket-dp/blanket/sdk/plugin"

	"github.com/blanket-dp/blanket/collector/dashboard"
	"github.com/spf13/cobra"
)

func newShufflerCmd(e *env) *cobra.Command {
	var (
		sf            serverFlags
		tf            shufflerFlags
		collectorURLs []string
		tokenFile     string
		admits        string
		seedFile      string
	)
	cmd := &cobra.Command{
		Use:   "shuffler --data DIR --plan PLAN.yaml --collector URL --admission-seed FILE [--addr 127.0.0.1:8080]",
		Short: "Run the shuffler role alone",
		Long: `Run the shuffler: apps POST sealed reports to /v1/reports; the shuffler keeps no
address, header or arrival time, drops retried uploads by report id, pools the
reports in DIR/shuffler.db (per metric with separate travel, one pool "@joint"
or "@parallel" for the plan's messages otherwise), each period apart, and
releases batches of at least n_min in a uniformly random order to the
collector's POST /v1/batches, retrying with backoff until acknowledged (also
across restarts): while a period's grace lasts a pool goes out only down to
its last n_min (once it holds 2·n_min and has settled), at the deadline whole,
so every acknowledged report of a period that received n_min is released.

It reads the plan only for its pools (metric names and travel) and n_min (it
need not be calibrated): give it the plan file the collector runs with. It
relays the collector's GET /v1/plan so apps need one address, and takes the
pools of every plan it relays, so a plan the collector publishes later (another
travel mode, a new metric) needs no restart; earlier pools stay for late
reports.
It presents the bearer token in --token-file (default DIR/batch.token): copy
the collector's token file there (mode 0600). With --store postgres://… the
shuffler keeps nothing else in DIR: --data may be left out when --token-file
is given.

Admission (--admission tokens, the default): the shuffler takes an envelope
only with an admission token of its pool key that no other report spent,
which apps get from the issuer (blanket issuer) with their credential; it
verifies tokens with the issuer's seed, --admission-seed (a copy of the
issuer's admission.seed, mode 0600), and keeps spent ones in its store until
their period's grace ends. --admission open takes envelopes without tokens:
anyone who can reach the upload port can then add reports to a batch and
weaken its guarantee; it is logged at start, and acceptable only where the
port is reachable by your apps alone. GET /v1/plan answers with the header
Blanket-Admission: tokens or open.

Replicas: with --store postgres://…, any number of shuffler processes share
one PostgreSQL database (its own, apart from the collector's: the shuffler
must not read what the collector stores): apps may upload to any of them, a
retried upload is a duplicate whichever replica took the first, each pool is
released by one replica at a time, never below n_min, and a released batch is
forwarded by one replica (another takes over if it dies).`,
		Example: `  blanket shuffler --data ./shuffler-data --plan plan.yaml --collector http://10.0.0.2:8081 --admission-seed ./admission.seed
  PGPASSFILE=/etc/blanket/shuffler.pgpass blanket shuffler --data ./s1 --plan plan.yaml --collector http://collector.internal:8081 --admission-seed /etc/blanket/admission.seed --store postgres://blanket_shuffler@db.internal/blanket_shuffler
  blanket shuffler --data ./shuffler-data --plan plan.yaml --collector http://127.0.0.1:8081 --admission open
  blanket shuffler --config /etc/blanket/shuffler.yaml   # deploy/config/shuffler.yaml`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command) error {
			if err := requireFlags(cmd, "collector"); err != nil {
				return err
			}
			p, logger, err := sf.setup(cmd, "")
			if err != nil {
				return err
			}
			if err := tf.check(); err != nil {
				return err
			}
			for _, c := range collectorURLs {
				if u, err := url.Parse(c); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return usageErrorf("--collector %q, must be an http or https URL", c)
				}
			}
			if err := checkAdmissionMode("admission", admits); err != nil {
				return err
			}
			var verifier *issuer.Verifier
			switch {
			case admits == admission.AdmissionTokens && seedFile == "":
				return usageErrorf("--admission tokens (the default) needs --admission-seed FILE, a copy of the issuer's %s; or --admission open to take envelopes without tokens", issuer.SeedFile)
			case admits == admission.AdmissionTokens:
				if verifier, err = loadVerifier(seedFile); err != nil {
					return err
				}
			case seedFile != "":
				return usageErrorf("--admission-seed is for --admission tokens, not open")
			default:
				warnOpen(logger)
			}
			if tokenFile == "" && sf.data == "" {
				return usageErrorf("--token-file is required without --data: the shuffler reads the collector's bearer token from it (default DIR/%s)", secrets.TokenFile)
			}
			if tokenFile == "" {
				tokenFile = filepath.Join(sf.data, secrets.TokenFile)
			}
			token, err := secrets.LoadToken(tokenFile)
			if errors.Is(err, fs.ErrNotExist) {
				return usageErrorf("--token-file %s does not exist: copy the collector's %s there (mode 0600)", tokenFile, secrets.TokenFile)
			} else if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			// Randomizers draw the blanket draws of a plan with a floor;
			// plugins start only when one does.
			defer plugin.CleanupPlugins()
			ps := pluginOpener(e.pluginDir)
			defer ps.Close()
			ln, err := net.Listen("tcp", sf.addr)
			if err != nil {
				return err
			}
			defer ln.Close()
			reg := newRegistry(nil)
			s, err := shuffler.Open(ctx, tf.options(shuffler.Options{Plan: p, Dir: sf.data, Store: sf.store, Collector: collectorURLs[0], Collectors: collectorURLs[1:], Token: token, Logger: logger, Registerer: reg, Admission: verifier, Open: ps.Open}))
			if err != nil {
				return err
			}
			defer s.Close()
			mux := http.NewServeMux()
			s.Register(mux)
			// A plan the collector publishes later (another travel mode,
			// a new metric) brings its pools: apps that fetched it are
			// not refused, and earlier pools stay for late reports.
			relay := &shuffler.PlanRelay{Collector: collectorURLs[0], Collectors: collectorURLs[1:], Logger: logger, OnPlan: s.AddPlan, Admission: admits}
			relay.Register(mux)
			checks := append(s.Checks(), health.Check{Name: "plan", Ready: relay.Ready})
			health.Register(mux, false, checks...)
			admin := http.NewServeMux()
			relay.Register(admin)
			s.RegisterAdmin(admin)
			dashboard.Register(admin, dashboard.Roles{Shuffler: true})
			registerAdminOps(admin, reg, checks...)
			adminURL, stopAdmin, err := startAdmin(logger, sf.adminAddr, admin)
			if err != nil {
				return err
			}
			defer stopAdmin()
			go refreshPlan(ctx, relay, time.Minute)
			printListening(cmd, "shuffler", loopbackURL(ln.Addr()), append(append(append([]string{}, shufflerRoutes...), "GET  /v1/plan              relayed from the collector"), publicHealthRoutes...)...)
			printListening(cmd, "shuffler admin", adminURL, append([]string{
				"GET  /                     the dashboard: the plan and each pool's fill",
				"GET  /v1/pools             each pool's fill against n_min",
				"POST /v1/pools/close       close the periods ending by ?through= before their deadline",
			}, adminOpsRoutes...)...)
			logger.Info("serving", "addr", ln.Addr().String(), "data", sf.data, "store", pgdb.Redact(sf.store), "collector", collectorURLs, "admission", admits, "n_min", p.NMin, "metrics", metricNames(p))
			return serveHTTP(ctx, logger, ln, mux, s.Run)
		}),
	}
	sf.add(cmd, "127.0.0.1:8080")
	tf.add(cmd)
	cmd.Flags().StringArrayVar(&collectorURLs, "collector", nil, "the collector's base URL, e.g. http://127.0.0.1:8081 (required); repeat it for replicas of the collector on one store: each batch goes to one whose GET /readyz answers 200, in turn, and a send that fails goes on to the next")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file holding the collector's bearer token (default $BLANKET_TOKEN_FILE, else DIR/batch.token)")
	cmd.Flags().StringVar(&admits, "admission", admission.AdmissionTokens, "tokens: take only envelopes with an admission token of their pool key, not spent before (needs --admission-seed); open: take envelopes without one (anyone who can reach the upload port can add reports)")
	cmd.Flags().StringVar(&seedFile, "admission-seed", "", "a copy of the issuer's admission.seed (mode 0600), with which the shuffler verifies tokens (default $BLANKET_ADMISSION_SEED)")
	cmd.Flags().Lookup("data").Usage = dataUsage("shuffler.db (SQLite) and the default --token-file; with --store postgres://… nothing but that default")
	addConfigFlag(cmd)
	return cmd
}

// refreshPlan has relay fetch the collector's plan now and every interval
// until ctx is done, so that the shuffler takes a new plan's pools even
// when apps fetch the plan from the collector directly.
func refreshPlan(ctx context.Context, relay *shuffler.PlanRelay, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		_ = relay.Refresh(ctx) // failures are logged by the relay
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
