// Package deploy holds the operator's deployment kit (no Go code): the
// PostgreSQL roles (postgres/), the example configuration of each role
// (config/), and their tests, which run every file here as an operator
// would.
package deploy

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/admission/issuer"
	"github.com/blanket-dp/blanket/collector"
	"github.com/blanket-dp/blanket/collector/shuffler"
	"github.com/blanket-dp/blanket/internal/pgtest"
	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/internal/testbuild"
	"github.com/jackc/pgx/v5"
)

// TestMain stops the throwaway PostgreSQL server, if a test started one,
// and removes the binaries the tests built.
func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	testbuild.Remove()
	os.Exit(code)
}

// roles are the Blanket roles of postgres/roles.sql: each has the login
// role and the database blanket_ROLE.
var roles = []string{"shuffler", "collector", "issuer"}

// TestRolesSQL runs postgres/roles.sql with psql, as the operator's guide
// says, on a throwaway server, then checks least privilege: each role
// connects to its own database and opens its real store there (the
// shuffler's, the collector's and the issuer's, each creating its schema
// as owner), and is refused the other two databases.
func TestRolesSQL(t *testing.T) {
	admin := pgtest.URL(t) // a superuser's URL on the server
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	urlOf := createRoles(ctx, t, admin)
	for _, r := range roles {
		for _, db := range roles {
			conn, err := pgx.Connect(ctx, urlOf(r, db))
			if err == nil {
				conn.Close(ctx)
			}
			switch {
			case r == db && err != nil:
				t.Errorf("%s cannot connect to its own database: %v", r, err)
			case r != db && err == nil:
				t.Errorf("%s connects to the %s's database", r, db)
			case r != db && !strings.Contains(err.Error(), "permission denied"):
				t.Errorf("%s to the %s's database: %v, want permission denied", r, db, err)
			}
		}
	}

	// Each role's real store, on its own database as its own role.
	p := servertest.Plan(t, 10)
	s, err := shuffler.Open(ctx, shuffler.Options{Plan: p, Store: urlOf("shuffler", "shuffler"), Collector: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatalf("the shuffler's store as blanket_shuffler: %v", err)
	}
	s.Close()
	c, err := collector.OpenCollector(ctx, collector.CollectorOptions{Plan: p, Dir: t.TempDir(), Store: urlOf("collector", "collector"), Open: servertest.OpenBuiltin})
	if err != nil {
		t.Fatalf("the collector's store as blanket_collector: %v", err)
	}
	c.Close()
	seed := make([]byte, issuer.SeedSize)
	is, err := issuer.New(ctx, issuer.Options{Seed: seed, Store: urlOf("issuer", "issuer")})
	if err != nil {
		t.Fatalf("the issuer's store as blanket_issuer: %v", err)
	}
	if err := is.Ready(ctx); err != nil {
		t.Error(err)
	}
	is.Close()
}

// createRoles runs postgres/roles.sql with psql on the server of admin (a
// superuser's URL), with a password per role, and returns the URL of
// role's login on db's database. The roles and databases are dropped
// when t ends.
func createRoles(ctx context.Context, t *testing.T, admin string) func(role, db string) string {
	t.Helper()
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Skip("psql is not installed (Debian's postgresql-client)")
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(ctx)
		for _, r := range roles {
			for _, q := range []string{"DROP DATABASE IF EXISTS blanket_" + r + " WITH (FORCE)", "DROP ROLE IF EXISTS blanket_" + r} {
				if _, err := conn.Exec(ctx, q); err != nil {
					t.Error(err)
				}
			}
		}
	})
	cmd := exec.CommandContext(ctx, psql, admin, "-q", "-v", "ON_ERROR_STOP=1",
		"-v", "shuffler_password=s3cret-s", "-v", "collector_password=s3cret-c", "-v", "issuer_password=s3cret-i",
		"-f", "postgres/roles.sql")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("psql -f postgres/roles.sql: %v\n%s", err, out)
	}
	return func(role, db string) string {
		u, err := url.Parse(admin)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword("blanket_"+role, "s3cret-"+role[:1])
		u.Path = "/blanket_" + db
		return u.String()
	}
}
