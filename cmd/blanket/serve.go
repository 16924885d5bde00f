package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/admission/auth"
	"github.com/blanket-dp/blanket/admission/issuer"
	"github.com/blanket-dp/blanket/collector/shuffler"
	"github.com/blanket-dp/blanket/internal/health"
	"github.com/blanket-dp/blanket/internal/httpserver"
	"github.com/blanket-dp/blanket/internal/pgdb"
	"github.com/blanket-dp/blanket/internal/secrets"

	"github.com/spf13/cobra"

	"github.com/blanket-dp/blanket/collector"
	"github.com/blanket-dp/blanket/collector/dashboard"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

// shutdownGrace bounds a graceful shutdown: requests in flight get this
// long to finish.
const shutdownGrace = 10 * time.Second

// serverFlags are the flags every server command shares.
type serverFlags struct {
	data      string
	planPath  string
	addr      string
	adminAddr string
	logLevel  string
	store     string
}

func (f *serverFlags) add(cmd *cobra.Command, defaultAddr string) {
	cmd.Flags().StringVar(&f.data, "data", "", "data directory: SQLite databases, keys and tokens (created, mode 0700) (required)")
	cmd.Flags().StringVar(&f.planPath, "plan", "", "privacy plan file (YAML) (required)")
	cmd.Flags().StringVar(&f.addr, "addr", defaultAddr, "address to listen on (host:port; port 0 picks a free one)")
	cmd.Flags().StringVar(&f.adminAddr, "admin-addr", "127.0.0.1:0", "the operator's listener: the dashboard with the shuffler's pools, GET /metrics, GET /v1/pools and /readyz with reasons; keep it private (pool counts over time show when reports arrive); port 0 picks a free one, printed at start")
	cmd.Flags().StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error (logs go to stderr)")
	cmd.Flags().StringVar(&f.store, "store", "", "where state lives: a PostgreSQL URL (postgres://user@host/db; replicas of a role share it; a password is better in a password file (PGPASSFILE, ~/.pgpass) or PGPASSWORD than on the command line) or a SQLite file; default $BLANKET_STORE, else SQLite in the data directory")
}

// setup checks the flags, loads the plan, creates the data directory and
// returns a logger to stderr. --data is required unless the store is a
// PostgreSQL URL and pgData is empty; pgData says what the role keeps in
// --data with PostgreSQL too.
func (f *serverFlags) setup(cmd *cobra.Command, pgData string) (*plan.Plan, *slog.Logger, error) {
	if f.store != "" && !pgdb.IsURL(f.store) && strings.Contains(f.store, "://") {
		return nil, nil, usageErrorf("--store %q: a PostgreSQL URL starts with postgres:// or postgresql://; anything else is a SQLite file path", f.store)
	}
	switch {
	case f.data != "":
	case pgdb.IsURL(f.store) && pgData != "":
		return nil, nil, usageErrorf("missing required flag --data: %s keeps %s there, with PostgreSQL too", cmd.CommandPath(), pgData)
	case !pgdb.IsURL(f.store):
		return nil, nil, usageErrorf("missing required flag --data (its SQLite store lives there; see '%s --help')", cmd.CommandPath())
	}
	if err := requireFlags(cmd, "plan"); err != nil {
		return nil, nil, err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, nil, usageErrorf("--log-level %q, must be debug, info, warn or error", f.logLevel)
	}
	p, err := loadPlan(f.planPath)
	if err != nil {
		return nil, nil, err
	}
	if f.data != "" {
		if err := secrets.EnsureDir(f.data); err != nil {
			return nil, nil, err
		}
	}
	return p, slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level})), nil
}

// dataUsage is the help of --data for a role that needs it only with
// SQLite; keeps says what it holds then.
func dataUsage(keeps string) string {
	return "data directory (created, mode 0700): " + keeps + "; required unless --store is a PostgreSQL URL"
}

// signalContext is cmd's context, also canceled by SIGINT or SIGTERM.
func signalContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
}

// loopbackURL returns the URL at which this process reaches a listener:
// its own address, or loopback when it listens on every interface.
func loopbackURL(addr net.Addr) string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return "http://" + addr.String()
	}
	ip := ta.IP
	switch {
	case ip == nil || ip.IsUnspecified() && ip.To4() != nil:
		ip = net.IPv4(127, 0, 0, 1)
	case ip.IsUnspecified():
		ip = net.IPv6loopback
	}
	return "http://" + net.JoinHostPort(ip.String(), fmt.Sprint(ta.Port))
}

// serveHTTP serves h on ln until ctx is done, then shuts the server down
// gracefully. background, when not nil, runs beside the server with a
// context canceled at shutdown, before the server stops taking requests,
// and is waited for.
func serveHTTP(ctx context.Context, logger *slog.Logger, ln net.Listener, h http.Handler, background func(context.Context) error) error {
	srv := httpserver.New(h, logger)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	bgCtx, bgCancel := context.WithCancel(ctx)
	defer bgCancel()
	var bgDone chan error // nil without background work: never ready
	if background != nil {
		bgDone = make(chan error, 1)
		go func() { bgDone <- background(bgCtx) }()
	}
	var err error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err = <-serveErr:
		err = fmt.Errorf("serving on %s: %w", ln.Addr(), err)
	case err = <-bgDone:
		bgDone = nil
		if err != nil && !errors.Is(err, context.Canceled) {
			err = fmt.Errorf("background work stopped: %w", err)
		} else {
			err = nil
		}
	}
	bgCancel()
	if bgDone != nil {
		<-bgDone
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil && err == nil {
		logger.Warn("shutdown", "error", serr)
	}
	return err
}

// printListening tells the user where the server listens: on stdout, one
// line per route set.
func printListening(cmd *cobra.Command, role, url string, routes ...string) {
	fmt.Fprintf(cmd.OutOrStdout(), "blanket %s listening on %s\n", role, url)
	for _, r := range routes {
		fmt.Fprintf(cmd.OutOrStdout(), "  %s\n", r)
	}
}

var (
	shufflerRoutes = []string{
		"POST /v1/reports           apps upload sealed reports (shuffler)",
	}
	collectorRoutes = []string{
		"GET  /                     the dashboard (estimates, series, guarantees)",
		"GET  /v1/plan              the calibrated plan with the collector's report key schedule, signed (Blanket-Plan-Signature)",
		"GET  /v1/metrics           metrics with data",
		"GET  /v1/metrics/{name}    estimates, confidence intervals and central guarantee",
		"POST /v1/batches           shuffled batches (bearer token)",
	}
)

// shufflerFlags are the shuffler's tuning flags.
type shufflerFlags struct {
	releaseInterval time.Duration
	connRate        float64
	maxBody         int64
	maxEnvelopes    int
	periodGrace     time.Duration
	settle          time.Duration
}

func (f *shufflerFlags) add(cmd *cobra.Command) {
	cmd.Flags().DurationVar(&f.releaseInterval, "release-interval", shuffler.DefaultReleaseInterval, "how often pools are checked for a release (down to the last n_min while a period is open, whole at its deadline)")
	cmd.Flags().Float64Var(&f.connRate, "conn-rate", shuffler.DefaultConnRate, "envelopes per second one connection may upload (429 beyond); negative: no limit")
	cmd.Flags().Int64Var(&f.maxBody, "max-body", shuffler.DefaultMaxBodyBytes, "largest upload body in bytes (413 beyond)")
	cmd.Flags().IntVar(&f.maxEnvelopes, "max-envelopes", shuffler.DefaultMaxEnvelopes, "most envelopes in one upload (413 beyond)")
	cmd.Flags().DurationVar(&f.settle, "settle", 0, "while a period is open, release a pool (down to its last n_min) only once no report has joined it for this long: larger batches, a stronger guarantee per batch; at the latest 3 settle times after it could first go (default: a tenth of the period, between 1s and 1h; negative: no wait)")
	cmd.Flags().DurationVar(&f.periodGrace, "period-grace", 0, "how long after a reporting period ends its pools take late reports, each keeping its last n_min until then; then every pool goes out whole, or is deleted, never released, if it received fewer than n_min in all (default: the plan's grace, 8 periods unless it sets grace; the SDK seals a closed period's report as long)")
}

func (f *shufflerFlags) check() error {
	switch {
	case f.releaseInterval <= 0:
		return usageErrorf("--release-interval %v, must be positive", f.releaseInterval)
	case f.maxBody <= 0:
		return usageErrorf("--max-body %d, must be positive", f.maxBody)
	case f.maxEnvelopes <= 0:
		return usageErrorf("--max-envelopes %d, must be positive", f.maxEnvelopes)
	case math.IsNaN(f.connRate) || math.IsInf(f.connRate, 0):
		return usageErrorf("--conn-rate %v, must be finite", f.connRate)
	case f.connRate == 0:
		return usageErrorf("--conn-rate 0 would refuse every upload; use a negative value for no limit")
	case f.periodGrace < 0:
		return usageErrorf("--period-grace %v, must be >= 0", f.periodGrace)
	}
	return nil
}

func (f *shufflerFlags) options(o shuffler.Options) shuffler.Options {
	o.ReleaseInterval = f.releaseInterval
	o.ConnRate = f.connRate
	o.MaxBodyBytes = f.maxBody
	o.MaxEnvelopes = f.maxEnvelopes
	o.PeriodGrace = f.periodGrace
	o.Settle = f.settle
	return o
}

func newServeCmd(e *env) *cobra.Command {
	var (
		sf     serverFlags
		tf     shufflerFlags
		kf     keyFlags
		jf     jwtFlags
		admits string
	)
	cmd := &cobra.Command{
		Use:   "serve --data DIR --plan PLAN.yaml --jwks FILE|URL --jwt-issuer ISS --jwt-audience AUD [--addr 127.0.0.1:8080]",
		Short: "Run the shuffler and the collector together on one machine",
		Long: `Run both server roles in one process, on one address, with embedded SQLite
databases in the data directory:

  shuffler   POST /v1/reports: takes sealed reports from apps, keeps no address,
             header or arrival time, pools them per metric and period, and
             releases batches of at least n_min in a uniformly random order:
             while a period's grace lasts a pool goes out only down to its last
             n_min (once it holds 2·n_min and has settled), at the deadline
             whole.
  issuer     POST /v1/tokens: grants each app instance, authenticated by a JWT
             that your identity provider signs (--jwks), one admission token
             per pool and period; the shuffler takes an envelope only with a
             token of its pool and period not spent before.
  collector  GET /v1/plan, GET /v1/metrics, GET /v1/metrics/{name}: publishes the
             calibrated plan with its report keys, opens and aggregates the batches,
             serves estimates with their central (eps, delta).
  dashboard  GET /: a web page of each metric's latest estimates with
             intervals, its series over periods, reports per period against
             n_min, and the guarantee per period and over the horizon next to
             the plan's target.

The operator's listener (--admin-addr, loopback by default, printed at
start) adds what only the operator may see: the dashboard with the
shuffler's pool fill (GET /v1/pools), Prometheus metrics (GET /metrics) and
the reasons of GET /readyz, and POST /v1/pools/close?through=TIME, which
closes the periods ending by then before their deadline (their late
reports refused, their pools released whole; a TIME after now needs
force=true). Pool counts and upload counters polled over time
show when reports arrive, which the shuffler exists to hide: keep that
listener private. The public listener answers GET /healthz and a GET /readyz
that names failing checks only.

Admission is on by default: serve needs --jwks FILE|URL, the JSON Web Key
Set of the identity provider that signs your app instances' JWTs, with
--jwt-issuer and --jwt-audience (the iss and an aud of your app's tokens,
so that tokens signed for other services on that key set are refused); an instance is
the JWT's iss and sub. Fake reports then need app credentials, at most one
report per credential, pool and period, and tokens are blinded: the issuer
never sees the token an instance will spend. The seed of the tokens is
DIR/admission.seed (generated at the first start, mode 0600; whoever holds it
can mint tokens). --admission open runs without: anyone who can reach the
upload port can add reports to a batch and weaken its guarantee; it is logged
at start, the scope of the guarantees says so, and GET /v1/plan answers with
Blanket-Admission: open (tokens otherwise).

The shuffler hands batches to the collector over loopback HTTP (POST
/v1/batches with a bearer token from DIR/batch.token), exactly as it would to a
remote collector, so the two roles share nothing but the wire format.

With --store postgres://…, both roles keep their state in that PostgreSQL
database instead (schemas blanket_shuffler and blanket_collector), the
report keys' private halves included unless --key-dir is given; see blanket
shuffler and blanket collector for
running each role as replicas.

An uncalibrated plan is calibrated at the first start and that calibration is
kept in DIR (restarts with the same plan reuse it). The collector's first
report key is generated at the first start (DIR/report-<id>.key, mode 0600, or
in --key-dir), rotated by --key-rotation or 'blanket collector rotate-key',
and so is the key that signs the plan (DIR/plan-signing.key), whose public half every app
pins: 'blanket collector plan-key --data DIR' prints it, and serve prints it
at start. SIGINT or SIGTERM shuts down gracefully; released batches not yet acknowledged are sent again at
the next start.`,
		Example: `  blanket serve --data /var/lib/blanket --plan plan.yaml --addr 0.0.0.0:8080 --jwks https://idp.example/.well-known/jwks.json --jwt-issuer https://idp.example --jwt-audience blanket
  blanket serve --data ./blanket-data --plan examples/plan.yaml --admission open`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command) error {
			p, logger, err := sf.setup(cmd, "the batch token and the admission seed")
			if err != nil {
				return err
			}
			if err := tf.check(); err != nil {
				return err
			}
			if err := kf.check(); err != nil {
				return err
			}
			if sf.store != "" && !pgdb.IsURL(sf.store) {
				return usageErrorf("--store %q: serve keeps its SQLite databases in --data; --store takes a PostgreSQL URL (every role then uses it, each in its own schema)", sf.store)
			}
			if err := checkAdmissionMode("admission", admits); err != nil {
				return err
			}
			tokens := admits == admission.AdmissionTokens
			switch {
			case tokens && jf.jwks == "":
				return usageErrorf("admission is on by default and needs --jwks FILE|URL, the key set of the identity provider that signs your app instances' JWTs, with --jwt-issuer and --jwt-audience, the iss and an aud of those JWTs; --admission open runs without them (anyone who can reach the upload port can then add reports)")
			case !tokens && (jf.jwks != "" || jf.issuer != "" || jf.audience != ""):
				return usageErrorf("--jwks, --jwt-issuer and --jwt-audience are for --admission tokens, not open")
			case !tokens:
				warnOpen(logger)
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			defer plugin.CleanupPlugins()
			ps := pluginOpener(e.pluginDir)
			defer ps.Close()

			token, _, err := secrets.LoadOrCreateToken(filepath.Join(sf.data, secrets.TokenFile))
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", sf.addr)
			if err != nil {
				return err
			}
			defer ln.Close()
			reg := newRegistry(ps)
			var a *auth.Authenticator
			if tokens {
				if a, err = jf.authenticator(ctx); err != nil {
					return err
				}
			}
			c, err := collector.OpenCollector(ctx, kf.options(collector.CollectorOptions{Plan: p, Dir: sf.data, Store: sf.store, Open: ps.Open, Token: token, Logger: logger.With("role", "collector"), Registerer: reg, SameOperator: true, ShufflerAdmission: admits}))
			if err != nil {
				return err
			}
			defer c.Close()
			url := loopbackURL(ln.Addr())
			earlier, err := c.EarlierPlans(ctx)
			if err != nil {
				return err
			}
			mux := http.NewServeMux()
			var verifier *issuer.Verifier
			var issuerChecks []health.Check
			var seedPath string
			if tokens {
				// The issuer grants the pools and epochs the shuffler
				// takes: the published plan's and the earlier ones'.
				is, seed, path, err := openIssuer(ctx, sf.data, "", sf.store, append([]*plan.Plan{c.Plan()}, earlier...), tf.periodGrace, logger.With("role", "issuer"))
				if err != nil {
					return err
				}
				defer is.Close()
				if verifier, err = issuer.NewVerifier(seed); err != nil {
					return err
				}
				mux.Handle("POST "+admission.TokensPath, is.Handler(a))
				issuerChecks, seedPath = []health.Check{{Name: "issuer", Ready: is.Ready}}, path
			}
			s, err := shuffler.Open(ctx, tf.options(shuffler.Options{Plan: c.Plan(), EarlierPlans: earlier, Dir: sf.data, Store: sf.store, Collector: url, Token: token, Logger: logger.With("role", "shuffler"), Registerer: reg, Admission: verifier, Open: ps.Open}))
			if err != nil {
				return err
			}
			defer s.Close()
			checks := append(append(c.Checks(), s.Checks()...), issuerChecks...)
			c.Register(mux)
			s.Register(mux)
			dashboard.Register(mux, dashboard.Roles{Collector: true})
			health.Register(mux, false, checks...)
			admin := http.NewServeMux()
			c.RegisterAPI(admin)
			s.RegisterAdmin(admin)
			dashboard.Register(admin, dashboard.Roles{Collector: true, Shuffler: true})
			registerAdminOps(admin, reg, checks...)
			adminURL, stopAdmin, err := startAdmin(logger, sf.adminAddr, admin)
			if err != nil {
				return err
			}
			defer stopAdmin()
			routes := append([]string{}, shufflerRoutes...)
			if tokens {
				routes = append(routes, issuerRoutes...)
			}
			printListening(cmd, "serve", url, append(append(routes, collectorRoutes...), publicHealthRoutes...)...)
			printListening(cmd, "serve admin", adminURL, append([]string{
				"GET  /                     the dashboard, with the shuffler's pools",
				"GET  /v1/pools             each pool's fill against n_min",
				"POST /v1/pools/close       close the periods ending by ?through= before their deadline",
			}, adminOpsRoutes...)...)
			printPlanKey(cmd, c)
			if tokens {
				printSeed(cmd, seedPath)
			}
			logger.Info("serving", "addr", ln.Addr().String(), "data", sf.data, "store", pgdb.Redact(sf.store), "epoch", c.Epoch(), "n_min", p.NMin, "metrics", metricNames(c.Plan()), "admission", admits)
			return serveHTTP(ctx, logger, ln, mux, runBoth(s.Run, c.Run))
		}),
	}
	sf.add(cmd, "127.0.0.1:8080")
	tf.add(cmd)
	kf.add(cmd)
	jf.add(cmd, " (required unless --admission open)")
	cmd.Flags().StringVar(&admits, "admission", admission.AdmissionTokens, "tokens: the shuffler takes only envelopes with an admission token from the issuer this process runs (POST /v1/tokens; needs --jwks); open: envelopes without one (anyone who can reach the upload port can add reports)")
	cmd.Flags().Lookup("data").Usage = "data directory (created, mode 0700): the SQLite databases, the report keys, the plan-signing key, the batch token and the admission seed; with --store postgres://… the token and the seed only (required)"
	addConfigFlag(cmd)
	return cmd
}

func metricNames(p *plan.Plan) string {
	var names []string
	for _, m := range p.Metrics {
		names = append(names, m.Name)
	}
	return strings.Join(names, ",")
}
