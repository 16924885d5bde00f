package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/admission/auth"
	"github.com/blanket-dp/blanket/admission/issuer"
	"github.com/blanket-dp/blanket/internal/health"
	"github.com/blanket-dp/blanket/internal/pgdb"
	"github.com/blanket-dp/blanket/internal/secrets"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"

	"github.com/spf13/cobra"
)

// issuerRoutes are the issuer's public routes.
var issuerRoutes = []string{
	"POST /v1/tokens            admission tokens for authenticated app instances (Authorization: Bearer <JWT>)",
}

// forgetInterval is how often an issuer forgets the grants of periods
// past their deadline.
const forgetInterval = 5 * time.Minute

// checkAdmissionMode returns a usage error unless mode is tokens or
// open.
func checkAdmissionMode(flag, mode string) error {
	if mode != admission.AdmissionTokens && mode != admission.AdmissionOpen {
		return usageErrorf("--%s %q, must be %s or %s", flag, mode, admission.AdmissionTokens, admission.AdmissionOpen)
	}
	return nil
}

// warnOpen logs, at start, what a shuffler without admission allows.
func warnOpen(logger *slog.Logger) {
	logger.Warn("admission is open (--admission open): anyone who can reach the upload port can add reports to a batch and weaken its guarantee; keep the port reachable by your apps only, or run an issuer (--admission tokens)")
}

// jwtFlags are the flags that configure how an issuer authenticates app
// instances.
type jwtFlags struct {
	jwks, issuer, audience string
}

func (f *jwtFlags) add(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&f.jwks, "jwks", "", "the JSON Web Key Set of the identity provider that signs app instances' JWTs: a file, or an http(s) URL fetched again hourly and on an unknown key id"+what)
	cmd.Flags().StringVar(&f.issuer, "jwt-issuer", "", "the iss every app instance's JWT must carry (required with --jwks; the identity is iss and sub)")
	cmd.Flags().StringVar(&f.audience, "jwt-audience", "", "a value the aud of every app instance's JWT must name (required with --jwks)")
}

// authenticator returns the Authenticator of the flags: --jwks names a
// file, or a URL when it starts with http:// or https://. --jwt-issuer
// and --jwt-audience are required: the bound of one token per instance,
// pool and period is only as strong as the cost of an identity, and
// without them a token the provider signed for another service or tenant
// on the same key set, or one subject's tokens under two iss values, are
// more identities.
func (f *jwtFlags) authenticator(ctx context.Context) (*auth.Authenticator, error) {
	if f.issuer == "" || f.audience == "" {
		return nil, usageErrorf("--jwks needs --jwt-issuer and --jwt-audience: the iss and an aud that your identity provider puts in your app instances' JWTs, so that tokens it signed for other services or tenants on the same key set give no identity here")
	}
	o := auth.Options{Issuer: f.issuer, Audience: f.audience}
	if strings.HasPrefix(f.jwks, "http://") || strings.HasPrefix(f.jwks, "https://") {
		o.JWKSURL = f.jwks
	} else {
		if _, err := os.Stat(f.jwks); err != nil {
			return nil, usageErrorf("--jwks %s: %v", f.jwks, err)
		}
		o.JWKSFile = f.jwks
	}
	a, err := auth.New(ctx, o)
	if errors.Is(err, auth.ErrKeySet) && o.JWKSFile != "" {
		return nil, &usageError{fmt.Errorf("--jwks: %w", err)}
	}
	return a, err
}

// planAllow returns the issuer's Options.Allow for plans: a pool key is
// granted when one of the plans has its epoch, its pool and its period
// length.
func planAllow(plans []*plan.Plan) func(pool, epoch string, period report.Period) bool {
	type key struct {
		epoch, pool string
		length      int64
	}
	ok := map[key]bool{}
	for _, p := range plans {
		l := int64(p.PeriodLength() / time.Second)
		for _, pool := range p.Pools() {
			ok[key{p.Epoch(), pool, l}] = true
		}
	}
	return func(pool, epoch string, period report.Period) bool {
		return ok[key{epoch, pool, period.Length}]
	}
}

// openIssuer opens the issuer of data directory dir (its seed in
// seedFile when set, read only, else in dir/admission.seed, created at
// the first start; its grants in store, a PostgreSQL URL, or SQLite in
// dir), granting the pools of plans only,
// and starts forgetting its old grants until ctx is done. A period is
// granted until the longest of the plans' graces after it ends, or grace
// if longer (a shuffler's --period-grace): at least as long as a
// shuffler takes its reports. It returns the issuer, its seed and the
// seed's path.
func openIssuer(ctx context.Context, dir, seedFile, store string, plans []*plan.Plan, grace time.Duration, logger *slog.Logger) (*issuer.Issuer, []byte, string, error) {
	for _, p := range plans {
		grace = max(grace, p.GraceLength())
	}
	var (
		seed []byte
		path = seedFile
		err  error
	)
	if seedFile != "" {
		seed, err = loadSeedFlag("seed", seedFile)
	} else {
		var created bool
		seed, created, err = issuer.LoadOrCreateSeed(dir)
		path = filepath.Join(dir, issuer.SeedFile)
		if created {
			logger.Info("generated the admission seed; every shuffler needs a copy (--admission-seed)", "file", path)
		}
	}
	if err != nil {
		return nil, nil, "", err
	}
	is, err := issuer.New(ctx, issuer.Options{Seed: seed, Store: store, Dir: dir, Allow: planAllow(plans), Grace: grace, Logger: logger})
	if err != nil {
		return nil, nil, "", err
	}
	go func() {
		t := time.NewTicker(forgetInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, err := is.Forget(ctx); err != nil && ctx.Err() == nil {
				logger.Warn("forgetting the grants of past periods", "error", err)
			}
		}
	}()
	return is, seed, path, nil
}

// printSeed tells the operator where the admission seed is.
func printSeed(cmd *cobra.Command, path string) {
	fmt.Fprintf(cmd.OutOrStdout(), "blanket admission seed %s (give each shuffler a copy, mode 0600: --admission-seed)\n", path)
}

// loadIssuerPlan loads a plan the issuer grants: one a collector
// publishes (GET /v1/plan), calibrated, since its eps0 make its epoch, the
// one apps tag their reports with (the report key schedule is not part of
// it).
func loadIssuerPlan(path string) (*plan.Plan, error) {
	p, err := loadPlan(path)
	if err != nil {
		return nil, err
	}
	if !p.Calibrated() {
		return nil, usageErrorf("--plan %s: not a plan a collector publishes (calibrated): its epoch would not be the one apps report under; save the collector's with curl -o plan.json COLLECTOR/v1/plan", path)
	}
	return p, nil
}

func newIssuerCmd(e *env) *cobra.Command {
	var (
		data, seedFile, store, addr, adminAddr, logLevel string
		plans                                            []string
		jf                                               jwtFlags
	)
	cmd := &cobra.Command{
		Use:   "issuer --data DIR --jwks FILE|URL --jwt-issuer ISS --jwt-audience AUD --plan PLAN.json [--addr 127.0.0.1:8082]",
		Short: "Run the admission issuer: tokens for authenticated app instances",
		Long: `Run the admission issuer: an app instance POSTs to /v1/tokens, with a JWT that
your identity provider signed naming it (Authorization: Bearer), the blinded
inputs of the tokens it wants, one per pool key (pool, plan epoch and
reporting period); the issuer grants at most one token per instance and pool
key, and shufflers started with --admission tokens take an envelope only with
a token of its pool key not spent before. Fake reports then need app
credentials, at most one report per credential, pool and period.

Tokens are blinded (RFC 9497 OPRF): the issuer sees each instance's identity
and which pools and periods it asked for, never the tokens themselves, so it
cannot link a report to the instance that sent it.

--jwks is the identity provider's JSON Web Key Set (a file, or an http(s)
URL), with --jwt-issuer and --jwt-audience (required: the iss and an aud of
your app's tokens, so that tokens signed for other services are refused). An
instance is the JWT's iss and sub: give each app installation a subject of
its own.

--plan is the plan the collector publishes, saved from its GET /v1/plan
(calibrated, with its collector_key: they make its epoch); the issuer grants
only its pools, its epoch and its period length, for the current period, the
plan's grace after it (as the shuffler takes its reports) and three periods
ahead. Repeat --plan to keep granting an earlier plan while its late reports
come in.

State lives in DIR: admission.seed (generated at the first start, mode 0600,
printed at start; in DIR with --store postgres://… too), the secret from
which every pool key's OPRF key derives; each shuffler needs a copy
(--admission-seed). --seed FILE reads it from FILE instead (a systemd
credential, deploy/systemd/blanket-issuer@.service), which must exist:
it is never generated there. Whoever holds it can mint tokens: keep it as secret as
the collector's key. issuer.db (SQLite) holds the grants, identities
keyed-hashed, until their period's grace ends.

Replicas: with --store postgres://…, any number of issuer processes share one
PostgreSQL database (schema blanket_issuer) and the same seed file: an
instance is granted a pool key once whichever replica it asks.`,
		Example: `  curl -s -o plan.json http://127.0.0.1:8081/v1/plan
  blanket issuer --data ./issuer-data --plan plan.json --jwks https://idp.example/.well-known/jwks.json --jwt-issuer https://idp.example --jwt-audience blanket
  PGPASSFILE=/etc/blanket/issuer.pgpass blanket issuer --data ./i1 --plan plan.json --jwks jwks.json --jwt-issuer https://idp.example --jwt-audience blanket --store postgres://blanket_issuer@db.internal/blanket_issuer
  blanket issuer --config /etc/blanket/issuer.yaml   # deploy/config/issuer.yaml`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command) error {
			if data == "" && (seedFile == "" || !pgdb.IsURL(store)) {
				return usageErrorf("missing required flag --data: the issuer keeps its admission seed there (DIR/%s) unless --seed names it, and its grants unless --store names a PostgreSQL database", issuer.SeedFile)
			}
			if err := requireFlags(cmd, "jwks", "plan"); err != nil {
				return err
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usageErrorf("--log-level %q, must be debug, info, warn or error", logLevel)
			}
			if store != "" && !pgdb.IsURL(store) {
				return usageErrorf("--store %q: the issuer keeps its SQLite file in --data; --store takes a PostgreSQL URL (postgres://…)", store)
			}
			var ps []*plan.Plan
			for _, path := range plans {
				p, err := loadIssuerPlan(path)
				if err != nil {
					return err
				}
				ps = append(ps, p)
			}
			if data != "" {
				if err := secrets.EnsureDir(data); err != nil {
					return err
				}
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			ctx, stop := signalContext(cmd)
			defer stop()
			a, err := jf.authenticator(ctx)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			defer ln.Close()
			is, _, seedPath, err := openIssuer(ctx, data, seedFile, store, ps, 0, logger)
			if err != nil {
				return err
			}
			defer is.Close()
			checks := []health.Check{{Name: "store", Ready: is.Ready}}
			mux := http.NewServeMux()
			mux.Handle("POST "+admission.TokensPath, is.Handler(a))
			health.Register(mux, false, checks...)
			admin := http.NewServeMux()
			registerAdminOps(admin, newRegistry(nil), checks...)
			adminURL, stopAdmin, err := startAdmin(logger, adminAddr, admin)
			if err != nil {
				return err
			}
			defer stopAdmin()
			printListening(cmd, "issuer", loopbackURL(ln.Addr()), append(append([]string{}, issuerRoutes...), publicHealthRoutes...)...)
			printListening(cmd, "issuer admin", adminURL, adminOpsRoutes...)
			printSeed(cmd, seedPath)
			var epochs []string
			for _, p := range ps {
				epochs = append(epochs, p.Epoch())
			}
			logger.Info("serving", "addr", ln.Addr().String(), "data", data, "store", pgdb.Redact(store), "epochs", strings.Join(epochs, ","), "jwks", jf.jwks)
			return serveHTTP(ctx, logger, ln, mux, nil)
		}),
	}
	cmd.Flags().StringVar(&data, "data", "", "data directory (created, mode 0700): the admission seed, also with PostgreSQL, and the SQLite store of grants (required)")
	cmd.Flags().StringVar(&seedFile, "seed", "", "read the admission seed from this file (e.g. a systemd credential: ${CREDENTIALS_DIRECTORY}/admission.seed) instead of DIR/admission.seed: it must exist, mode 0600 or stricter, and is never generated; with it and --store postgres://…, --data may be left out")
	cmd.Flags().StringArrayVar(&plans, "plan", nil, "the plan the collector publishes (GET /v1/plan, saved as a file): its pools and epoch are granted; repeat for earlier plans still taking late reports (required)")
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8082", "address to listen on (host:port; port 0 picks a free one)")
	cmd.Flags().StringVar(&adminAddr, "admin-addr", "127.0.0.1:0", "the operator's listener: GET /metrics and /readyz with reasons; port 0 picks a free one, printed at start")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error (logs go to stderr)")
	cmd.Flags().StringVar(&store, "store", "", "where grants live: a PostgreSQL URL (postgres://user@host/db, schema blanket_issuer; replicas share it) or SQLite in the data directory (default $BLANKET_STORE, else SQLite)")
	jf.add(cmd, " (required)")
	addConfigFlag(cmd)
	return cmd
}

// loadVerifier reads the issuer's seed for a shuffler (--admission-seed)
// and returns its verifier.
func loadVerifier(path string) (*issuer.Verifier, error) {
	seed, err := loadSeedFlag("admission-seed", path)
	if err != nil {
		return nil, err
	}
	return issuer.NewVerifier(seed)
}

// loadSeedFlag reads the issuer's seed from path, the value of --flag
// (the issuer's --seed, a shuffler's --admission-seed): it must exist,
// readable by its owner only, and hold a seed; it is never created here.
// Each refusal is a usage error naming the flag and the file.
func loadSeedFlag(flag, path string) ([]byte, error) {
	seed, err := issuer.LoadSeed(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, usageErrorf("--%s %s does not exist: copy the issuer's %s there (mode 0600)", flag, path, issuer.SeedFile)
	}
	if errors.Is(err, secrets.ErrSecretFile) {
		return nil, &usageError{fmt.Errorf("--%s: %w", flag, err)}
	}
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	return seed, nil
}
