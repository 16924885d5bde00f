package plugin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/plugins/hadamard"
	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/plugins/rappor"
	"github.com/blanket-dp/blanket/plugins/summation"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/plugin"
	randomizerv1 "github.com/blanket-dp/blanket/sdk/proto/blanket/randomizer/v1"
	"github.com/blanket-dp/blanket/sdk/rpc"
)

// grpcClient serves f in process over a real gRPC connection
// (goplugin.TestPluginGRPCConn) and returns the dispensed client, not yet
// configured.
func grpcClient(t testing.TB, f sdk.Factory) *rpc.Client {
	t.Helper()
	client, _ := goplugin.TestPluginGRPCConn(t, false, plugin.PluginSets(f)[plugin.ProtocolVersion])
	// Close asks the server to stop (the controller's Shutdown RPC); stopping
	// it here as well would race inside go-plugin.
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(plugin.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := raw.(*rpc.Client)
	if !ok {
		t.Fatalf("dispensed %T, want *rpc.Client", raw)
	}
	return c
}

func seeded(seed uint64) ldp.Source {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	return rand.NewChaCha8(s)
}

func labels(k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = fmt.Sprintf("c%d", i)
	}
	return out
}

// pluginCase is one built-in randomizer: its plugin-independent
// configuration, the same randomizer with seeded randomness (so that two
// instances draw the same reports), and a batch of inputs.
type pluginCase struct {
	name   string
	cfg    sdk.Config
	seeded func(t testing.TB, seed uint64) sdk.Randomizer
	inputs func(n int) sdk.Inputs
}

func must[R sdk.Randomizer](t testing.TB) func(R, error) sdk.Randomizer {
	return func(r R, err error) sdk.Randomizer {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

func categorical(k int) func(n int) sdk.Inputs {
	labs := labels(k)
	return func(n int) sdk.Inputs {
		in := make([]string, n)
		for i := range in {
			in[i] = labs[(i*7)%k]
		}
		return sdk.Inputs{Categories: in}
	}
}

func pluginCases() []pluginCase {
	return []pluginCase{
		{
			name: krr.Name,
			cfg:  sdk.Config{Categories: labels(16), Other: "other"},
			seeded: func(t testing.TB, seed uint64) sdk.Randomizer {
				return must[*krr.Randomizer](t)(krr.New(krr.Options{Categories: labels(16), Other: "other", Rand: seeded(seed)}))
			},
			inputs: categorical(16),
		},
		{
			name: hadamard.Name,
			cfg:  sdk.Config{Categories: labels(16)},
			seeded: func(t testing.TB, seed uint64) sdk.Randomizer {
				return must[*hadamard.Randomizer](t)(hadamard.New(hadamard.Options{Categories: labels(16), Rand: seeded(seed)}))
			},
			inputs: categorical(16),
		},
		{
			name: rappor.Name,
			cfg:  sdk.Config{Categories: labels(16), Params: map[string]string{"mode": "optimized"}},
			seeded: func(t testing.TB, seed uint64) sdk.Randomizer {
				return must[*rappor.Randomizer](t)(rappor.New(rappor.Options{Categories: labels(16), Mode: rappor.Optimized, Rand: seeded(seed)}))
			},
			inputs: categorical(16),
		},
		{
			name: summation.Name,
			cfg:  sdk.Config{Lo: -1, Hi: 3, Params: map[string]string{"k": "10"}},
			seeded: func(t testing.TB, seed uint64) sdk.Randomizer {
				return must[*summation.Randomizer](t)(summation.New(summation.Options{Lo: -1, Hi: 3, K: 10, Rand: seeded(seed)}))
			},
			inputs: func(n int) sdk.Inputs {
				in := make([]float64, n)
				for i := range in {
					in[i] = math.Mod(float64(i)*0.37, 4) - 1
				}
				return sdk.Inputs{Reals: in}
			},
		},
	}
}

// sameBits reports whether a and b are bit for bit the same float64.
func sameBits(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// checkDeclarationBits fails unless got and want declare the same
// distributions bit for bit: every matrix entry, every atom.
func checkDeclarationBits(t *testing.T, got, want *accountant.Declaration) {
	t.Helper()
	if got.Form != want.Form || !sameBits(got.Eps0, want.Eps0) {
		t.Fatalf("declaration form %q eps0 %v, want %q %v", got.Form, got.Eps0, want.Form, want.Eps0)
	}
	if want.Matrix != nil {
		g, w := got.Matrix, want.Matrix
		if g == nil || g.NumInputs() != w.NumInputs() || g.NumOutputs() != w.NumOutputs() {
			t.Fatalf("matrix shape differs: got %v", g)
		}
		for x := range w.NumInputs() {
			for y := range w.NumOutputs() {
				if !sameBits(g.At(x, y), w.At(x, y)) {
					t.Fatalf("R[%d][%d] = %x, want %x", x, y, math.Float64bits(g.At(x, y)), math.Float64bits(w.At(x, y)))
				}
			}
		}
		if !reflect.DeepEqual(g.InputLabels, w.InputLabels) || !reflect.DeepEqual(g.OutputLabels, w.OutputLabels) {
			t.Fatalf("matrix labels differ")
		}
	}
	for _, sets := range [][2][]accountant.DeclaredSet{{got.Pairs, want.Pairs}, {got.Triples, want.Triples}} {
		g, w := sets[0], sets[1]
		if len(g) != len(w) {
			t.Fatalf("%d atom sets, want %d", len(g), len(w))
		}
		for i := range w {
			if g[i].Label != w[i].Label || len(g[i].Atoms) != len(w[i].Atoms) {
				t.Fatalf("atom set %d differs", i)
			}
			for j, a := range w[i].Atoms {
				b := g[i].Atoms[j]
				if !sameBits(a.R, b.R) || !sameBits(a.P, b.P) || !sameBits(a.Q, b.Q) {
					t.Fatalf("atom %d of set %d = %+v, want %+v", j, i, b, a)
				}
			}
		}
	}
}

// TestGRPCRoundTrip checks every RPC of each built-in randomizer against
// the same randomizer in process: with the same seeded randomness both draw
// the same reports, so every result must be equal, floats bit for bit.
func TestGRPCRoundTrip(t *testing.T) {
	ctx := context.Background()
	const eps0, n = 1.5, 500
	for _, pc := range pluginCases() {
		for _, packed := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/packed=%v", pc.name, packed), func(t *testing.T) {
				testGRPCRoundTrip(ctx, t, pc, packed, eps0, n)
			})
		}
	}
}

// plain hides the RandomizePacked method of a randomizer, so that the
// server calls Randomize.
type plain struct{ sdk.Randomizer }

func testGRPCRoundTrip(ctx context.Context, t *testing.T, pc pluginCase, packed bool, eps0 float64, n int) {
	local := pc.seeded(t, 7)
	if _, ok := local.(sdk.PackedRandomizer); !ok {
		t.Fatalf("%s is not an sdk.PackedRandomizer", pc.name)
	}
	c := grpcClient(t, func(sdk.Config) (sdk.Randomizer, error) {
		if !packed {
			return plain{pc.seeded(t, 7)}, nil
		}
		return pc.seeded(t, 7), nil
	})

	wantDesc, err := local.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gotDesc, err := c.Configure(ctx, pc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotDesc, wantDesc) {
		t.Fatalf("Configure description\n got %+v\nwant %+v", gotDesc, wantDesc)
	}
	gotDesc, err = c.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotDesc, wantDesc) {
		t.Fatalf("Describe\n got %+v\nwant %+v", gotDesc, wantDesc)
	}

	wantDecl, err := local.Declare(ctx, eps0)
	if err != nil {
		t.Fatal(err)
	}
	gotDecl, err := c.Declare(ctx, eps0)
	if err != nil {
		t.Fatal(err)
	}
	checkDeclarationBits(t, gotDecl, wantDecl)

	in := pc.inputs(n)
	want, err := local.Randomize(ctx, eps0, in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Randomize(ctx, eps0, in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("Randomize: reports differ from in-process reports with the same seed")
	}

	reports := append(want, []byte("not a report, too long for any of them"))
	wantStat, err := local.Accumulate(ctx, eps0, reports)
	if err != nil {
		t.Fatal(err)
	}
	gotStat, err := c.Accumulate(ctx, eps0, reports)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotStat, wantStat) || gotStat.Malformed != 1 {
		t.Fatalf("Accumulate\n got %+v\nwant %+v (1 malformed)", gotStat, wantStat)
	}

	wantEst, err := local.Estimate(ctx, wantStat)
	if err != nil {
		t.Fatal(err)
	}
	gotEst, err := c.Estimate(ctx, gotStat)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotEst, wantEst) {
		t.Fatalf("Estimate\n got %+v\nwant %+v", gotEst, wantEst)
	}
}

// TestGRPCDeclarationBits sends declarations whose numbers are hard to
// print (subnormals, the smallest double, 0.1+0.2, 1/3, neighbours of 1)
// and checks they arrive bit for bit, dense and sparse, matrix and atoms.
func TestGRPCDeclarationBits(t *testing.T) {
	ctx := context.Background()
	hard := []float64{5e-324, 2.2250738585072014e-308 / 3, 0.1 + 0.2, 1.0 / 3, math.Nextafter(1, 0), math.Nextafter(0.5, 1), 1e-300, 0.7}
	dense := make([][]float64, 3)
	for x := range dense {
		dense[x] = make([]float64, len(hard))
		for y := range dense[x] {
			dense[x][y] = hard[(x+y)%len(hard)]
		}
	}
	denseM, err := accountant.NewMatrix(dense)
	if err != nil {
		t.Fatal(err)
	}
	denseM.OutputLabels = labels(len(hard))
	denseM.InputLabels = []string{"a", "b", "c"}
	sparseM, err := accountant.NewSparseMatrix(1000, []accountant.SparseRow{
		{Default: 1.0 / 3000, Entries: map[int]float64{0: 0.1 + 0.2, 999: 5e-324}},
		{Default: math.Nextafter(1.0/3000, 1), Entries: map[int]float64{7: 1.0 / 7}},
	})
	if err != nil {
		t.Fatal(err)
	}
	decls := map[string]*accountant.Declaration{
		"dense matrix":  {Eps0: math.Log(3), Form: accountant.FormMatrix, Matrix: denseM},
		"sparse matrix": {Eps0: 0, Form: accountant.FormMatrix, Matrix: sparseM},
		"atoms": {Eps0: math.Nextafter(2, 3), Form: accountant.FormAtoms,
			Pairs:   []accountant.DeclaredSet{{Label: "x=a,x'=b", Atoms: []accountant.Atom{{R: 0.1 + 0.2, P: 1.0 / 3, Q: 5e-324}}}},
			Triples: []accountant.DeclaredSet{{Atoms: []accountant.Atom{{R: 1e-300, P: 0.7, Q: math.Nextafter(0.7, 0)}}}}},
		"generic": {Eps0: 0.1 + 0.2, Form: accountant.FormGeneric},
	}
	for name, d := range decls {
		t.Run(name, func(t *testing.T) {
			c := grpcClient(t, func(sdk.Config) (sdk.Randomizer, error) { return &fake{decl: d}, nil })
			if _, err := c.Configure(ctx, sdk.Config{}); err != nil {
				t.Fatal(err)
			}
			got, err := c.Declare(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			checkDeclarationBits(t, got, d)
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(d)
			if string(a) != string(b) {
				t.Fatalf("JSON differs:\n got %s\nwant %s", a, b)
			}
		})
	}
}

// fake is an sdk.Randomizer that returns err from every method (when set) and
// decl from Declare.
type fake struct {
	err   error
	decl  *accountant.Declaration
	panic bool
}

func (f *fake) fail() error {
	if f.panic {
		panic("fake panics")
	}
	return f.err
}

func (f *fake) Describe(context.Context) (*sdk.Description, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return &sdk.Description{Name: "fake", Version: "1", Input: sdk.InputCategorical, Categories: []string{"a", "b"}, ReportBytes: 1, Eps0Min: 0.01, Eps0Max: 10}, nil
}

func (f *fake) Declare(context.Context, float64) (*accountant.Declaration, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.decl, nil
}

func (f *fake) Randomize(_ context.Context, _ float64, in sdk.Inputs) ([][]byte, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return make([][]byte, in.Len()), nil
}

func (f *fake) Accumulate(context.Context, float64, [][]byte) (*sdk.Statistic, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return &sdk.Statistic{Plugin: "fake"}, nil
}

func (f *fake) Estimate(context.Context, *sdk.Statistic) (*sdk.Estimate, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return &sdk.Estimate{Plugin: "fake"}, nil
}

var sentinels = []error{sdk.ErrBadInput, sdk.ErrBadEps0, sdk.ErrBadReport, sdk.ErrBadConfig, sdk.ErrBadStatistic}

// methods calls each sdk.Randomizer method of c once, for error tests.
var methods = map[string]func(ctx context.Context, r sdk.Randomizer) error{
	"Describe": func(ctx context.Context, r sdk.Randomizer) error { _, err := r.Describe(ctx); return err },
	"Declare":  func(ctx context.Context, r sdk.Randomizer) error { _, err := r.Declare(ctx, 1); return err },
	"Randomize": func(ctx context.Context, r sdk.Randomizer) error {
		_, err := r.Randomize(ctx, 1, sdk.Inputs{Categories: []string{"a"}})
		return err
	},
	"Accumulate": func(ctx context.Context, r sdk.Randomizer) error {
		_, err := r.Accumulate(ctx, 1, [][]byte{{0}})
		return err
	},
	"Estimate": func(ctx context.Context, r sdk.Randomizer) error {
		_, err := r.Estimate(ctx, &sdk.Statistic{Plugin: "fake"})
		return err
	},
}

// TestGRPCErrorMapping checks that each sentinel a plugin returns from each
// method arrives as a gRPC status that unwraps to that sentinel and no
// other, with the plugin's message.
func TestGRPCErrorMapping(t *testing.T) {
	ctx := context.Background()
	for _, sentinel := range sentinels {
		for name, call := range methods {
			t.Run(fmt.Sprintf("%s/%v", name, sentinel), func(t *testing.T) {
				f := &fake{}
				c := grpcClient(t, func(sdk.Config) (sdk.Randomizer, error) { return f, nil })
				if _, err := c.Configure(ctx, sdk.Config{}); err != nil {
					t.Fatal(err)
				}
				f.err = fmt.Errorf("%w: value 3 of %s", sentinel, name)
				err := call(ctx, c)
				if !errors.Is(err, sentinel) {
					t.Fatalf("error %v does not wrap %v", err, sentinel)
				}
				for _, other := range sentinels {
					if other != sentinel && errors.Is(err, other) {
						t.Errorf("error %v also wraps %v", err, other)
					}
				}
				if err.Error() != f.err.Error() {
					t.Errorf("message %q, want %q", err.Error(), f.err.Error())
				}
				if got := status.Code(err); got != codes.InvalidArgument {
					t.Errorf("code %v, want InvalidArgument", got)
				}
				var pe *rpc.PluginError
				if !errors.As(err, &pe) || pe.Reason == "" {
					t.Errorf("error %#v is not a *rpc.PluginError with a reason", err)
				}
			})
		}
	}
}

func TestGRPCErrorOther(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name     string
		f        *fake
		code     codes.Code
		sentinel error
	}{
		{"plain error", &fake{err: errors.New("disk on fire")}, codes.Unknown, nil},
		{"canceled", &fake{err: fmt.Errorf("stopped: %w", context.Canceled)}, codes.Canceled, context.Canceled},
		{"deadline", &fake{err: fmt.Errorf("slow: %w", context.DeadlineExceeded)}, codes.DeadlineExceeded, context.DeadlineExceeded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := grpcClient(t, func(sdk.Config) (sdk.Randomizer, error) { return tc.f, nil })
			err := tc.f.err
			tc.f.err = nil
			if _, cerr := c.Configure(ctx, sdk.Config{}); cerr != nil {
				t.Fatal(cerr)
			}
			tc.f.err = err
			got := methods["Randomize"](ctx, c)
			if status.Code(got) != tc.code {
				t.Fatalf("code %v, want %v (%v)", status.Code(got), tc.code, got)
			}
			for _, s := range sentinels {
				if errors.Is(got, s) {
					t.Errorf("error %v wraps %v", got, s)
				}
			}
			if tc.sentinel != nil && !errors.Is(got, tc.sentinel) {
				t.Errorf("error %v does not wrap %v", got, tc.sentinel)
			}
		})
	}

	t.Run("panic", func(t *testing.T) {
		f := &fake{}
		c := grpcClient(t, func(sdk.Config) (sdk.Randomizer, error) { return f, nil })
		if _, err := c.Configure(ctx, sdk.Config{}); err != nil {
			t.Fatal(err)
		}
		f.panic = true
		for name, call := range methods {
			if err := call(ctx, c); status.Code(err) != codes.Internal {
				t.Errorf("%s: code %v, want Internal (%v)", name, status.Code(err), err)
			}
		}
	})

	t.Run("not configured", func(t *testing.T) {
		c := grpcClient(t, func(sdk.Config) (sdk.Randomizer, error) { return &fake{}, nil })
		for name, call := range methods {
			if err := call(ctx, c); !errors.Is(err, sdk.ErrNotConfigured) || status.Code(err) != codes.FailedPrecondition {
				t.Errorf("%s before Configure: %v, want sdk.ErrNotConfigured, FailedPrecondition", name, err)
			}
		}
	})

	t.Run("bad config", func(t *testing.T) {
		c := grpcClient(t, sdk.FactoryOf(krr.FromConfig))
		_, err := c.Configure(ctx, sdk.Config{Categories: []string{"a", "a"}})
		if !errors.Is(err, sdk.ErrBadConfig) {
			t.Fatalf("Configure with duplicate categories: %v, want sdk.ErrBadConfig", err)
		}
	})
}

// TestGRPCPluginErrors checks the sentinels real randomizers return for
// real mistakes, across the boundary.
func TestGRPCPluginErrors(t *testing.T) {
	ctx := context.Background()
	c := grpcClient(t, sdk.FactoryOf(krr.FromConfig))
	if _, err := c.Configure(ctx, sdk.Config{Categories: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"unknown category", func() error {
			_, err := c.Randomize(ctx, 1, sdk.Inputs{Categories: []string{"a", "zzz"}})
			return err
		}, sdk.ErrBadInput},
		{"reals to krr", func() error { _, err := c.Randomize(ctx, 1, sdk.Inputs{Reals: []float64{1}}); return err }, sdk.ErrBadInput},
		{"NaN eps0", func() error { _, err := c.Declare(ctx, math.NaN()); return err }, sdk.ErrBadEps0},
		{"negative eps0", func() error { _, err := c.Accumulate(ctx, -1, nil); return err }, sdk.ErrBadEps0},
		{"foreign statistic", func() error {
			_, err := c.Estimate(ctx, &sdk.Statistic{Plugin: "hadamard", Eps0: 1, N: 1, Counts: []int64{1, 0}})
			return err
		}, sdk.ErrBadStatistic},
		{"nil statistic", func() error { _, err := c.Estimate(ctx, nil); return err }, sdk.ErrBadStatistic},
	}
	for _, tc := range cases {
		if err := tc.call(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestGRPCConfigRoundTrip checks that Configure delivers the configuration
// to the plugin's factory field for field.
func TestGRPCConfigRoundTrip(t *testing.T) {
	ctx := context.Background()
	cfgs := []sdk.Config{
		{Categories: []string{"a", "b", "ü", ""}, Other: "rest", Confidence: 0.9, Params: map[string]string{"mode": "optimized", "x": ""}},
		{Lo: -math.MaxFloat64, Hi: math.SmallestNonzeroFloat64, Params: map[string]string{"k": "7"}},
		{},
	}
	for i, cfg := range cfgs {
		var got sdk.Config
		c := grpcClient(t, func(c sdk.Config) (sdk.Randomizer, error) { got = c; return &fake{}, nil })
		if _, err := c.Configure(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, cfg) {
			t.Errorf("config %d arrived as %+v, want %+v", i, got, cfg)
		}
	}
}

// TestGRPCMalformedRandomize sends Randomize requests that the Go client
// never builds, as a foreign or hostile host might: every one fails with
// BAD_INPUT, whether the server calls RandomizePacked or Randomize, and the
// server keeps serving.
func TestGRPCMalformedRandomize(t *testing.T) {
	ctx := context.Background()
	bad := map[string]*randomizerv1.Inputs{
		"index past the labels": {Labels: [][]byte{[]byte("c0")}, Categories: []uint32{0, 1}},
		"no labels":             {Categories: []uint32{0}},
		"huge index":            {Labels: [][]byte{[]byte("c0")}, Categories: []uint32{math.MaxUint32}},
		"unknown label":         {Labels: [][]byte{[]byte("c0"), []byte("zzz")}, Categories: []uint32{0, 1}},
		"both kinds":            {Labels: [][]byte{[]byte("c0")}, Categories: []uint32{0}, Reals: []float64{1}},
	}
	for _, packed := range []bool{true, false} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			raw := rawClient(t, func(cfg sdk.Config) (sdk.Randomizer, error) {
				r, err := krr.FromConfig(cfg)
				if err != nil || packed {
					return r, err
				}
				return plain{r}, nil
			})
			if _, err := raw.Configure(ctx, &randomizerv1.ConfigureRequest{Config: &randomizerv1.Config{Categories: labels(2)}}); err != nil {
				t.Fatal(err)
			}
			for name, in := range bad {
				_, err := raw.Randomize(ctx, &randomizerv1.RandomizeRequest{Eps0: 1, Inputs: in})
				if reason := errorReason(err); status.Code(err) != codes.InvalidArgument || reason != "BAD_INPUT" {
					t.Errorf("%s: %v (reason %q), want InvalidArgument, BAD_INPUT", name, err, reason)
				}
			}
			resp, err := raw.Randomize(ctx, &randomizerv1.RandomizeRequest{Eps0: 1, Inputs: &randomizerv1.Inputs{
				Labels: [][]byte{[]byte("c1"), []byte("c0")}, Categories: []uint32{0, 1, 1},
			}})
			if err != nil {
				t.Fatalf("a valid request after the bad ones: %v", err)
			}
			if r := resp.GetReports(); len(r.GetData()) != 3 || r.GetSize() != 1 || r.GetCount() != 3 {
				t.Fatalf("reports of 3 inputs: %v", r)
			}
		})
	}
}

// rawClient serves f in process and returns the generated gRPC client of
// the connection, which sends requests as given.
func rawClient(t testing.TB, f sdk.Factory) randomizerv1.RandomizerClient {
	t.Helper()
	client, _ := goplugin.TestPluginGRPCConn(t, false, plugin.PluginSets(f)[plugin.ProtocolVersion])
	t.Cleanup(func() { _ = client.Close() })
	return randomizerv1.NewRandomizerClient(client.Conn)
}

// errorReason returns the ErrorInfo reason of a status error, or "".
func errorReason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == rpc.ErrorDomain {
			return info.GetReason()
		}
	}
	return ""
}

// shortPacked is k-RR whose RandomizePacked answers one byte too few.
type shortPacked struct{ *krr.Randomizer }

func (r shortPacked) RandomizePacked(ctx context.Context, eps0 float64, in sdk.PackedInputs) ([]byte, error) {
	b, err := r.Randomizer.RandomizePacked(ctx, eps0, in)
	return b[:len(b)-1], err
}

// TestGRPCPackedWrongLength: a RandomizePacked that answers the wrong
// number of bytes fails the call with codes.Internal rather than answering
// misaligned reports.
func TestGRPCPackedWrongLength(t *testing.T) {
	ctx := context.Background()
	c := grpcClient(t, func(cfg sdk.Config) (sdk.Randomizer, error) {
		r, err := krr.FromConfig(cfg)
		if err != nil {
			return nil, err
		}
		return shortPacked{r}, nil
	})
	if _, err := c.Configure(ctx, sdk.Config{Categories: labels(2)}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Randomize(ctx, 1, sdk.Inputs{Categories: []string{"c0", "c1"}})
	if status.Code(err) != codes.Internal {
		t.Fatalf("Randomize: %v, want codes.Internal", err)
	}
}

// mapped gives krr an sdk.OutputMapper (its reports are already output
// indices; the point is the protocol), optionally lying about the count.
type mapped struct {
	*krr.Randomizer
	short bool
}

func (m mapped) Outputs(ctx context.Context, eps0 float64, reports [][]byte) ([]int, error) {
	out := make([]int, 0, len(reports))
	for _, rep := range reports {
		y, err := m.Decode(rep)
		if err != nil {
			return nil, err
		}
		out = append(out, y)
	}
	if m.short && len(out) > 0 {
		out = out[1:]
	}
	return out, nil
}

// TestGRPCOutputs checks the optional Outputs RPC: UNIMPLEMENTED (an error
// wrapping errors.ErrUnsupported) for a randomizer that is not an
// sdk.OutputMapper, the mapper's answer otherwise, its errors mapped across
// the boundary, and a wrong count refused.
func TestGRPCOutputs(t *testing.T) {
	ctx := context.Background()
	cfg := sdk.Config{Categories: labels(5)}
	plainClient := grpcClient(t, func(cfg sdk.Config) (sdk.Randomizer, error) { return krr.FromConfig(cfg) })
	if _, err := plainClient.Configure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := plainClient.Outputs(ctx, 1, nil); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Outputs of a plain randomizer: %v, want errors.ErrUnsupported", err)
	}
	for _, short := range []bool{false, true} {
		c := grpcClient(t, func(cfg sdk.Config) (sdk.Randomizer, error) {
			r, err := krr.FromConfig(cfg)
			if err != nil {
				return nil, err
			}
			return mapped{r, short}, nil
		})
		if _, err := c.Configure(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		in := sdk.Inputs{Categories: []string{"c0", "c1", "c2", "c3", "c4", "c2"}}
		reps, err := c.Randomize(ctx, 1, in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Outputs(ctx, 1, reps)
		if short {
			if status.Code(err) != codes.Internal {
				t.Fatalf("a mapper answering one output short: %v, want codes.Internal", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, rep := range reps {
			if want := int(rep[0]); got[i] != want {
				t.Errorf("report %d (%x): output %d, want %d", i, rep, got[i], want)
			}
		}
		if _, err := c.Outputs(ctx, 1, [][]byte{{0, 1}}); !errors.Is(err, sdk.ErrBadReport) {
			t.Errorf("a 2-byte krr report: %v, want sdk.ErrBadReport", err)
		}
	}
}

// wrappedKRRClient returns a client of a served k-RR randomizer of cfg,
// configured, wrapped by wrap.
func wrappedKRRClient(t *testing.T, cfg sdk.Config, wrap func(*krr.Randomizer) sdk.Randomizer) *rpc.Client {
	t.Helper()
	c := grpcClient(t, func(cfg sdk.Config) (sdk.Randomizer, error) {
		r, err := krr.FromConfig(cfg)
		if err != nil {
			return nil, err
		}
		return wrap(r), nil
	})
	if _, err := c.Configure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	return c
}

// shortBlanket answers one blanket draw fewer than asked.
type shortBlanket struct{ *krr.Randomizer }

func (s shortBlanket) SampleBlanket(ctx context.Context, eps0 float64, n int) ([][]byte, error) {
	reps, err := s.Randomizer.SampleBlanket(ctx, eps0, n)
	if err == nil && len(reps) > 0 {
		reps = reps[1:]
	}
	return reps, err
}

// TestGRPCSampleBlanket: blanket draws cross the plugin protocol as
// reports of the plugin's format; a plugin without sdk.BlanketSampler
// answers errors.ErrUnsupported, a bad eps0 sdk.ErrBadEps0, a bad count
// sdk.ErrBadInput, and an answer one draw short is the plugin's fault.
func TestGRPCSampleBlanket(t *testing.T) {
	ctx := context.Background()
	cfg := sdk.Config{Categories: labels(5)}
	open := func(f func(*krr.Randomizer) sdk.Randomizer) *rpc.Client { return wrappedKRRClient(t, cfg, f) }
	plain := open(func(r *krr.Randomizer) sdk.Randomizer { return struct{ sdk.Randomizer }{r} })
	if _, err := plain.SampleBlanket(ctx, 1, 3); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("SampleBlanket of a randomizer without it: %v, want errors.ErrUnsupported", err)
	}
	c := open(func(r *krr.Randomizer) sdk.Randomizer { return r })
	reps, err := c.SampleBlanket(ctx, 1, 100)
	if err != nil || len(reps) != 100 {
		t.Fatalf("SampleBlanket(100): %d reports, %v", len(reps), err)
	}
	for i, rep := range reps {
		if len(rep) != 1 || rep[0] >= 5 {
			t.Fatalf("draw %d is %x, not a 1-byte report of 5 buckets", i, rep)
		}
	}
	if reps, err := c.SampleBlanket(ctx, 1, 0); err != nil || len(reps) != 0 {
		t.Errorf("SampleBlanket(0): %d reports, %v", len(reps), err)
	}
	if _, err := c.SampleBlanket(ctx, 100, 3); !errors.Is(err, sdk.ErrBadEps0) {
		t.Errorf("SampleBlanket at eps0 = 100: %v, want sdk.ErrBadEps0", err)
	}
	for _, n := range []int{-1, sdk.MaxBlanketDraws + 1} {
		if _, err := c.SampleBlanket(ctx, 1, n); !errors.Is(err, sdk.ErrBadInput) {
			t.Errorf("SampleBlanket(%d): %v, want sdk.ErrBadInput", n, err)
		}
	}
	short := open(func(r *krr.Randomizer) sdk.Randomizer { return shortBlanket{r} })
	if _, err := short.SampleBlanket(ctx, 1, 4); status.Code(err) != codes.Internal {
		t.Errorf("a sampler answering one draw short: %v, want codes.Internal", err)
	}
}

// nilFloor answers EstimateFloor with neither an estimate nor an error.
type nilFloor struct{ *krr.Randomizer }

func (nilFloor) EstimateFloor(context.Context, *sdk.Statistic) (*sdk.Estimate, error) {
	return nil, nil
}

// TestGRPCEstimateFloor: a statistic's draws cross the plugin protocol
// (Statistic.draws): the served EstimateFloor gives what the randomizer's
// gives in process, and the served Estimate refuses the statistic, as it
// could not had the draws been lost on the way; Draws below 0 or at N
// answer sdk.ErrBadStatistic, a plugin without sdk.FloorEstimator
// errors.ErrUnsupported, and a nil estimate is the plugin's fault.
func TestGRPCEstimateFloor(t *testing.T) {
	ctx := context.Background()
	cfg := sdk.Config{Categories: labels(5)}
	open := func(f func(*krr.Randomizer) sdk.Randomizer) *rpc.Client { return wrappedKRRClient(t, cfg, f) }
	local, err := krr.FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := open(func(r *krr.Randomizer) sdk.Randomizer { return r })
	reps, err := c.Randomize(ctx, 1, categorical(5)(400))
	if err != nil {
		t.Fatal(err)
	}
	draws, err := c.SampleBlanket(ctx, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	stat, err := c.Accumulate(ctx, 1, append(reps, draws...))
	if err != nil {
		t.Fatal(err)
	}
	stat.Draws = 100
	got, err := c.EstimateFloor(ctx, stat)
	if err != nil {
		t.Fatal(err)
	}
	want, err := local.EstimateFloor(ctx, stat)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("served EstimateFloor %+v, in process %+v", got, want)
	}
	if got.N != 400 {
		t.Errorf("served EstimateFloor counts N = %d, want the 400 apps' reports", got.N)
	}
	if _, err := c.Estimate(ctx, stat); !errors.Is(err, sdk.ErrBadStatistic) {
		t.Errorf("served Estimate of a statistic with draws: %v, want sdk.ErrBadStatistic", err)
	}
	for _, d := range []int64{-1, stat.N} {
		bad := stat.Clone()
		bad.Draws = d
		if _, err := c.EstimateFloor(ctx, bad); !errors.Is(err, sdk.ErrBadStatistic) {
			t.Errorf("served EstimateFloor with Draws = %d of N = %d: %v, want sdk.ErrBadStatistic", d, bad.N, err)
		}
	}
	plain := open(func(r *krr.Randomizer) sdk.Randomizer { return struct{ sdk.Randomizer }{r} })
	if _, err := plain.EstimateFloor(ctx, stat); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("EstimateFloor of a randomizer without it: %v, want errors.ErrUnsupported", err)
	}
	broken := open(func(r *krr.Randomizer) sdk.Randomizer { return nilFloor{r} })
	if _, err := broken.EstimateFloor(ctx, stat); status.Code(err) != codes.Internal {
		t.Errorf("a plugin answering a nil estimate: %v, want codes.Internal", err)
	}
}
