package main

import (
	"net"
	"net/http"
	"path/filepath"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/internal/health"
	"github.com/blanket-dp/blanket/internal/pgdb"
	"github.com/blanket-dp/blanket/internal/secrets"
	"github.com/blanket-dp/blanket/sdk/plugin"

	"github.com/spf13/cobra"

	"github.com/blanket-dp/blanket/collector"
	"github.com/blanket-dp/blanket/collector/dashboard"
)

func newCollectorCmd(e *env) *cobra.Command {
	var (
		sf        serverFlags
		kf        keyFlags
		tokenFile string
		admits    string
	)
	cmd := &cobra.Command{
		Use:   "collector --data DIR --plan PLAN.yaml [--addr 127.0.0.1:8081]",
		Short: "Run the collector (analyzer) role alone",
		Long: `Run the collector: it publishes the calibrated plan with its HPKE report key
schedule (GET /v1/plan), ingests shuffled batches from the shuffler (POST
/v1/batches, bearer token), opens every report with the private key of its
period and the metric's binding, aggregates the valid ones with the metric's
plugin, and serves estimates with confidence intervals and the central (eps,
delta) of the batches (GET /v1/metrics, GET /v1/metrics/{name}).

Report keys: the first is generated at the first start; --key-rotation
publishes the next key a rotation ahead and uses it from a period boundary,
'blanket collector rotate-key' schedules one by hand. A retired key opens the
reports of its periods until the plan's grace and --key-slack after its last
period, and is then erased. Their private halves are files
report-<id>.key (mode 0600) in --key-dir when given, else in DIR with SQLite
and rows of the database with PostgreSQL.

State: with SQLite (the default) it lives in DIR: collector.db, the report
keys (unless --key-dir) and plan-signing.key (the Ed25519 key that signs the
plan, generated at the first start, mode 0600: apps pin its public half,
which 'blanket collector plan-key' prints). With --store postgres://… the
database holds all of it (the report keys' private halves in --key-dir when
given) and DIR nothing but the default --token-file: --data may then be left
out when --token-file is given. The bearer token the shuffler must present
is --token-file (default DIR/batch.token, generated when missing; give the
shuffler a copy). An uncalibrated plan is calibrated at the first start and
that calibration is kept. A batch is stored atomically and counted once however
often it is delivered.

Replicas: with --store postgres://…, any number of collector processes (on
any machines) share one PostgreSQL database: the first to start generates the
first key and calibrates the plan, and every replica serves that plan and the
key schedule (with --key-dir, give every replica the same directory); a
batch is counted once whichever replica ingests it, however often; put them
behind one address (a load balancer polling GET /readyz) for the shufflers.

--shuffler-admission says what the shufflers feeding it enforce: tokens (the
default: they run --admission tokens) or open. The collector cannot check
it; it states it in the scope of its guarantees (GET /v1/metrics, the
dashboard) and in the Blanket-Admission header of GET /v1/plan.
Give every replica the same --token-file. Opening reports (HPKE) is the
collector's main cost, so throughput grows with the replicas' cores.`,
		Example: `  blanket collector --data ./collector-data --plan plan.yaml --addr 0.0.0.0:8081
  PGPASSFILE=/etc/blanket/collector.pgpass blanket collector --plan plan.yaml --store postgres://blanket_collector@db.internal/blanket_collector --token-file /etc/blanket/batch.token
  blanket collector --config /etc/blanket/collector.yaml   # deploy/config/collector.yaml`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command) error {
			p, logger, err := sf.setup(cmd, "")
			if err != nil {
				return err
			}
			if err := kf.check(); err != nil {
				return err
			}
			if err := checkAdmissionMode("shuffler-admission", admits); err != nil {
				return err
			}
			if tokenFile == "" && sf.data == "" {
				return usageErrorf("--token-file is required without --data: the bearer token the shufflers present is kept there (default DIR/%s, generated when missing)", secrets.TokenFile)
			}
			if tokenFile == "" {
				tokenFile = filepath.Join(sf.data, secrets.TokenFile)
			}
			token, created, err := secrets.LoadOrCreateToken(tokenFile)
			if err != nil {
				return err
			}
			if created {
				logger.Info("generated the shuffler's bearer token; give the shuffler a copy", "file", tokenFile)
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			defer plugin.CleanupPlugins()
			ps := pluginOpener(e.pluginDir)
			defer ps.Close()
			ln, err := net.Listen("tcp", sf.addr)
			if err != nil {
				return err
			}
			defer ln.Close()
			reg := newRegistry(ps)
			c, err := collector.OpenCollector(ctx, kf.options(collector.CollectorOptions{Plan: p, Dir: sf.data, Store: sf.store, Open: ps.Open, Token: token, Logger: logger, Registerer: reg, ShufflerAdmission: admits}))
			if err != nil {
				return err
			}
			defer c.Close()
			mux := http.NewServeMux()
			c.Register(mux)
			dashboard.Register(mux, dashboard.Roles{Collector: true})
			health.Register(mux, false, c.Checks()...)
			admin := http.NewServeMux()
			c.RegisterAPI(admin)
			dashboard.Register(admin, dashboard.Roles{Collector: true})
			registerAdminOps(admin, reg, c.Checks()...)
			adminURL, stopAdmin, err := startAdmin(logger, sf.adminAddr, admin)
			if err != nil {
				return err
			}
			defer stopAdmin()
			printListening(cmd, "collector", loopbackURL(ln.Addr()), append(append([]string{}, collectorRoutes...), publicHealthRoutes...)...)
			printListening(cmd, "collector admin", adminURL, append([]string{"GET  /                     the dashboard"}, adminOpsRoutes...)...)
			printPlanKey(cmd, c)
			logger.Info("serving", "addr", ln.Addr().String(), "data", sf.data, "store", pgdb.Redact(sf.store), "epoch", c.Epoch(), "n_min", c.Plan().NMin, "metrics", metricNames(c.Plan()))
			return serveHTTP(ctx, logger, ln, mux, c.Run)
		}),
	}
	sf.add(cmd, "127.0.0.1:8081")
	kf.add(cmd)
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file holding the bearer token batches must carry (default $BLANKET_TOKEN_FILE, else DIR/batch.token; created if missing)")
	cmd.Flags().StringVar(&admits, "shuffler-admission", admission.AdmissionTokens, "what the shufflers enforce, stated in the scope of the guarantees: tokens (they run --admission tokens) or open")
	cmd.Flags().Lookup("data").Usage = dataUsage("collector.db (SQLite), the report keys (unless --key-dir), plan-signing.key and the default --token-file; with --store postgres://… nothing but that default")
	cmd.Flags().Lookup("admin-addr").Usage = "the operator's listener: the dashboard, the collector's API, GET /metrics and /readyz with reasons; keep it private; port 0 picks a free one, printed at start (a fixed port suits Prometheus)"
	addConfigFlag(cmd)
	cmd.AddCommand(newPlanKeyCmd(), newRotatePlanKeyCmd(), newRotateKeyCmd())
	return cmd
}
