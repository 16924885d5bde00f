//go:build audit

package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/admission/issuer"
	"github.com/blanket-dp/blanket/collector"
	"github.com/blanket-dp/blanket/collector/shuffler"
	"github.com/blanket-dp/blanket/internal/pgtest"
	"github.com/blanket-dp/blanket/internal/secrets"
	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/internal/testbuild"
)

// The fleet of TestDeployReplicas: demoApps instances over demoDays days
// (active on a day with probability demoActive), batches of at least
// demoNMin, on examples/plan.yaml otherwise, its metrics travelling
// jointly as in make demo. About 13,000 messages, a few batches a day,
// under a minute for the fleet on 2 cores.
const (
	demoApps   = 40000
	demoDays   = 3
	demoActive = "0.3"
	demoNMin   = 2000
)

// TestDeployReplicas is make demo-replicas: the deployment kit run as an
// operator runs it, on one machine. It starts PostgreSQL and runs
// postgres/roles.sql; two collectors, an issuer and two shufflers, each
// with the command line, environment and credentials of its systemd unit
// (systemd/*.service: ExecStart with %i, %d, $STATE_DIRECTORY and
// $CREDENTIALS_DIRECTORY substituted, LoadCredential files copied mode
// 0400) and its config file from config/ (copied with what must differ
// on one machine rewritten: each replica's ports, /etc/blanket, the
// database's host, the identity provider); haproxy from
// haproxy/haproxy.cfg in front. It runs examples/fleet through haproxy
// (the apps' side for uploads, plans and tokens, the internal side for
// the estimates), SIGKILLs one shuffler and one collector mid-run and
// restarts them with the same command lines, and checks that every
// message the fleet sent is counted exactly once, on both collectors,
// which answer the same (counts, batches, estimates, guarantees).
//
// Two things differ from production, both stated in the rewritten
// config: the shufflers settle pools for 2 s, not a tenth of a day, so
// that batches flow while the replicas are killed (the fleet simulates
// its days in seconds); and the killed shuffler's leases of outgoing
// batches are ended by hand, as a minute passing would.
func TestDeployReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PostgreSQL, haproxy, five servers and the fleet; skipped in -short mode")
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	logf := func(format string, args ...any) {
		t.Logf("%6.1fs  "+format, append([]any{time.Since(began).Seconds()}, args...)...)
	}
	bin := testbuild.Binary(t, "github.com/blanket-dp/blanket/cmd/blanket")
	fleetBin := testbuild.Binary(t, "github.com/blanket-dp/blanket/examples/fleet")
	root := t.TempDir()
	etc := filepath.Join(root, "etc", "blanket")
	creds := filepath.Join(etc, "credentials")
	for _, d := range []string{etc, creds} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}

	// PostgreSQL and the roles, each with its password file.
	admin := pgtest.URL(t)
	urlOf := createRoles(ctx, t, admin)
	au, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	dbHost := au.Host
	for _, r := range roles {
		u, _ := url.Parse(urlOf(r, r))
		pw, _ := u.User.Password()
		line := fmt.Sprintf("%s:%s:blanket_%s:blanket_%s:%s\n", au.Hostname(), au.Port(), r, r, pw)
		if err := os.WriteFile(filepath.Join(creds, r+".pgpass"), []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The other credentials: the batch token, the admission seed.
	if _, _, err := secrets.LoadOrCreateToken(filepath.Join(creds, "batch.token")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := issuer.LoadOrCreateSeed(creds); err != nil {
		t.Fatal(err)
	}
	// The identity provider the fleet plays.
	jwtKey, jwks := filepath.Join(root, "fleet-jwt.key"), filepath.Join(etc, "jwks.json")
	if out, err := exec.CommandContext(ctx, fleetBin, "-write-jwt-key", jwtKey, "-write-jwks", jwks).CombinedOutput(); err != nil {
		t.Fatalf("fleet -write-jwt-key: %v\n%s", err, out)
	}
	// The plan: examples/plan.yaml at a smaller n_min, travelling
	// jointly (one message per instance and day), calibrated once.
	b, err := os.ReadFile("../examples/plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ re, to string }{{`(?m)^n_min: \d+$`, fmt.Sprintf("n_min: %d", demoNMin)}, {`(?m)^travel: .*$`, "travel: joint"}} {
		re := regexp.MustCompile(r.re)
		if !re.Match(b) {
			t.Fatalf("examples/plan.yaml has no line %s", r.re)
		}
		b = re.ReplaceAll(b, []byte(r.to))
	}
	if err := os.WriteFile(filepath.Join(etc, "plan.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, bin, "plan", filepath.Join(etc, "plan.yaml"), "-o", filepath.Join(etc, "plan.calibrated.yaml")).CombinedOutput(); err != nil {
		t.Fatalf("blanket plan: %v\n%s", err, out)
	}
	logf("PostgreSQL up, roles.sql run, plan calibrated")

	// Fixed addresses, as haproxy's configuration needs.
	addrs := map[string]string{}
	for _, n := range []string{"shuffler-1", "shuffler-2", "collector-1", "collector-2", "issuer-1", "apps", "internal"} {
		addrs[n] = freeAddr(t)
		if n != "apps" && n != "internal" {
			addrs[n+"-admin"] = freeAddr(t)
		}
	}
	common := []rewrite{
		{"/etc/blanket/", etc + "/"},
		{"db.internal:5432", dbHost},
	}
	k := &kit{t: t, ctx: ctx, bin: bin, root: root, etc: etc}
	k.config("collector", common, nil)
	k.config("shuffler", append(common,
		rewrite{"http://10.0.0.21:8081", "http://" + addrs["collector-1"]},
		rewrite{"http://10.0.0.22:8081", "http://" + addrs["collector-2"]},
	), []string{
		"# The fleet simulates a day in seconds: pools settle for 2 s, not a",
		"# tenth of a day, so that batches flow while replicas are killed.",
		"settle: 2s",
	})
	k.config("issuer", append(common,
		rewrite{"https://idp.example/.well-known/jwks.json", jwks},
		rewrite{"jwt-issuer: https://idp.example", "jwt-issuer: blanket-demo"},
		rewrite{"jwt-audience: blanket", "jwt-audience: blanket-demo"},
	), nil)

	var procs []*unitProc
	t.Cleanup(func() {
		for _, p := range procs {
			p.stop()
			if t.Failed() {
				t.Logf("%s's log:\n%s", p.name, tail(p.log.String(), 16<<10))
			}
		}
	})
	start := func(role, inst string) *unitProc {
		p := k.start(role, inst, addrs[role+"-"+inst], addrs[role+"-"+inst+"-admin"])
		procs = append(procs, p)
		return p
	}
	// The first collector makes the keys; the second serves the same.
	col := []*unitProc{start("collector", "1"), nil}
	col[1] = start("collector", "2")
	var planJSON []byte
	if err := servertest.FetchBody(ctx, col[0].url+"/v1/plan", &planJSON); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "plan.json"), planJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "collector", "plan-key", "--data", filepath.Join(root, "plan-key"), "--store", strings.ReplaceAll("postgres://blanket_collector@db.internal:5432/blanket_collector", "db.internal:5432", dbHost))
	cmd.Env = append(os.Environ(), "PGPASSFILE="+filepath.Join(creds, "collector.pgpass"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("blanket collector plan-key: %v", err)
	}
	planKey := strings.TrimSpace(string(out))
	start("issuer", "1")
	shf := []*unitProc{start("shuffler", "1"), start("shuffler", "2")}
	logf("2 collectors, the issuer and 2 shufflers up, each from its unit and config file")

	haproxyOut := startHAProxy(t, map[string]string{
		"BLANKET_APPS_BIND": addrs["apps"], "BLANKET_INTERNAL_BIND": addrs["internal"],
		"BLANKET_SHUFFLER_1": addrs["shuffler-1"], "BLANKET_SHUFFLER_2": addrs["shuffler-2"],
		"BLANKET_COLLECTOR_1": addrs["collector-1"], "BLANKET_COLLECTOR_2": addrs["collector-2"],
		"BLANKET_ISSUER_1": addrs["issuer-1"],
	})
	apps, internal := "http://"+addrs["apps"], "http://"+addrs["internal"]
	servertest.Poll(ctx, t, 30*time.Second, "haproxy serving the plan on both sides", func() (bool, string) {
		var b []byte
		e1 := servertest.FetchBody(ctx, apps+"/v1/plan", &b)
		e2 := servertest.FetchBody(ctx, internal+"/v1/plan", &b)
		return e1 == nil && e2 == nil, fmt.Sprintf("%v; %v\n%s", e1, e2, haproxyOut())
	})
	logf("haproxy up")

	// The fleet, through haproxy.
	var fleetOut servertest.SyncBuffer
	fleet := exec.CommandContext(ctx, fleetBin, "-endpoint", apps, "-collector", internal, "-dashboard", shf[1].admin,
		"-plan-key", planKey, "-jwt-key", jwtKey, "-n", strconv.Itoa(demoApps), "-days", strconv.Itoa(demoDays),
		"-active", demoActive, "-wait", "60s", "-timeout", "5m")
	fleet.Stdout, fleet.Stderr = &fleetOut, &fleetOut
	fleetBegan := time.Now()
	if err := fleet.Start(); err != nil {
		t.Fatal(err)
	}
	fleetDone := make(chan error, 1)
	go func() { fleetDone <- fleet.Wait() }()
	t.Cleanup(func() {
		fleet.Process.Kill()
		if t.Failed() {
			t.Logf("the fleet's output:\n%s", tail(fleetOut.String(), 16<<10))
		}
	})

	// Mid-run: once a batch has been counted, while the fleet uploads,
	// and preferably while another batch is outgoing (released, not yet
	// acknowledged: being sent), so that the kills may catch a send or
	// an ingest; after 10 s more without one, at any time.
	var (
		why          string
		firstCounted time.Time
		inFlight     bool
	)
	servertest.Poll(ctx, t, 3*time.Minute, "the fleet half-way", func() (bool, string) {
		select {
		case err := <-fleetDone:
			t.Fatalf("the fleet ended before the replicas were killed: %v\n%s", err, fleetOut.String())
		default:
		}
		var st shuffler.PoolsStatus
		if err := servertest.FetchJSON(ctx, shf[1].admin+"/v1/pools", &st); err != nil {
			return false, err.Error()
		}
		var list collector.MetricList
		if err := servertest.FetchJSON(ctx, internal+"/v1/metrics", &list); err != nil {
			return false, err.Error()
		}
		var pooled, counted int64
		for _, p := range st.Pools {
			pooled += p.Reports
		}
		for _, m := range list.Metrics {
			counted = max(counted, m.N)
		}
		why = fmt.Sprintf("%d messages pooled, %d counted, %d batches outgoing", pooled, counted, st.Outgoing)
		if counted == 0 {
			return false, why
		}
		if firstCounted.IsZero() {
			firstCounted = time.Now()
		}
		inFlight = st.Outgoing > 0
		return inFlight || time.Since(firstCounted) > 10*time.Second, why
	})
	col[0].kill()
	shf[0].kill()
	logf("SIGKILLed collector-1 and shuffler-1 (%s)", why)
	// haproxy and the surviving shuffler see them down; the fleet's
	// uploads to the dead shuffler fail and are retried.
	time.Sleep(3 * time.Second)
	n, err := expireLeases(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	col[0] = start("collector", "1")
	shf[0] = start("shuffler", "1")
	logf("restarted both from their units (%d leases of outgoing batches ended)", n)

	select {
	case err = <-fleetDone:
	case <-ctx.Done():
		t.Fatalf("the fleet did not end: %v", ctx.Err())
	}
	fleetWall := time.Since(fleetBegan)
	if err != nil {
		t.Fatalf("the fleet: %v\n%s", err, fleetOut.String())
	}
	logf("the fleet ended in %.1fs", fleetWall.Seconds())
	fo := fleetOut.String()
	sent := fleetSent(t, fo)

	// Drain: nothing pooled or outgoing in the shared store.
	servertest.Poll(ctx, t, 2*time.Minute, "every pool released and acknowledged", func() (bool, string) {
		var st shuffler.PoolsStatus
		if err := servertest.FetchJSON(ctx, shf[0].admin+"/v1/pools", &st); err != nil {
			return false, err.Error()
		}
		return len(st.Pools) == 0 && st.Outgoing == 0, fmt.Sprintf("%+v", st)
	})
	time.Sleep(time.Second) // a redundant send in flight lands first

	// Both collectors: each message counted once, the same answers.
	var answers [2][]byte
	var batches, minBatch int64 = 0, -1 // joint batches: each carries every metric
	var counted [2]map[string]int64
	for i, c := range col {
		var list collector.MetricList
		if err := servertest.FetchJSON(ctx, c.url+"/v1/metrics", &list); err != nil {
			t.Fatal(err)
		}
		counted[i] = map[string]int64{}
		var all []collector.MetricDetail
		for _, m := range list.Metrics {
			var d collector.MetricDetail
			if err := servertest.FetchJSON(ctx, c.url+"/v1/metrics/"+m.Name, &d); err != nil {
				t.Fatal(err)
			}
			all = append(all, d)
			for _, p := range d.Periods {
				counted[i][m.Name] += p.N + p.Malformed
				if i == 0 && m.Name == list.Metrics[0].Name {
					batches += p.Batches
					if g := p.Guarantee; g != nil && (minBatch < 0 || g.Messages < minBatch) {
						minBatch = g.Messages
					}
				}
			}
			if m.N+m.Malformed != sent {
				t.Errorf("%s counts %d reports of %s, the fleet sent %d", c.name, m.N+m.Malformed, m.Name, sent)
			}
		}
		if len(list.Metrics) != 3 {
			t.Errorf("%s has %d metrics, want examples/plan.yaml's 3", c.name, len(list.Metrics))
		}
		answers[i], _ = json.Marshal(all)
	}
	if !bytes.Equal(answers[0], answers[1]) {
		t.Errorf("the collectors answer differently:\n%s\n%s", answers[0], answers[1])
	}
	if minBatch < demoNMin {
		t.Errorf("the smallest batch holds %d messages, below n_min = %d", minBatch, demoNMin)
	}
	t.Logf(`make demo-replicas: the deploy kit's replicas on one machine (2 cores)
  apps simulated:          %d over %d days (active %s), plus the fleet's top-ups
  messages sent (acked):   %d
  counted, collector-1:    %v
  counted, collector-2:    %v
  batches:                 %d (each carrying the 3 metrics)
  smallest batch:          %d messages (n_min = %d)
  both collectors answer the same: %v
  killed with a batch outgoing: %v (%d leases ended by hand)
  fleet wall time:         %.1fs
  test wall time:          %.1fs`,
		demoApps, demoDays, demoActive, sent, counted[0], counted[1], batches, minBatch, demoNMin,
		bytes.Equal(answers[0], answers[1]), inFlight, n, fleetWall.Seconds(), time.Since(began).Seconds())
	t.Logf("the fleet's output:\n%s", fo)
}

// rewrite replaces old by new in a file copied from deploy/.
type rewrite struct{ old, new string }

// kit runs the deployment kit's units on one machine.
type kit struct {
	t         *testing.T
	ctx       context.Context
	bin       string
	root, etc string
}

// config copies config/ROLE.yaml to etc/ROLE.yaml with rws applied (each
// must match) and extra lines appended; start then gives each replica a
// copy with its own addr and admin-addr.
func (k *kit) config(role string, rws []rewrite, extra []string) {
	k.t.Helper()
	b, err := os.ReadFile(filepath.Join("config", role+".yaml"))
	if err != nil {
		k.t.Fatal(err)
	}
	s := string(b)
	for _, r := range rws {
		if !strings.Contains(s, r.old) {
			k.t.Fatalf("config/%s.yaml: no %q to rewrite", role, r.old)
		}
		s = strings.ReplaceAll(s, r.old, r.new)
	}
	if len(extra) > 0 {
		s += "\n" + strings.Join(extra, "\n") + "\n"
	}
	if err := os.WriteFile(filepath.Join(k.etc, role+".yaml"), []byte(s), 0o644); err != nil {
		k.t.Fatal(err)
	}
}

// unitProc is a replica started from its unit.
type unitProc struct {
	name       string
	cmd        *exec.Cmd
	log        *servertest.SyncBuffer
	done       chan struct{}
	url, admin string
}

func (p *unitProc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *unitProc) stop() {
	p.cmd.Process.Kill()
	<-p.done
}

// start runs replica inst of role as systemd would run
// systemd/blanket-ROLE@.service: its ExecStart, Environment= and
// EnvironmentFile= (when present), its credentials copied into a
// directory of its own, its state directory made, the config file
// rewritten to listen on addr and adminAddr. A unit line the test
// cannot run as is (an unknown specifier or variable) fails it.
func (k *kit) start(role, inst, addr, adminAddr string) *unitProc {
	t := k.t
	t.Helper()
	name := role + "-" + inst
	unit, err := os.ReadFile(filepath.Join("systemd", "blanket-"+role+"@.service"))
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(k.root, "var", "lib", "blanket", role+"-"+inst)
	credDir := filepath.Join(k.root, "run", "credentials", name)
	for _, d := range []string{state, credDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The replica's config: the role's, on its own ports.
	cb, err := os.ReadFile(filepath.Join(k.etc, role+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cs := regexp.MustCompile(`(?m)^addr: .*$`).ReplaceAllString(string(cb), "addr: "+addr)
	cs = regexp.MustCompile(`(?m)^admin-addr: .*$`).ReplaceAllString(cs, "admin-addr: "+adminAddr)
	cfg := filepath.Join(k.etc, name+".yaml")
	if err := os.WriteFile(cfg, []byte(cs), 0o644); err != nil {
		t.Fatal(err)
	}
	subst := func(s string) string {
		s = strings.NewReplacer(
			"%i", inst, "%d", credDir,
			"${STATE_DIRECTORY}", state, "${CREDENTIALS_DIRECTORY}", credDir,
			"/usr/local/bin/blanket", k.bin,
			"/etc/blanket/"+role+".yaml", cfg,
			"/etc/blanket/", k.etc+"/",
		).Replace(s)
		if strings.Contains(s, "%") || strings.Contains(s, "$") {
			t.Fatalf("blanket-%s@.service: %q has a specifier or variable this test does not substitute", role, s)
		}
		return s
	}
	var argv []string
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + state, "TMPDIR=" + os.TempDir()}
	sc := bufio.NewScanner(bytes.NewReader(unit))
	section := ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		key, val, _ := strings.Cut(line, "=")
		if section != "[Service]" {
			continue
		}
		switch key {
		case "ExecStart":
			if argv != nil {
				t.Fatalf("blanket-%s@.service: two ExecStart lines", role)
			}
			for _, f := range strings.Fields(val) {
				argv = append(argv, subst(f))
			}
		case "Environment":
			env = append(env, subst(val))
		case "EnvironmentFile":
			path := subst(strings.TrimPrefix(val, "-"))
			b, err := os.ReadFile(path)
			if err != nil && strings.HasPrefix(val, "-") {
				continue
			} else if err != nil {
				t.Fatalf("blanket-%s@.service: EnvironmentFile=%s: %v", role, val, err)
			}
			for _, l := range strings.Split(string(b), "\n") {
				if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
					env = append(env, l)
				}
			}
		case "LoadCredential":
			id, src, ok := strings.Cut(val, ":")
			if !ok {
				t.Fatalf("blanket-%s@.service: LoadCredential=%s: want ID:PATH", role, val)
			}
			b, err := os.ReadFile(subst(src))
			if err != nil {
				t.Fatalf("blanket-%s@.service: LoadCredential=%s: %v", role, val, err)
			}
			if err := os.WriteFile(filepath.Join(credDir, id), b, 0o400); err != nil && !os.IsExist(err) {
				t.Fatal(err)
			}
		}
	}
	if len(argv) == 0 {
		t.Fatalf("blanket-%s@.service: no ExecStart", role)
	}
	p := &unitProc{name: name, log: &servertest.SyncBuffer{}, done: make(chan struct{})}
	var stdout servertest.SyncBuffer
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = io.MultiWriter(&stdout, p.log), p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	p.url, p.admin = "http://"+addr, "http://"+adminAddr
	servertest.Poll(k.ctx, t, 2*time.Minute, name+" ready", func() (bool, string) {
		select {
		case <-p.done:
			t.Fatalf("%s (%s) exited:\n%s", name, strings.Join(argv, " "), p.log.String())
		default:
		}
		var b []byte
		err := servertest.FetchBody(k.ctx, p.url+"/readyz", &b)
		return err == nil, fmt.Sprint(err)
	})
	return p
}

// fleetSent returns the messages the fleet sent and had acknowledged:
// the run's, plus its top-ups (one message each: the plan travels
// jointly). Each message carries one report of every metric.
func fleetSent(t *testing.T, out string) int64 {
	t.Helper()
	m := regexp.MustCompile(`(\d+) messages sealed and acknowledged`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the fleet printed no message count:\n%s", out)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	for _, m := range regexp.MustCompile(`topped up with (\d+) more instances`).FindAllStringSubmatch(out, -1) {
		k, _ := strconv.ParseInt(m[1], 10, 64)
		n += k
	}
	return n
}

// expireLeases ends every lease on an outgoing batch in the shufflers'
// database (as the superuser of admin), as a minute passing would, and
// returns how many it ended.
func expireLeases(ctx context.Context, admin string) (int64, error) {
	u, err := url.Parse(admin)
	if err != nil {
		return 0, err
	}
	u.Path = "/blanket_shuffler"
	return servertest.ExpireLeases(ctx, u.String())
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
