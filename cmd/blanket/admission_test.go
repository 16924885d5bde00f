package main

// Attacks on admission, run against real blanket processes over loopback
// (the binary built by internal/testbuild): a flood of envelopes without
// valid tokens into a period of 'blanket serve', replayed and misused
// tokens, and kill -9 of 'blanket issuer' and 'blanket shuffler' while
// apps fetch and spend tokens.

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/admission/issuer"
	"github.com/blanket-dp/blanket/collector"
	"github.com/blanket-dp/blanket/collector/shuffler"
	"github.com/blanket-dp/blanket/internal/pgtest"
	"github.com/blanket-dp/blanket/internal/testbuild"
	"github.com/blanket-dp/blanket/sdk/report"
)

// blanketPkg is the package of the binary the process tests run.
const blanketPkg = "github.com/blanket-dp/blanket/cmd/blanket"

// admissionPlanYAML is the process tests' plan: the collector's test
// plan with n_min = %d (calibrated at start, well under a second).
const admissionPlanYAML = `target: {eps: 1, delta: 1e-6}
n_min: %d
travel: separate
metrics:
  - name: ui/screen
    plugin: krr
    categories: [home, search, settings, profile]
    other: other
  - name: net/latency_ms
    plugin: summation
    lo: 0
    hi: 1000
    params: {k: "10"}
`

// writePlan writes the process tests' plan with n_min = nMin into dir.
func writePlan(t *testing.T, dir string, nMin int) string {
	t.Helper()
	path := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, admissionPlanYAML, nMin), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// proc is a blanket server process a test started.
type proc struct {
	name       string
	cmd        *exec.Cmd
	out, log   *syncBuffer
	done       chan struct{}
	url, admin string
}

// startProc starts bin with args and waits until it prints where it
// listens, publicly and for the operator. The process is killed when the
// test ends, if it still runs.
func startProc(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), out: &syncBuffer{}, log: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s stderr:\n%s", p.name, p.log)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for p.url == "" || p.admin == "" {
		for _, line := range strings.Split(p.out.String(), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) == 5 && f[2] == "listening":
				p.url = f[4]
			case len(f) == 6 && f[2] == "admin" && f[3] == "listening":
				p.admin = f[5]
			}
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited before listening: %s", name, p.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not print where it listens: %s", name, p.log)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return p
}

// kill9 kills the process with SIGKILL, as a crash would, and waits.
func (p *proc) kill9(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// idp is a test identity provider: an ES256 key whose key set is in a
// file, and the JWTs it signs for app instances.
type idp struct {
	signer jose.Signer
	jwks   string
}

func newIDP(t *testing.T) *idp {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, set, 0o644); err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &idp{signer: signer, jwks: path}
}

// jwt returns a JWT naming instance sub, for audience blanket, valid for
// an hour.
func (i *idp) jwt(t *testing.T, sub string) string {
	t.Helper()
	tok, err := jwt.Signed(i.signer).Claims(jwt.Claims{Issuer: "https://idp.test", Subject: sub,
		Audience: jwt.Audience{"blanket"}, Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// askTokens POSTs req to the issuer at base with bearer and returns its
// 200 answer; any other status, or no answer, is an error (safe for any
// goroutine).
func askTokens(base, bearer string, req *admission.TokenRequest) (*admission.TokenResponse, error) {
	body, _ := json.Marshal(req)
	r, err := http.NewRequest(http.MethodPost, base+admission.TokensPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	r.Header.Set("Authorization", "Bearer "+bearer)
	r.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST %s: %s: %s", admission.TokensPath, resp.Status, b)
	}
	var out admission.TokenResponse
	return &out, json.Unmarshal(b, &out)
}

// instanceToken fetches, as instance sub does, the token of poolKey from
// the issuer at base.
func instanceToken(t *testing.T, id *idp, base, sub, poolKey string) []byte {
	t.Helper()
	p, req, err := admission.Blind([]string{poolKey})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := askTokens(base, id.jwt(t, sub), req)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := admission.Finalize(p, resp)
	if err != nil {
		t.Fatalf("%s's token of %s: %v", sub, poolKey, err)
	}
	b, _ := toks[0].MarshalBinary()
	return b
}

// uploadTo POSTs envs to the shuffler at base and returns its 202
// answer; any other status, or no answer, is an error (safe for any
// goroutine).
func uploadTo(base string, envs []report.Envelope) (shuffler.UploadResult, error) {
	var res shuffler.UploadResult
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Post(base+"/v1/reports", "application/octet-stream", bytes.NewReader(report.EncodeEnvelopes(envs)))
	if err != nil {
		return res, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return res, fmt.Errorf("upload: %s: %s", resp.Status, b)
	}
	return res, json.Unmarshal(b, &res)
}

// closePeriodsAt closes, on the shuffler whose admin listener is admin,
// the periods of its pooled reports ending in the next two days.
func closePeriodsAt(t *testing.T, admin string) {
	t.Helper()
	through := time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)
	resp, err := http.Post(admin+"/v1/pools/close?force=true&through="+through, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("closing the periods: %s", resp.Status)
	}
}

// periodCount waits until the collector at base counts want reports of
// metric in its one period, failing after a minute or if it counts more,
// and returns that period.
func periodCount(t *testing.T, base, metric string, want int) collector.PeriodEstimate {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var d collector.MetricDetail
		if code := getJSON(t, base+"/v1/metrics/"+metric, &d); code == http.StatusOK && len(d.Periods) == 1 {
			if n := d.Periods[0].N; n > int64(want) {
				t.Fatalf("the collector counts %d reports of %s, more than the %d admitted", n, metric, want)
			} else if n == int64(want) {
				return d.Periods[0]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached %d reports: %+v", metric, want, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scrape returns the admin listener's GET /metrics.
func scrape(t *testing.T, admin string) string {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// refusals returns the codes of res's refused envelopes, by index.
func refusals(res shuffler.UploadResult) map[int]string {
	out := map[int]string{}
	for _, e := range res.Errors {
		out[e.Index] = e.Code
	}
	return out
}

// TestServeAdmissionRefusesFakes floods a period of 'blanket serve' with
// admission on (a real process, --jwks a file) with 10·n_min envelopes
// sealed as apps seal them, half without a token and half with bytes that
// are not one, and sends the n_min reports of n_min instances, each with
// the token it got from POST /v1/tokens with its JWT. Then it tries a
// token replayed with another report, one of another pool, one of the
// next period, a forged one, and an instance asking for a second token.
// Every fake is refused with its code and counted in Prometheus, the
// period's batch holds the admitted reports only, and the collector's n
// for the period is the admitted count, its estimates those of the
// admitted values (the fakes all say "home").
func TestServeAdmissionRefusesFakes(t *testing.T) { admissionFlood(t, 20) }

// admissionFlood runs TestServeAdmissionRefusesFakes with a plan of
// n_min nMin.
func admissionFlood(t *testing.T, nMin int) {
	bin := testbuild.Binary(t, blanketPkg)
	dir := t.TempDir()
	id := newIDP(t)
	s := startProc(t, "serve", bin, "serve", "--data", filepath.Join(dir, "data"), "--plan", writePlan(t, dir, nMin), "--addr", "127.0.0.1:0",
		"--jwks", id.jwks, "--jwt-audience", "blanket", "--jwt-issuer", "https://idp.test", "--release-interval", "50ms", "--log-level", "warn")
	if !strings.Contains(s.out.String(), "blanket admission seed "+filepath.Join(dir, "data", issuer.SeedFile)) {
		t.Errorf("serve does not print the seed's path:\n%s", s.out)
	}
	wantAdmissionHeader(t, "GET /v1/plan", s.url)

	vals, truth := values(nMin)
	admitted := appReports(t, s.url, "ui/screen", vals)
	key := admitted[0].Metric
	for i := range admitted {
		admitted[i].Token = instanceToken(t, id, s.url, fmt.Sprint("instance-", i), key)
	}
	fakeVals := make([]string, 10*nMin)
	for i := range fakeVals {
		fakeVals[i] = "home"
	}
	fakes := appReports(t, s.url, "ui/screen", fakeVals)
	for i := range fakes {
		if i%2 == 1 {
			fakes[i].Token = make([]byte, admission.TokenSize)
			rand.Read(fakes[i].Token)
		}
	}
	for lo := 0; lo < len(fakes); lo += 50 {
		res := upload(t, s.url, fakes[lo:lo+50])
		if res.Accepted != 0 || res.Rejected != 50 {
			t.Fatalf("fakes %d to %d: %+v; want all refused", lo, lo+50, res)
		}
		for i, code := range refusals(res) {
			want := admission.UploadTokenMissing
			if (lo+i)%2 == 1 {
				want = admission.UploadTokenInvalid
			}
			if code != want {
				t.Fatalf("fake %d: code %q, want %q", lo+i, code, want)
			}
		}
	}
	if res := upload(t, s.url, admitted); res.Accepted != nMin {
		t.Fatalf("admitted reports: %+v", res)
	}

	// Misused tokens: one replayed with another report, one of the other
	// pool, one of the next period (granted ahead), a forged one.
	pool, epoch, period, err := report.ParsePoolKey(key)
	if err != nil {
		t.Fatal(err)
	}
	next := report.Period{Start: period.End(), Length: period.Length}
	misused := appReports(t, s.url, "ui/screen", []string{"home", "home", "home", "home"})
	misused[0].Token = admitted[0].Token
	misused[1].Token = instanceToken(t, id, s.url, "instance-0", report.PeriodPoolKey("net/latency_ms", epoch, period))
	misused[2].Token = instanceToken(t, id, s.url, "instance-0", report.PeriodPoolKey(pool, epoch, next))
	misused[3].Token = make([]byte, admission.TokenSize)
	rand.Read(misused[3].Token)
	res := upload(t, s.url, misused)
	want := map[int]string{0: admission.UploadTokenSpent, 1: admission.UploadTokenInvalid, 2: admission.UploadTokenInvalid, 3: admission.UploadTokenInvalid}
	if got := refusals(res); res.Accepted != 0 || !mapsEqual(got, want) {
		t.Fatalf("misused tokens: %+v; want codes %v", res, want)
	}
	// An instance that has its token asks for another (a new blinded
	// element): refused.
	p2, req2, err := admission.Blind([]string{key})
	if err != nil {
		t.Fatal(err)
	}
	answer, err := askTokens(s.url, id.jwt(t, "instance-1"), req2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admission.Finalize(p2, answer); err == nil || answer.Evaluations[0].Refused != admission.RefusedAlreadyGranted {
		t.Fatalf("a second token for instance-1: %+v, %v; want %s", answer.Evaluations, err, admission.RefusedAlreadyGranted)
	}

	closePeriodsAt(t, s.admin)
	e := periodCount(t, s.url, "ui/screen", nMin)
	// The estimates are those of the admitted values: unbiased, about
	// normal with the reported variance; z at a 1e-6 false-failure rate
	// split over the buckets.
	z := distuv.UnitNormal.Quantile(1 - 1e-6/float64(2*len(e.Estimates)))
	for _, it := range e.Estimates {
		if dev := math.Abs(it.Value - float64(truth[it.Label])); dev > z*math.Sqrt(it.Variance) {
			t.Errorf("%s: estimate %.1f, admitted truth %d, sd %.1f", it.Label, it.Value, truth[it.Label], math.Sqrt(it.Variance))
		}
	}
	metrics := scrape(t, s.admin)
	for _, line := range []string{
		fmt.Sprintf(`blanket_shuffler_envelopes_rejected_total{reason="token_missing"} %d`, 5*nMin),
		fmt.Sprintf(`blanket_shuffler_envelopes_rejected_total{reason="token_invalid"} %d`, 5*nMin+3),
		`blanket_shuffler_envelopes_rejected_total{reason="token_spent"} 1`,
		fmt.Sprintf(`blanket_shuffler_envelopes_total{result="accepted"} %d`, nMin),
	} {
		if !strings.Contains(metrics, line) {
			t.Errorf("GET /metrics lacks %q", line)
		}
	}
	var list collector.MetricList
	getJSON(t, s.url+"/v1/metrics", &list)
	if list.Scope.Admission != admission.AdmissionTokens || !slices.ContainsFunc(list.Scope.Provided, func(p string) bool { return strings.Contains(p, "admission token") }) {
		t.Errorf("scope %+v; want admission tokens, said in words", list.Scope)
	}
}

// mapsEqual reports whether a and b hold the same pairs.
func mapsEqual(a, b map[int]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestIssuerAndShufflerSurviveKill runs the roles apart, as real
// processes: a collector, 'blanket issuer' and 'blanket shuffler
// --admission tokens' with the issuer's seed. Instances ask for their
// tokens concurrently while the issuer is killed with SIGKILL, then
// upload their reports concurrently while the shuffler is; both restart
// on their data directories. No instance gets a second token (the same
// request again is answered, a new one refused, whether or not its grant
// committed before the kill), no token is taken twice across the
// shuffler's restart (every retried envelope is accepted or a duplicate,
// never spent; every token on another report is refused as spent), and
// the collector counts exactly one report per instance.
func TestIssuerAndShufflerSurviveKill(t *testing.T) {
	killRoles(t, 30, 20, 1)
}

// killRoles runs TestIssuerAndShufflerSurviveKill with instances app
// instances, a plan of n_min nMin, and kills kill cycles of each role.
func killRoles(t *testing.T, instances, nMin, kills int) {
	bin := testbuild.Binary(t, blanketPkg)
	dir := t.TempDir()
	id := newIDP(t)
	planFile := writePlan(t, dir, nMin)
	cdir, idir, sdir := filepath.Join(dir, "collector"), filepath.Join(dir, "issuer"), filepath.Join(dir, "shuffler")
	c := startProc(t, "collector", bin, "collector", "--data", cdir, "--plan", planFile, "--addr", "127.0.0.1:0", "--log-level", "warn")
	// The issuer grants the plan the collector publishes.
	resp, err := http.Get(c.url + "/v1/plan")
	if err != nil {
		t.Fatal(err)
	}
	published, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	publishedFile := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(publishedFile, published, 0o644); err != nil {
		t.Fatal(err)
	}
	issuerArgs := []string{"issuer", "--data", idir, "--plan", publishedFile, "--jwks", id.jwks, "--jwt-audience", "blanket", "--jwt-issuer", "https://idp.test", "--addr", "127.0.0.1:0", "--log-level", "warn"}
	is := startProc(t, "issuer", bin, issuerArgs...)
	seedFile := filepath.Join(idir, issuer.SeedFile)
	if !strings.Contains(is.out.String(), "blanket admission seed "+seedFile) {
		t.Errorf("the issuer does not print the seed's path:\n%s", is.out)
	}
	shufflerArgs := []string{"shuffler", "--data", sdir, "--plan", planFile, "--collector", c.url, "--token-file", filepath.Join(cdir, "batch.token"),
		"--admission-seed", seedFile, "--addr", "127.0.0.1:0", "--release-interval", "50ms", "--log-level", "warn"}
	sh := startProc(t, "shuffler", bin, shufflerArgs...)
	wantAdmissionHeader(t, "the shuffler's relayed plan", sh.url)

	vals, _ := values(instances)
	envs := appReports(t, sh.url, "ui/screen", vals)
	key := envs[0].Metric
	seed, err := issuer.LoadSeed(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := issuer.NewVerifier(seed)
	if err != nil {
		t.Fatal(err)
	}

	// Tokens. Each instance persisted its pending state before asking
	// (admission.Pending): after a failure it sends the same request.
	pending := make([]*admission.Pending, instances)
	reqs := make([]*admission.TokenRequest, instances)
	tokens := make([][]byte, instances)
	for i := range pending {
		if pending[i], reqs[i], err = admission.Blind([]string{key}); err != nil {
			t.Fatal(err)
		}
	}
	sub := func(i int) string { return fmt.Sprint("instance-", i) }
	var mu sync.Mutex
	// ask has instance i ask the issuer at base once; it reports whether
	// it got its token.
	ask := func(i int, base string) bool {
		answer, err := askTokens(base, id.jwt(t, sub(i)), reqs[i])
		if err != nil {
			return false // the issuer died under it, or refused it for now
		}
		toks, err := admission.Finalize(pending[i], answer)
		if err != nil {
			t.Errorf("%s: %v", sub(i), err)
			return false
		}
		b, _ := toks[0].MarshalBinary()
		mu.Lock()
		defer mu.Unlock()
		if tokens[i] != nil && !bytes.Equal(tokens[i], b) {
			t.Errorf("%s got two different tokens for one request", sub(i))
		}
		tokens[i] = b
		return true
	}
	for k := range kills {
		// Every instance without its token asks, concurrently; the
		// issuer is killed once a few have their answer.
		var todo []int
		for i := range instances {
			if tokens[i] == nil || k > 0 && i%3 == 0 { // some ask again, as after a lost answer
				todo = append(todo, i)
			}
		}
		answered := make(chan struct{}, len(todo))
		var wg sync.WaitGroup
		for _, i := range todo {
			wg.Go(func() {
				if ask(i, is.url) {
					answered <- struct{}{}
				}
			})
		}
		for range min(3, len(todo)) {
			<-answered
		}
		is.kill9(t)
		wg.Wait()
		is = startProc(t, "issuer", bin, issuerArgs...)
	}
	for i := range instances {
		if !ask(i, is.url) {
			t.Fatalf("%s: no token after the issuer's restarts", sub(i))
		}
	}
	for i := range instances {
		tok, err := admission.ParseToken(tokens[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := verifier.Verify(key, tok); err != nil {
			t.Fatalf("%s's token: %v", sub(i), err)
		}
		// A second token, for a new blinded element: refused, the grant
		// committed before any answer whatever the kills.
		p2, req2, err := admission.Blind([]string{key})
		if err != nil {
			t.Fatal(err)
		}
		answer, err := askTokens(is.url, id.jwt(t, sub(i)), req2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := admission.Finalize(p2, answer); err == nil || answer.Evaluations[0].Refused != admission.RefusedAlreadyGranted {
			t.Fatalf("%s, a second token: %+v, %v; want %s", sub(i), answer.Evaluations, err, admission.RefusedAlreadyGranted)
		}
		envs[i].Token = tokens[i]
	}

	// Reports, in uploads of 3, concurrently; the shuffler is killed once
	// a few uploads are answered. Every envelope is then sent again (the
	// apps that got no answer, and some that did).
	accepted := 0
	var uploads [][]report.Envelope
	for lo := 0; lo < instances; lo += 3 {
		uploads = append(uploads, envs[lo:min(lo+3, instances)])
	}
	// count notes the answer to an upload of n envelopes: each accepted,
	// or a duplicate (a retry of an upload stored before the kill
	// whose answer was lost), never refused.
	count := func(res shuffler.UploadResult, err error, n int, what string) bool {
		if err != nil {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if res.Rejected != 0 || res.Accepted+res.Duplicates != n {
			t.Errorf("%s: %+v; want each of %d accepted or a duplicate", what, res, n)
		}
		accepted += res.Accepted
		return true
	}
	for range kills {
		answered := make(chan struct{}, len(uploads))
		var wg sync.WaitGroup
		for u, up := range uploads {
			wg.Go(func() {
				res, err := uploadTo(sh.url, up)
				if count(res, err, len(up), fmt.Sprintf("upload %d", u)) {
					answered <- struct{}{}
				}
			})
		}
		for range min(2, len(uploads)) {
			<-answered
		}
		sh.kill9(t)
		wg.Wait()
		sh = startProc(t, "shuffler", bin, shufflerArgs...)
	}
	for u, up := range uploads {
		if res, err := uploadTo(sh.url, up); !count(res, err, len(up), fmt.Sprintf("upload %d after the restarts", u)) {
			t.Fatalf("upload %d after the restarts: %v", u, err)
		}
	}
	// Every token on another report, after the restarts: spent.
	others := appReports(t, sh.url, "ui/screen", vals)
	for i := range others {
		others[i].Token = tokens[i]
	}
	res, err := uploadTo(sh.url, others)
	if err != nil {
		t.Fatal(err)
	}
	for i, code := range refusals(res) {
		if code != admission.UploadTokenSpent {
			t.Errorf("another report with %s's token: %q, want %q", sub(i), code, admission.UploadTokenSpent)
		}
	}
	if res.Accepted != 0 || res.Rejected != instances {
		t.Fatalf("every token on another report: %+v; want all refused as spent", res)
	}
	// Answers lost in a kill hide some acceptances (their retries are
	// duplicates); none may be counted twice.
	if accepted > instances {
		t.Fatalf("%d reports accepted over the uploads and their retries, more than one per instance (%d)", accepted, instances)
	}
	// Exactly one report per instance reaches the collector.
	closePeriodsAt(t, sh.admin)
	periodCount(t, c.url, "ui/screen", instances)
	// Nothing left to come: the shuffler's pools and outgoing batches are
	// empty, and the count stays.
	deadline := time.Now().Add(30 * time.Second)
	for m := scrape(t, sh.admin); !strings.Contains(m, "blanket_shuffler_outgoing_batches 0") || !strings.Contains(m, `blanket_shuffler_pool_reports{pool="ui/screen"} 0`); m = scrape(t, sh.admin) {
		if time.Now().After(deadline) {
			t.Fatalf("the shuffler still holds reports or batches:\n%s", m)
		}
		time.Sleep(20 * time.Millisecond)
	}
	periodCount(t, c.url, "ui/screen", instances)
}

// wantAdmissionHeader checks that the plan route at url says that its
// shuffler takes only envelopes with tokens.
func wantAdmissionHeader(t *testing.T, what, url string) {
	t.Helper()
	resp, err := http.Get(url + "/v1/plan")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get(admission.AdmissionHeader); got != admission.AdmissionTokens {
		t.Errorf("%s: %s %q, want %q", what, admission.AdmissionHeader, got, admission.AdmissionTokens)
	}
}

// TestIssuerSeedFlag runs 'blanket issuer --seed FILE' as its systemd
// unit does (the seed a credential file, no --data, its grants on
// PostgreSQL): a token it
// mints is taken by a shuffler given the same file as --admission-seed,
// and nothing is written next to the file. A missing file, one others
// may read, and one that holds no seed are refused before the issuer
// listens, each naming --seed and the file.
func TestIssuerSeedFlag(t *testing.T) {
	bin := testbuild.Binary(t, blanketPkg)
	dir := t.TempDir()
	id := newIDP(t)
	planFile := writePlan(t, dir, 2)
	cdir := filepath.Join(dir, "collector")
	c := startProc(t, "collector", bin, "collector", "--data", cdir, "--plan", planFile, "--addr", "127.0.0.1:0", "--log-level", "warn")
	var published []byte
	resp, err := http.Get(c.url + "/v1/plan")
	if err != nil {
		t.Fatal(err)
	}
	published, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	publishedFile := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(publishedFile, published, 0o644); err != nil {
		t.Fatal(err)
	}
	// The credential: a seed made elsewhere, alone in its directory.
	creds := filepath.Join(dir, "credentials")
	if _, _, err := issuer.LoadOrCreateSeed(creds); err != nil {
		t.Fatal(err)
	}
	seedFile := filepath.Join(creds, issuer.SeedFile)
	base := []string{"issuer", "--plan", publishedFile, "--jwks", id.jwks, "--jwt-audience", "blanket", "--jwt-issuer", "https://idp.test", "--addr", "127.0.0.1:0", "--log-level", "warn"}

	// Refusals, before listening.
	notSeed := filepath.Join(creds, "not.seed")
	if err := os.WriteFile(notSeed, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "open.seed")
	b, _ := os.ReadFile(seedFile)
	if err := os.WriteFile(open, b, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(creds, "missing.seed")
	for _, tc := range []struct {
		file string
		want []string
	}{
		{missing, []string{"--seed " + missing + " does not exist"}},
		{open, []string{"--seed", open, "readable by others"}},
		{notSeed, []string{"--seed", notSeed, "base64url"}},
	} {
		args := append(append([]string{}, base...), "--data", filepath.Join(dir, "issuer-data"), "--seed", tc.file)
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err == nil {
			t.Errorf("--seed %s: the issuer started:\n%s", tc.file, out)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("--seed %s: %q lacks %q", tc.file, out, w)
			}
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("--seed %s was created: %v", missing, err)
	}
	// Without --data, only with a PostgreSQL store.
	if out, err := exec.Command(bin, append(append([]string{}, base...), "--seed", seedFile)...).CombinedOutput(); err == nil || !strings.Contains(string(out), "--data") {
		t.Errorf("--seed without --data on SQLite: %v\n%s", err, out)
	}

	// A real start, as the unit runs it: no --data, the grants on
	// PostgreSQL.
	is := startProc(t, "issuer", bin, append(append([]string{}, base...), "--seed", seedFile, "--store", pgtest.URL(t))...)
	if !strings.Contains(is.out.String(), "blanket admission seed "+seedFile) {
		t.Errorf("the issuer does not print the seed's path:\n%s", is.out)
	}
	entries, _ := os.ReadDir(creds)
	if len(entries) != 2 {
		t.Errorf("the credentials directory holds %d files, want the 2 the test wrote", len(entries))
	}

	sh := startProc(t, "shuffler", bin, "shuffler", "--data", filepath.Join(dir, "shuffler"), "--plan", planFile, "--collector", c.url,
		"--token-file", filepath.Join(cdir, "batch.token"), "--admission-seed", seedFile, "--addr", "127.0.0.1:0", "--release-interval", "50ms", "--log-level", "warn")
	envs := appReports(t, sh.url, "ui/screen", []string{"home"})
	envs[0].Token = instanceToken(t, id, is.url, "instance-1", envs[0].Metric)
	res, err := uploadTo(sh.url, envs)
	if err != nil || res.Accepted != 1 {
		t.Fatalf("a report with a token the --seed issuer minted: %+v, %v; want it accepted", res, err)
	}
}
