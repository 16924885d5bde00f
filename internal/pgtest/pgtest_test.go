package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// connect opens a connection to u, closed when t ends.
func connect(t *testing.T, u string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), u)
	if err != nil {
		t.Fatalf("connect %s: %v", u, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// dbOf returns the database name in u.
func dbOf(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(p.Path, "/")
}

// exists reports whether database name exists, asked through conn.
func exists(t *testing.T, conn *pgx.Conn, name string) bool {
	t.Helper()
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func TestTwoDatabases(t *testing.T) {
	start := time.Now()
	u1 := URL(t)
	mid := time.Now()
	u2 := URL(t)
	t.Logf("URL took %v, then %v (the first one includes the server's start unless an earlier test started it)", mid.Sub(start), time.Since(mid))
	if dbOf(t, u1) == dbOf(t, u2) {
		t.Fatalf("two URLs name the same database: %s, %s", u1, u2)
	}
	c1, c2 := connect(t, u1), connect(t, u2)
	for _, c := range []struct {
		conn *pgx.Conn
		url  string
	}{{c1, u1}, {c2, u2}} {
		var db string
		var tables int
		err := c.conn.QueryRow(t.Context(), `SELECT current_database(),
			(SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%')`).Scan(&db, &tables)
		if err != nil {
			t.Fatal(err)
		}
		if db != dbOf(t, c.url) || tables != 0 {
			t.Errorf("%s: connected to %q with %d relations, want %q with none", c.url, db, tables, dbOf(t, c.url))
		}
	}
	if _, err := c1.Exec(t.Context(), "CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		conn *pgx.Conn
		want bool
	}{{c1, true}, {c2, false}} {
		var found bool
		if err := c.conn.QueryRow(t.Context(), "SELECT to_regclass('public.t') IS NOT NULL").Scan(&found); err != nil {
			t.Fatal(err)
		}
		if found != c.want {
			t.Errorf("table t in %s: %v, want %v", c.conn.Config().Database, found, c.want)
		}
	}
}

func TestDroppedAfterCleanup(t *testing.T) {
	sibling := connect(t, URL(t))
	var name string
	var leftOpen *pgx.Conn
	t.Run("inner", func(t *testing.T) {
		u := URL(t)
		name = dbOf(t, u)
		// Left open on purpose: the drop must close it (WITH (FORCE)).
		var err error
		if leftOpen, err = pgx.Connect(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		if _, err := leftOpen.Exec(t.Context(), "CREATE TABLE t (id int)"); err != nil {
			t.Fatal(err)
		}
		if !exists(t, sibling, name) {
			t.Fatalf("database %s absent during its test", name)
		}
	})
	if leftOpen == nil {
		t.FailNow()
	}
	defer leftOpen.Close(context.Background())
	if exists(t, sibling, name) {
		t.Errorf("database %s still there after its test", name)
	}
	if err := leftOpen.Ping(t.Context()); err == nil {
		t.Errorf("connection to the dropped database %s still works", name)
	}
}

// TestEnvServer points BLANKET_TEST_POSTGRES at the shared server as
// another role, so that a database made there (owned by that role) is told
// apart from one made on the shared server directly (owned by postgres).
func TestEnvServer(t *testing.T) {
	base := URL(t)
	admin := connect(t, base)
	role := "pgtest_role_" + fmt.Sprint(time.Now().UnixNano())
	if _, err := admin.Exec(t.Context(), "CREATE ROLE "+role+" LOGIN CREATEDB"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })

	env, _ := url.Parse(base)
	env.User, env.Path = url.User(role), "/postgres"
	var name string
	t.Run("env", func(t *testing.T) {
		t.Setenv(EnvServer, env.String())
		u := URL(t)
		name = dbOf(t, u)
		p, _ := url.Parse(u)
		if p.User.Username() != role || p.Host != env.Host || p.RawQuery != env.RawQuery {
			t.Errorf("URL with %s=%s gave %s: want its user, host and query", EnvServer, env, u)
		}
		conn := connect(t, u)
		var owner string
		if err := conn.QueryRow(t.Context(), "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()").Scan(&owner); err != nil {
			t.Fatal(err)
		}
		if owner != role {
			t.Errorf("database %s owned by %s, want %s (made through %s)", name, owner, role, EnvServer)
		}
	})
	if name == "" {
		t.FailNow()
	}
	if exists(t, admin, name) {
		t.Errorf("database %s made through %s still there after its test", name, EnvServer)
	}
}

func TestParallel(t *testing.T) {
	const n = 6
	var mu sync.Mutex
	names := map[string]bool{}
	t.Run("group", func(t *testing.T) {
		for i := range n {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				u := URL(t)
				if _, err := connect(t, u).Exec(t.Context(), "CREATE TABLE t (id int)"); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				names[dbOf(t, u)] = true
				mu.Unlock()
			})
		}
	})
	if len(names) != n {
		t.Errorf("%d parallel tests got %d distinct databases: %v", n, len(names), names)
	}
}

func TestBinDir(t *testing.T) {
	_, err := binDir("/nonexistent/*/bin/postgres")
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y postgresql") {
		t.Errorf("binDir without binaries: %v, want an error naming the package", err)
	}
	root := t.TempDir()
	for _, v := range []string{"9.6", "15", "10"} {
		bin := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, "postgres"), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := binDir(filepath.Join(root, "*", "bin", "postgres"))
	if want := filepath.Join(root, "15", "bin"); got != want || err != nil {
		t.Errorf("binDir = %q, %v; want %q (the newest version)", got, err, want)
	}
}

func BenchmarkURL(b *testing.B) {
	URL(b) // start the server outside the timing
	b.ResetTimer()
	for b.Loop() {
		URL(b)
	}
}
