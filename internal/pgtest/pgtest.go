// Package pgtest gives tests a fresh, empty PostgreSQL database each, on a
// throwaway server started from Debian's postgresql package (binaries in
// /usr/lib/postgresql/<version>/bin, newest version first) on first use and
// shared by the whole test binary.
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
//	func TestStore(t *testing.T) {
//		t.Parallel()
//		pool, err := pgxpool.New(ctx, pgtest.URL(t)) // dropped when t ends
//		...
//	}
//
// With BLANKET_TEST_POSTGRES set to a server URL (postgres://user@host:5432/postgres),
// the databases are created on that server instead and no server is started.
//
// initdb and postgres refuse to run as root, and tests here usually do. As
// root, pgtest runs both as the postgres user (which the Debian package
// creates) by setting the child's credentials, and gives that user the data
// directory: a directory from os.MkdirTemp, chowned, whose parent (the
// system's temporary directory) the postgres user can traverse; a chowned
// t.TempDir would not do, its parent is root's and mode 0700. As any other
// user, pgtest runs them as that user. The server listens on a free port of
// 127.0.0.1 only, with no Unix socket (no 107-byte path limit), fsync off,
// and dies with the test process: it gets SIGQUIT when the thread that
// started it ends (Pdeathsig), and that thread is locked to a goroutine that
// waits for the server. Stop (or Main) also removes the data directory;
// the next start sweeps away those of killed test processes.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/internal/testdeps"
	"github.com/jackc/pgx/v5"
)

// EnvServer names the environment variable that, when set to a server URL,
// makes URL create its databases on that server instead of starting one.
const EnvServer = "BLANKET_TEST_POSTGRES"

// binGlob matches the server binary of every installed Debian PostgreSQL.
const binGlob = "/usr/lib/postgresql/*/bin/postgres"

// startTimeout bounds initdb plus the wait until the server accepts connections.
const startTimeout = 30 * time.Second

// settings are the server's settings for tests: no durability (the data
// is thrown away), room for the several pools that parallel tests open.
var settings = []string{
	"fsync=off", "synchronous_commit=off", "full_page_writes=off",
	"max_connections=300", "shared_buffers=64MB",
}

// durableSettings replace settings under Durable: PostgreSQL's own
// durability (every commit synced) and a production-like buffer cache.
var durableSettings = []string{"max_connections=300", "shared_buffers=256MB"}

// Durable, set before the first URL, starts the server with PostgreSQL's
// default durability (fsync, synchronous commit, full page writes)
// instead of none: for measurements (make loadtest), where a commit must
// cost what it costs in production.
var Durable bool

var (
	mu      sync.Mutex
	shared  *server // the running server, nil before the first URL and after Stop
	failed  error   // why the server could not start; later URLs fail with it
	counter int     // databases made by this process, for unique names
)

// ErrNoPostgres reports that no PostgreSQL server is installed.
var ErrNoPostgres = errors.New("no PostgreSQL server installed")

// URL returns the connection URL (postgres://...) of a new, empty database
// on the shared throwaway server of this test binary, started on first use,
// or on the server named by BLANKET_TEST_POSTGRES when that is set. The
// database is dropped (closing its connections) when t ends. URL fails t
// when no server can be had; when the postgresql package is missing it
// fails t under make test and CI and skips it otherwise
// (testdeps.Missing).
func URL(t testing.TB) string {
	t.Helper()
	admin := os.Getenv(EnvServer)
	var s *server
	if admin == "" {
		var err error
		if s, err = start(); errors.Is(err, ErrNoPostgres) {
			testdeps.Missing(t, err)
		} else if err != nil {
			t.Fatal(err)
		}
		admin = s.url("postgres")
	}
	u, err := url.Parse(admin)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("pgtest: %s=%q is not a postgres:// URL (%v)", EnvServer, admin, err)
	}
	mu.Lock()
	counter++
	name := dbName(t.Name(), counter)
	mu.Unlock()
	u.Path, u.RawPath = "/"+name, ""

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := exec1(ctx, admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		err := exec1(ctx, admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		mu.Lock()
		gone := s != nil && shared != s // Stop came first: nothing left to drop
		mu.Unlock()
		if err != nil && !gone {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return u.String()
}

// Stop stops the shared server, if one was started, and removes its data
// directory. Call it from TestMain after m.Run (Main does); without it the
// server still dies with the test process, but its directory stays in the
// system's temporary directory until a later start sweeps it (after
// staleAfter). A later URL starts a new server.
func Stop() {
	mu.Lock()
	s := shared
	shared, failed = nil, nil
	mu.Unlock()
	if s != nil {
		s.stop()
	}
}

// Main is a convenience for TestMain: os.Exit(pgtest.Main(m)) runs m's
// tests, then Stop, and returns m's exit code.
func Main(m *testing.M) int {
	defer Stop()
	return m.Run()
}

// nonWord matches what dbName drops from a test's name.
var nonWord = regexp.MustCompile(`[^a-z0-9]+`)

// dbName returns a database name unique to this process (n) and, for
// servers shared by several test processes or machines, to it (pid and
// random bytes), with the start of the test's name to tell them apart.
func dbName(test string, n int) string {
	var b [3]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	slug := strings.Trim(nonWord.ReplaceAllString(strings.ToLower(test), "_"), "_")
	if len(slug) > 30 {
		slug = slug[:30]
	}
	return fmt.Sprintf("pgtest_%d_%d_%s_%s", os.Getpid(), n, hex.EncodeToString(b[:]), slug)
}

// exec1 runs one statement on a new connection to the server at admin.
func exec1(ctx context.Context, admin, sql string) error {
	return query(ctx, admin, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, sql)
		return err
	})
}

// query calls f with a new connection to the server at admin.
func query(ctx context.Context, admin string, f func(*pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return f(conn)
}

// start returns the shared server, starting it if need be.
func start() (*server, error) {
	mu.Lock()
	defer mu.Unlock()
	if shared == nil && failed == nil {
		shared, failed = startServer()
	}
	return shared, failed
}

// binDir returns the bin directory of the newest PostgreSQL that matches
// pattern (binGlob, or another in tests).
func binDir(pattern string) (string, error) {
	paths, _ := filepath.Glob(pattern) // the pattern is well formed
	if len(paths) == 0 {
		return "", fmt.Errorf("pgtest: %w (%s): install Debian's postgresql package (apt-get install -y postgresql, or make deps, as root) or set %s to a server URL", ErrNoPostgres, pattern, EnvServer)
	}
	version := func(p string) []int { // "/usr/lib/postgresql/15/bin/postgres" -> [15]
		var v []int
		for f := range strings.SplitSeq(filepath.Base(filepath.Dir(filepath.Dir(p))), ".") {
			n, _ := strconv.Atoi(f)
			v = append(v, n)
		}
		return v
	}
	newest := slices.MaxFunc(paths, func(a, b string) int { return slices.Compare(version(a), version(b)) })
	return filepath.Dir(newest), nil
}

// server is a running throwaway PostgreSQL.
type server struct {
	cmd  *exec.Cmd
	dir  string        // data directory
	port int           // TCP port on 127.0.0.1
	done chan struct{} // closed when the server has exited
}

// url returns the URL of database db on s.
func (s *server) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// startServer initialises a data directory and starts a server on it,
// retrying with another port when the chosen one was taken meanwhile.
func startServer() (*server, error) {
	bin, err := binDir(binGlob)
	if err != nil {
		return nil, err
	}
	attr := &syscall.SysProcAttr{Setpgid: true}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgtest: running as root, PostgreSQL must run as the postgres user (created by Debian's postgresql package): %w", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	sweep()
	dir, err := os.MkdirTemp("", "blanket-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if c := attr.Credential; c != nil {
		if err := os.Chown(dir, int(c.Uid), int(c.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: %w", err)
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", dir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir, initdb.Env = dir, append(os.Environ(), "LC_ALL=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: attr.Credential}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		if attr.Credential != nil {
			err = fmt.Errorf("%w (as root, initdb runs as the postgres user, who must reach %s: set TMPDIR to a directory like /tmp)", err, dir)
		}
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	attr.Pdeathsig = syscall.SIGQUIT
	for attempt := 1; ; attempt++ {
		s, err := launch(bin, dir, attr)
		if err == nil {
			return s, nil
		}
		if attempt == 3 || !errors.Is(err, errPortTaken) {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

// staleAfter is how long a data directory without a server stays before
// sweep takes it for one left by a killed test process.
const staleAfter = 10 * time.Minute

// sweep removes the data directories left behind by test processes that
// were killed (a -timeout panic, a ^C) before Stop: their server died with
// them, by Pdeathsig, and removed its postmaster.pid, so a directory is
// stale once it has none and has not changed for staleAfter, or when its
// postmaster.pid names a process that is gone. Errors are ignored: the
// directories of other users are theirs to sweep.
func sweep() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "blanket-pg-*"))
	for _, dir := range dirs {
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
		switch {
		case err == nil:
			pid, _ := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
			if pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
				continue
			}
		case errors.Is(err, fs.ErrNotExist):
			if time.Since(fi.ModTime()) < staleAfter {
				continue
			}
		default:
			continue
		}
		os.RemoveAll(dir)
	}
}

// errPortTaken reports that the server could not bind its port.
var errPortTaken = errors.New("pgtest: port taken")

// launch starts postgres on dir and a free port and waits until it accepts
// connections. The server is started from a goroutine locked to its thread
// that waits for it: Pdeathsig fires when the forking thread ends, which
// would otherwise be whenever the runtime retires it.
func launch(bin, dir string, attr *syscall.SysProcAttr) (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("pgtest: find a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	args := []string{"-D", dir, "-k", "", "-p", strconv.Itoa(port), "-c", "listen_addresses=127.0.0.1"}
	set := settings
	if Durable {
		set = durableSettings
	}
	for _, kv := range set {
		args = append(args, "-c", kv)
	}
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	defer logf.Close() // the server has its own copy
	s := &server{dir: dir, port: port, done: make(chan struct{})}
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), args...)
	s.cmd.Dir, s.cmd.Env = dir, append(os.Environ(), "LC_ALL=C")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = attr
	started := make(chan error)
	go func() {
		// The thread stays locked (and so is never reused or retired)
		// until the server has exited.
		runtime.LockOSThread()
		err := s.cmd.Start()
		started <- err
		if err == nil {
			s.cmd.Wait()
		}
		close(s.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("pgtest: start postgres: %w", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		// The data directory tells this server from another one that
		// took the port first (this one then exits: could not bind).
		var d string
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		err := query(cctx, s.url("postgres"), func(conn *pgx.Conn) error {
			return conn.QueryRow(cctx, "SHOW data_directory").Scan(&d)
		})
		ccancel()
		if err == nil && d == dir {
			return s, nil
		} else if err == nil {
			err = fmt.Errorf("port %d answered by the server of %s", port, d)
		}
		select {
		case <-s.done:
			if strings.Contains(s.log(), "could not bind") {
				return nil, fmt.Errorf("%w: %d\n%s", errPortTaken, port, s.log())
			}
			return nil, fmt.Errorf("pgtest: postgres exited (%v):\n%s", s.cmd.ProcessState, s.log())
		case <-ctx.Done():
			s.stopProcess()
			return nil, fmt.Errorf("pgtest: postgres not ready after %v (last error: %v):\n%s", startTimeout, err, s.log())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// log returns what the server has written to its log, postgres.log in
// its data directory.
func (s *server) log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
	return string(b)
}

// stop stops the server and removes its data directory.
func (s *server) stop() {
	s.stopProcess()
	os.RemoveAll(s.dir)
}

// stopProcess asks the server for a fast shutdown (SIGINT: abort the
// sessions, no wait for clients) and kills its process group if it has
// not exited within 10 s.
func (s *server) stopProcess() {
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}
