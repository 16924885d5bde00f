package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/blanket-dp/blanket/internal/pgtest"
	"github.com/blanket-dp/blanket/internal/secrets"
	"github.com/blanket-dp/blanket/internal/servertest"
)

// serverRoles are the commands that take --config, each with an example
// file deploy/config/ROLE.yaml.
var serverRoles = []string{"serve", "shuffler", "collector", "issuer"}

// clearEnv unsets every variable a server command reads (envFlags), so
// that a test sees only the ones it sets. Tests that call it cannot run
// in parallel.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, name := range envFlags {
		t.Setenv(envVar(name), "")
	}
}

// writeConfig writes content to a file name in a temporary directory
// (mode 0600) and returns its path.
func writeConfig(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// resolve parses args for the server command role as blanket does and
// sets its flags from the environment and the config file, without
// running it. It returns the command, what it logged and applyConfig's
// error.
func resolve(t *testing.T, role string, args ...string) (*cobra.Command, string, error) {
	t.Helper()
	root := newRootCmd(defaultEnv())
	var errOut bytes.Buffer
	root.SetErr(&errOut)
	cmd, _, err := root.Find([]string{role})
	if err != nil || cmd.Name() != role {
		t.Fatalf("no command %s: %v", role, err)
	}
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	err = applyConfig(cmd)
	return cmd, errOut.String(), err
}

// TestConfigPrecedence: a flag on the command line beats its environment
// variable, which beats the config file, which beats the default, in
// every combination of the three, for a flag that reads the environment
// (token-file); one that does not (addr) ignores its variable, with a
// warning, and takes the file's value over the default.
func TestConfigPrecedence(t *testing.T) {
	for mask := range 8 {
		inFile, inEnv, onLine := mask&1 != 0, mask&2 != 0, mask&4 != 0
		clearEnv(t)
		config, want := "log-level: warn\n", ""
		var args []string
		if inFile {
			config += "token-file: /from/file\n"
			want = "/from/file"
		}
		if inEnv {
			t.Setenv("BLANKET_TOKEN_FILE", "/from/env")
			want = "/from/env"
		}
		if onLine {
			args = append(args, "--token-file", "/from/flag")
			want = "/from/flag"
		}
		path := writeConfig(t, "collector.yaml", config)
		cmd, _, err := resolve(t, "collector", append(args, "--config", path)...)
		if err != nil {
			t.Fatal(err)
		}
		f := cmd.Flags().Lookup("token-file")
		if got := f.Value.String(); got != want || f.Changed != (want != "") {
			t.Errorf("file %v, env %v, flag %v: token-file %q (changed %v), want %q", inFile, inEnv, onLine, got, f.Changed, want)
		}
		if got := cmd.Flags().Lookup("log-level").Value.String(); got != "warn" {
			t.Errorf("log-level %q from the file, want warn", got)
		}
		if got := cmd.Flags().Lookup("key-slack").Value.String(); got != "24h0m0s" {
			t.Errorf("key-slack %q, want the default 24h0m0s", got)
		}
	}

	clearEnv(t)
	t.Setenv("BLANKET_ADDR", "0.0.0.0:1")
	path := writeConfig(t, "collector.yaml", "addr: 127.0.0.1:18081\n")
	cmd, logged, err := resolve(t, "collector", "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	if got := cmd.Flags().Lookup("addr").Value.String(); got != "127.0.0.1:18081" {
		t.Errorf("addr %q, want the file's (BLANKET_ADDR is not read)", got)
	}
	if !strings.Contains(logged, "$BLANKET_ADDR is set but not read") {
		t.Errorf("no warning about BLANKET_ADDR: %q", logged)
	}
	cmd, _, err = resolve(t, "collector", "--config", path, "--addr", "127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	if got := cmd.Flags().Lookup("addr").Value.String(); got != "127.0.0.1:9" {
		t.Errorf("addr %q, want the command line's", got)
	}
	cmd, _, err = resolve(t, "collector")
	if err != nil {
		t.Fatal(err)
	}
	if f := cmd.Flags().Lookup("addr"); f.Value.String() != "127.0.0.1:8081" || f.Changed {
		t.Errorf("addr %q (changed %v) without a file, want the default", f.Value.String(), f.Changed)
	}
}

// TestConfigEnvKeepsWorking: BLANKET_STORE and BLANKET_KEY_DIR, read
// before config files existed, still set --store and --key-dir without a
// file, and BLANKET_STORE wins over a file's store.
func TestConfigEnvKeepsWorking(t *testing.T) {
	clearEnv(t)
	t.Setenv("BLANKET_STORE", "postgres://env@db/c")
	t.Setenv("BLANKET_KEY_DIR", "/env/keys")
	cmd, _, err := resolve(t, "collector")
	if err != nil {
		t.Fatal(err)
	}
	if got := cmd.Flags().Lookup("store").Value.String(); got != "postgres://env@db/c" {
		t.Errorf("store %q, want $BLANKET_STORE", got)
	}
	if got := cmd.Flags().Lookup("key-dir").Value.String(); got != "/env/keys" {
		t.Errorf("key-dir %q, want $BLANKET_KEY_DIR", got)
	}
	path := writeConfig(t, "issuer.yaml", "store: postgres://file@db/i\n")
	cmd, _, err = resolve(t, "issuer", "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	if got := cmd.Flags().Lookup("store").Value.String(); got != "postgres://env@db/c" {
		t.Errorf("issuer store %q, want $BLANKET_STORE over the file", got)
	}
}

// TestConfigRepeatedFlag: a YAML list gives a repeatable flag each of its
// values, in order; a scalar gives one; the command line replaces the
// file's list whole.
func TestConfigRepeatedFlag(t *testing.T) {
	clearEnv(t)
	for _, tc := range []struct {
		config string
		args   []string
		want   []string
	}{
		{"collector: [http://a:1, http://b:2]\n", nil, []string{"http://a:1", "http://b:2"}},
		{"collector:\n  - http://a:1\n  - http://b:2\n  - http://c:3\n", nil, []string{"http://a:1", "http://b:2", "http://c:3"}},
		{"collector: http://a:1\n", nil, []string{"http://a:1"}},
		{"collector: [http://a:1, http://b:2]\n", []string{"--collector", "http://x:9"}, []string{"http://x:9"}},
	} {
		path := writeConfig(t, "shuffler.yaml", tc.config)
		cmd, _, err := resolve(t, "shuffler", append(tc.args, "--config", path)...)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := cmd.Flags().GetStringArray("collector")
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q %v: --collector %q, want %q", tc.config, tc.args, got, tc.want)
		}
	}
}

// TestConfigRefusals: every malformed config file stops the command with
// a usage error naming the file, the line and the key.
func TestConfigRefusals(t *testing.T) {
	clearEnv(t)
	for _, tc := range []struct {
		role, config string
		want         []string // in the error, after "--config PATH"
	}{
		{"collector", "addr: 127.0.0.1:8081\nadr: 127.0.0.1:8082\n", []string{":2: unknown key adr", "blanket collector has no flag --adr", "did you mean addr?"}},
		{"collector", "admission-seed: /etc/blanket/admission.seed\n", []string{":1: admission-seed is a flag of blanket shuffler, not of blanket collector"}},
		{"issuer", "key-dir: /keys\n", []string{":1: key-dir is a flag of blanket collector and blanket serve, not of blanket issuer"}},
		{"shuffler", "mech: krr:k=2\n", []string{":1: unknown key mech"}},
		{"collector", "log-level: info\nkey-slack: soon\n", []string{`:2: key-slack "soon" is not a valid duration`}},
		{"shuffler", "max-body: 12x\n", []string{`:1: max-body "12x" is not a valid int64`}},
		{"collector", "data: /tmp\nconfig: /etc/blanket/other.yaml\n", []string{":2: config cannot be set in a config file"}},
		{"serve", "help: true\n", []string{":1: help is not a setting"}},
		{"collector", "plan: [a.yaml, b.yaml]\n", []string{":1: plan: takes one value, not a list"}},
		{"collector", "store:\n  url: postgres://x/y\n", []string{":1: store: a value expected, not a mapping"}},
		{"collector", "data:\n", []string{":1: data: no value"}},
		{"shuffler", "collector: [http://a:1, ~]\n", []string{":1: collector: line 1: a list of values expected"}},
		{"collector", "addr: 127.0.0.1:1\nlog-level: info\naddr: 127.0.0.1:2\n", []string{":3: addr is set twice (also on line 1)"}},
		{"collector", "- addr\n", []string{":1: must be a mapping of blanket collector's flag names"}},
		{"collector", "[1, 2]: x\n", []string{":1: a key must be a flag name"}},
		{"collector", "addr: [\n", []string{": yaml: line 1"}},
		{"collector", "addr: 127.0.0.1:1\n---\naddr: 127.0.0.1:2\n", []string{": one YAML document of settings expected"}},
	} {
		path := writeConfig(t, tc.role+".yaml", tc.config)
		_, stderr, code := execute(t, defaultEnv(), tc.role, "--config", path)
		for _, w := range tc.want {
			if code != exitUsage || !strings.Contains(stderr, "blanket: --config "+path) || !strings.Contains(stderr, w) {
				t.Errorf("%s %q: exit %d, %q; want exit %d, the file and %q", tc.role, tc.config, code, stderr, exitUsage, w)
			}
		}
	}
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	if _, stderr, code := execute(t, defaultEnv(), "shuffler", "--config", missing); code != exitUsage || !strings.Contains(stderr, "--config: open "+missing) {
		t.Errorf("a missing file: exit %d, %q", code, stderr)
	}
	// An empty file sets nothing: the required flags are still missing.
	empty := writeConfig(t, "empty.yaml", "# nothing yet\n")
	if _, stderr, code := execute(t, defaultEnv(), "collector", "--config", empty); code != exitUsage || !strings.Contains(stderr, "missing required flag --data") {
		t.Errorf("an empty file: exit %d, %q", code, stderr)
	}
}

// TestConfigRequiredFlags: a required flag given by the file or the
// environment counts as given.
func TestConfigRequiredFlags(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	nowhere := filepath.Join(dir, "nowhere.yaml")
	for _, tc := range []struct {
		role, config string
		want         string
	}{
		// --collector and --data from the file: --plan is what is missing.
		{"shuffler", "collector: [http://127.0.0.1:1]\n", "missing required flag --data"},
		{"shuffler", "collector: [http://127.0.0.1:1]\ndata: " + dir + "\n", "missing required flag --plan, or plan: in the --config file"},
		{"shuffler", "collector: [http://127.0.0.1:1]\ndata: " + dir + "\nplan: " + nowhere + "\n", "open " + nowhere},
		{"issuer", "data: " + dir + "\njwks: keys.json\n", "missing required flag --plan"},
		{"issuer", "data: " + dir + "\nplan: [" + nowhere + "]\n", "missing required flag --jwks"},
	} {
		path := writeConfig(t, tc.role+".yaml", tc.config)
		_, stderr, code := execute(t, defaultEnv(), tc.role, "--config", path)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s %q: exit %d, %q; want %q", tc.role, tc.config, code, stderr, tc.want)
		}
	}
}

// TestConfigPasswordWarning: a config file that others may read and whose
// store URL holds a password is warned about at start; a file of mode
// 0600, or a URL without a password, is not.
func TestConfigPasswordWarning(t *testing.T) {
	clearEnv(t)
	for _, tc := range []struct {
		store string
		mode  os.FileMode
		warn  bool
	}{
		{"postgres://blanket:hunter2@db/c", 0o644, true},
		{"postgres://blanket@db/c?password=hunter2", 0o640, true},
		{"postgres://blanket:hunter2@db/c", 0o600, false},
		{"postgres://blanket@db/c", 0o644, false},
		{"/var/lib/blanket/collector.db", 0o644, false},
	} {
		path := writeConfig(t, "collector.yaml", "store: "+tc.store+"\n")
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		_, logged, err := resolve(t, "collector", "--config", path)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(logged, "readable by others, and its store URL holds a password"); got != tc.warn {
			t.Errorf("store %s, mode %04o: warned %v, want %v (%q)", tc.store, tc.mode, got, tc.warn, logged)
		}
		if strings.Contains(logged, "hunter2") {
			t.Errorf("the warning shows the password: %q", logged)
		}
	}
}

// TestDataOptionalWithPostgres: with a PostgreSQL store the shuffler and
// the collector start without --data once --token-file says where the
// batch token is (nothing else of theirs goes to a directory), and say
// so when it is missing; serve and the issuer keep their seeds there and
// still require it, saying why. The checks stop before the database is
// reached.
func TestDataOptionalWithPostgres(t *testing.T) {
	clearEnv(t)
	t.Setenv("BLANKET_STORE", "postgres://blanket@127.0.0.1:1/none")
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"collector", "--plan", testPlanFile}, "--token-file is required without --data"},
		{[]string{"shuffler", "--plan", testPlanFile, "--collector", "http://127.0.0.1:1", "--admission", "open"}, "--token-file is required without --data"},
		{[]string{"shuffler", "--plan", testPlanFile, "--collector", "http://127.0.0.1:1", "--admission", "open", "--token-file", filepath.Join(dir, "nope")}, "--token-file " + filepath.Join(dir, "nope") + " does not exist"},
		{[]string{"serve", "--plan", testPlanFile}, "missing required flag --data: blanket serve keeps the batch token and the admission seed there, with PostgreSQL too"},
		{[]string{"issuer", "--plan", testPlanFile, "--jwks", "keys.json"}, "missing required flag --data: the issuer keeps its admission seed there"},
	} {
		_, stderr, code := execute(t, defaultEnv(), tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want %q", tc.args, code, stderr, tc.want)
		}
	}
	// With SQLite --data stays required.
	t.Setenv("BLANKET_STORE", "")
	if _, stderr, code := execute(t, defaultEnv(), "collector", "--plan", testPlanFile, "--token-file", filepath.Join(dir, "t")); code != exitUsage || !strings.Contains(stderr, "missing required flag --data") {
		t.Errorf("collector on SQLite without --data: exit %d, %q", code, stderr)
	}
}

// TestConfigExamples loads every file of deploy/config through the flag
// set of the command it is named for: a misspelt key, a value the flag
// refuses or a file of no server command fails it. Each role has one,
// with a fixed admin port on loopback and no password.
func TestConfigExamples(t *testing.T) {
	clearEnv(t)
	files, err := filepath.Glob("../../deploy/config/*")
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, path := range files {
		role, ok := strings.CutSuffix(filepath.Base(path), ".yaml")
		if !ok || !slices.Contains(serverRoles, role) {
			t.Errorf("%s: not ROLE.yaml for a server command (%v)", path, serverRoles)
			continue
		}
		seen = append(seen, role)
		cmd, logged, err := resolve(t, role, "--config", path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if logged != "" {
			t.Errorf("%s: warnings %q", path, logged)
		}
		var keys map[string]any
		if err := yaml.Unmarshal([]byte(mustRead(t, path)), &keys); err != nil {
			t.Fatal(err)
		}
		for key := range keys {
			if !cmd.Flags().Lookup(key).Changed {
				t.Errorf("%s: %s not set", path, key)
			}
		}
		admin := cmd.Flags().Lookup("admin-addr").Value.String()
		if host, port, err := net.SplitHostPort(admin); err != nil || host != "127.0.0.1" || port == "0" || !cmd.Flags().Lookup("admin-addr").Changed {
			t.Errorf("%s: admin-addr %q, want a fixed port on loopback", path, admin)
		}
		if store := cmd.Flags().Lookup("store").Value.String(); hasPassword(store) {
			t.Errorf("%s: its store URL holds a password", path)
		}
	}
	slices.Sort(seen)
	want := slices.Clone(serverRoles)
	slices.Sort(want)
	if !slices.Equal(seen, want) {
		t.Errorf("deploy/config has examples for %v, want one for each of %v", seen, want)
	}
}

// TestCollectorConfigStart starts blanket collector from a config file
// alone (SQLite on loopback): it answers /readyz on both listeners, and
// keeps its state in the file's data directory.
func TestCollectorConfigStart(t *testing.T) {
	clearEnv(t)
	planFile, _ := calibratedTestPlan(t)
	data := filepath.Join(t.TempDir(), "collector")
	path := writeConfig(t, "collector.yaml", strings.Join([]string{
		"data: " + data,
		"plan: " + planFile,
		"addr: 127.0.0.1:0",
		"admin-addr: 127.0.0.1:0",
		"log-level: warn",
		"shuffler-admission: open",
	}, "\n")+"\n")
	s := startServer(t, "collector", "--config", path)
	for _, base := range []string{s.url, s.adminURL(t)} {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s/readyz = %d", base, resp.StatusCode)
		}
	}
	if _, err := os.Stat(filepath.Join(data, secrets.TokenFile)); err != nil {
		t.Errorf("no token in the file's data directory: %v", err)
	}
}

// TestRolesOnPostgresWithoutData starts a collector and a shuffler, each
// on a PostgreSQL database of its own, from config files without data:
// both become ready (the shuffler through the collector's plan) and
// nothing is written to the working directory, where a path relative to
// an empty --data would land.
func TestRolesOnPostgresWithoutData(t *testing.T) {
	clearEnv(t)
	cstore, sstore := pgtest.URL(t), pgtest.URL(t)
	planFile, _ := calibratedTestPlan(t)
	secretDir := t.TempDir()
	token := filepath.Join(secretDir, "batch.token")
	work := t.TempDir()
	t.Chdir(work)

	t.Setenv("BLANKET_STORE", cstore)
	c := startServer(t, "collector", "--config", writeConfig(t, "collector.yaml", strings.Join([]string{
		"plan: " + planFile,
		"token-file: " + token,
		"addr: 127.0.0.1:0",
		"log-level: warn",
		"shuffler-admission: open",
	}, "\n")+"\n"))
	t.Setenv("BLANKET_STORE", sstore)
	t.Setenv("BLANKET_TOKEN_FILE", token)
	s := startServer(t, "shuffler", "--config", writeConfig(t, "shuffler.yaml", strings.Join([]string{
		"plan: " + planFile,
		"collector: [" + c.url + "]",
		"addr: 127.0.0.1:0",
		"log-level: warn",
		"admission: open",
	}, "\n")+"\n"))
	for _, base := range []string{c.url, s.url} {
		ready := func() (bool, string) {
			resp, err := http.Get(base + "/readyz")
			if err != nil {
				return false, err.Error()
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, resp.Status
		}
		servertest.Poll(context.Background(), t, 30*time.Second, "GET "+base+"/readyz", ready)
	}
	if entries, _ := os.ReadDir(work); len(entries) > 0 {
		t.Errorf("the working directory holds %v", entries)
	}
}
