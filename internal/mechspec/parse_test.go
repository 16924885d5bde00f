package mechspec

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
)

// rr2 is binary randomized response at eps0 = ln 3, a valid matrix
// declaration without eps0.
const rr2 = `{"rows": [[0.75, 0.25], [0.25, 0.75]]}`

// fakeFiles is a file system for the matrix constructor in tests.
var fakeFiles = map[string]string{
	"rr2.json":       rr2,
	"my file,1.json": rr2,
	"atoms.json": `{"form": "atoms", "eps0": 1.1, "pairs": [{"atoms": [
		{"r": 0.25, "p": 0.75, "q": 0.25}, {"r": 0.25, "p": 0.25, "q": 0.75}]}]}`,
	"bad.json":     `{"rows": [[0.9, 0.2], [0.25, 0.75]]}`,
	"notjson.json": `rows`,
}

func fakeRead(name string) ([]byte, error) {
	s, ok := fakeFiles[name]
	if !ok {
		return nil, fmt.Errorf("open %s: %w", name, os.ErrNotExist)
	}
	return []byte(s), nil
}

// testRegistry is NewRegistry with the matrix constructor reading fakeFiles.
func testRegistry(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{}
	for name, c := range map[string]Constructor{"krr": KRR, "generic": Generic, "matrix": Matrix(fakeRead)} {
		if err := r.Register(name, c); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func krr(k int) accountant.KRRMech { return accountant.KRRMech{K: k} }

func TestParseValid(t *testing.T) {
	deep := "krr:k=2"
	for range MaxDepth {
		deep = "subsample(0.5," + deep + ")"
	}
	deepWant := accountant.Mechanism(krr(2))
	for range MaxDepth {
		deepWant = accountant.Subsample(0.5, deepWant)
	}
	tests := []struct {
		spec string
		want accountant.Mechanism
		// canon is m.String() when it differs from spec.
		canon string
	}{
		{spec: "krr:k=100", want: krr(100)},
		{spec: "krr:k=1e2", want: krr(100), canon: "krr:k=100"},
		{spec: "krr:k=1_000", want: krr(1000), canon: "krr:k=1000"},
		{spec: "krr:k=10:eps0=1.5", want: accountant.KRRMech{K: 10, Eps0: 1.5}},
		{spec: "krr:eps0=1.5:k=10", want: accountant.KRRMech{K: 10, Eps0: 1.5}, canon: "krr:k=10:eps0=1.5"},
		{spec: "generic", want: accountant.GenericMech{}},
		{spec: "generic:eps0=2", want: accountant.GenericMech{Eps0: 2}},
		{spec: "joint(krr:k=10,krr:k=10)", want: accountant.Joint(krr(10), krr(10))},
		{spec: "joint(krr:k=10)", want: accountant.Joint(krr(10))},
		{spec: " joint( krr : k = 10 ,\tgeneric:eps0=1 ) ", want: accountant.Joint(krr(10), accountant.GenericMech{Eps0: 1}),
			canon: "joint(krr:k=10,generic:eps0=1)"},
		{spec: "parallel(0.5:krr:k=10,0.5:krr:k=20)", want: accountant.Parallel([]float64{0.5, 0.5}, krr(10), krr(20))},
		{spec: "parallel(1:generic)", want: accountant.Parallel([]float64{1}, accountant.Generic())},
		{spec: "parallel(0.3333333333:krr:k=2,0.3333333333:krr:k=3,0.3333333334:krr:k=4)",
			want: accountant.Parallel([]float64{0.3333333333, 0.3333333333, 0.3333333334}, krr(2), krr(3), krr(4))},
		{spec: "subsample(0.1,krr:k=10)", want: accountant.Subsample(0.1, krr(10))},
		{spec: "subsample(1e-3,generic)", want: accountant.Subsample(0.001, accountant.Generic()), canon: "subsample(0.001,generic)"},
		{spec: "joint(parallel(0.25:subsample(0.5,krr:k=3:eps0=1),0.75:joint(generic,krr:k=5)),generic:eps0=2)",
			want: accountant.Joint(
				accountant.Parallel([]float64{0.25, 0.75},
					accountant.Subsample(0.5, accountant.KRRMech{K: 3, Eps0: 1}),
					accountant.Joint(accountant.Generic(), krr(5))),
				accountant.GenericMech{Eps0: 2})},
		{spec: deep, want: deepWant},
	}
	r := testRegistry(t)
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			m, err := r.Parse(tt.spec)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(m, tt.want) {
				t.Fatalf("Parse = %#v, want %#v", m, tt.want)
			}
			canon := tt.canon
			if canon == "" {
				canon = tt.spec
			}
			if got := m.String(); got != canon {
				t.Errorf("String() = %q, want %q", got, canon)
			}
			// Round trip: the canonical form parses to the same mechanism.
			m2, err := r.Parse(m.String())
			if err != nil {
				t.Fatalf("Parse(String()): %v", err)
			}
			if !reflect.DeepEqual(m2, m) {
				t.Errorf("Parse(String()) = %#v, want %#v", m2, m)
			}
		})
	}
}

func TestParseMatrix(t *testing.T) {
	r := testRegistry(t)
	tests := []struct {
		spec, name string
		eps0       float64
	}{
		{"matrix:rr2.json", "matrix:rr2.json", math.Log(3)},
		{`matrix:"my file,1.json"`, `matrix:"my file,1.json"`, math.Log(3)},
		{"matrix:atoms.json", "matrix:atoms.json", 1.1},
	}
	// eps0Tol is the tolerance on the computed eps0 = ln 3: the validation
	// takes the log of a ratio of two decimal probabilities, a few ulps off.
	const eps0Tol = 1e-12
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			m, err := r.Parse(tt.spec)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			dm, ok := m.(accountant.DeclaredMech)
			if !ok {
				t.Fatalf("Parse = %T, want accountant.DeclaredMech", m)
			}
			if dm.Name != tt.name || m.String() != tt.name {
				t.Errorf("Name = %q, String() = %q, want %q", dm.Name, m.String(), tt.name)
			}
			if e, ok := m.FixedEps0(); !ok || math.Abs(e-tt.eps0) > eps0Tol {
				t.Errorf("FixedEps0() = %v, %v, want %v, true", e, ok, tt.eps0)
			}
		})
	}
	// The default registry reads real files.
	dir := t.TempDir()
	path := filepath.Join(dir, "m.json")
	if err := os.WriteFile(path, []byte(rr2), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := NewRegistry().Parse("joint(matrix:" + Quote(path) + ",krr:k=4)")
	if err != nil {
		t.Fatalf("Parse with a real file: %v", err)
	}
	if _, ok := m.(accountant.JointMech).Parts[0].(accountant.DeclaredMech); !ok {
		t.Errorf("first part is %T, want accountant.DeclaredMech", m.(accountant.JointMech).Parts[0])
	}
	_, err = NewRegistry().Parse("matrix:" + Quote(filepath.Join(dir, "missing.json")))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: error %v does not wrap os.ErrNotExist", err)
	}
}

func TestParseInvalid(t *testing.T) {
	long := strings.Repeat("joint(", 1) + strings.Repeat("krr:k=2,", MaxLen/8) + "krr:k=2)"
	tooDeep := "krr:k=2"
	for range MaxDepth + 1 {
		tooDeep = "joint(" + tooDeep + ")"
	}
	tests := []struct {
		spec string
		pos  int
		kind error
		msg  string // substring of the error
	}{
		{"", 0, ErrSyntax, "expected mechanism name, got end of input"},
		{"   ", 3, ErrSyntax, "expected mechanism name"},
		{"joint(krr:k=10,", 15, ErrSyntax, "expected mechanism name, got end of input"},
		{"joint(krr:k=10", 14, ErrSyntax, "expected ',' or ')' in joint, got end of input"},
		{"joint()", 6, ErrSyntax, "expected mechanism name, got ')'"},
		{"joint krr", 6, ErrSyntax, "expected '(' after joint, got 'k'"},
		{"krr:k=10)", 8, ErrSyntax, "expected end of input, got ')'"},
		{"krr:k=10 generic", 9, ErrSyntax, "expected end of input, got 'g'"},
		{"krr:", 4, ErrSyntax, "expected parameter (key=value) or argument, got end of input"},
		{"krr:k=", 6, ErrSyntax, "expected value for k"},
		{"krr:=10", 4, ErrSyntax, "expected parameter (key=value) or argument, got '='"},
		{"krr:1k=10", 4, ErrSyntax, `expected parameter name before '=', got "1k"`},
		{`krr:"k"=10`, 4, ErrSyntax, "expected parameter name before '='"},
		{`matrix:"rr2.json`, 7, ErrSyntax, "unterminated or invalid quoted value"},
		{"3rr", 0, ErrSyntax, "expected mechanism name, got '3'"},
		{"krr:k=10\x00", 8, ErrSyntax, `expected end of input, got '\x00'`},
		{"foo", 0, ErrUnknown, `unknown mechanism "foo" (known: generic, krr, matrix; combinators: joint, parallel, subsample); a plugin's mechanism needs its binary blanket-foo in --plugin-dir or $BLANKET_PLUGIN_DIR`},
		{"joint(krr:k=2,KRR:k=2)", 14, ErrUnknown, `unknown mechanism "KRR"`},
		{"krr", 0, ErrParam, "krr: missing parameter k"},
		{"krr:kk=10", 0, ErrParam, "krr: missing parameter k (given: kk)"},
		{"krr:k=10:foo=1", 9, ErrParam, `krr: unknown parameter "foo" (krr takes parameters k, eps0)`},
		{"krr:k=10:100", 9, ErrParam, `krr: unexpected argument "100"`},
		{"generic:k=3", 8, ErrParam, `generic: unknown parameter "k" (generic takes parameters eps0)`},
		{"krr:k=10:k=20", 9, ErrParam, "krr: duplicate parameter k"},
		{"krr:k=1", 6, ErrParam, "krr: k must be >= 2, got 1"},
		{"krr:k=1.5", 6, ErrParam, "krr: k must be an integer, got 1.5"},
		{"krr:k=abc", 6, ErrParam, "krr: k must be an integer, got abc"},
		{"krr:k=1e30", 6, ErrParam, "krr: k must be an integer in ["},
		{"krr:k=10:eps0=0", 14, ErrParam, "krr: eps0 must be in (0, 30], got 0"},
		{"krr:k=10:eps0=-1", 14, ErrParam, "krr: eps0 must be in (0, 30]"},
		{"krr:k=10:eps0=31", 14, ErrParam, "krr: eps0 must be in (0, 30]"},
		{"krr:k=10:eps0=NaN", 14, ErrParam, "krr: eps0 must be a finite number, got NaN"},
		{"generic:eps0=Inf", 13, ErrParam, "generic: eps0 must be a finite number, got Inf"},
		{"generic:eps0=0x1p1", 13, ErrParam, "generic: eps0 must be a finite number"},
		{"parallel(0.5:krr:k=10,0.4:krr:k=20)", 0, ErrParam, "parallel: weights must sum to 1, got 0.9"},
		{"parallel(0:krr:k=10,1:krr:k=20)", 9, ErrParam, "parallel weight must be a number in (0,1], got 0"},
		{"parallel(1.5:krr:k=10)", 9, ErrParam, "parallel weight must be a number in (0,1], got 1.5"},
		{"parallel(krr:k=10)", 9, ErrParam, "parallel weight must be a number in (0,1], got krr"},
		{"parallel(0.5,krr:k=10)", 12, ErrSyntax, "expected ':' after the parallel weight, got ','"},
		{"parallel()", 9, ErrSyntax, "expected weight, got ')'"},
		{"subsample(krr:k=10)", 10, ErrParam, "subsample rate must be a number in (0,1], got krr"},
		{"subsample(0.1)", 13, ErrSyntax, "expected ',' after the subsample rate, got ')'"},
		{"subsample(0.1,krr:k=2,krr:k=3)", 21, ErrSyntax, "expected ')' after the subsampled mechanism, got ','"},
		{"subsample(NaN,krr:k=2)", 10, ErrParam, "subsample rate must be a number in (0,1], got NaN"},
		{"matrix", 0, ErrParam, "matrix: missing argument (matrix:VALUE)"},
		{"matrix:a.json:b.json", 14, ErrParam, `matrix takes one argument, got a second: "b.json"`},
		{"matrix:nope.json", 7, ErrParam, "matrix:nope.json: open nope.json: file does not exist"},
		{"matrix:bad.json", 7, ErrParam, "matrix:bad.json: accountant: invalid declaration"},
		{"matrix:notjson.json", 7, ErrParam, "matrix:notjson.json: accountant: invalid declaration"},
		{tooDeep, 6 * MaxDepth, ErrLimit, fmt.Sprintf("combinators nested deeper than %d", MaxDepth)},
		{long, MaxLen, ErrLimit, fmt.Sprintf("longer than the limit %d", MaxLen)},
	}
	r := testRegistry(t)
	for _, tt := range tests {
		name := tt.spec
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			m, err := r.Parse(tt.spec)
			if err == nil {
				t.Fatalf("Parse = %v, want an error", m)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is not an *Error", err, err)
			}
			if e.Pos != tt.pos {
				t.Errorf("Pos = %d, want %d (%v)", e.Pos, tt.pos, err)
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("error %v does not wrap %v", err, tt.kind)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
			if want := fmt.Sprintf("mechspec: at %d in ", tt.pos); !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
		})
	}
}

func TestRegister(t *testing.T) {
	custom := func(p Params) (accountant.Mechanism, error) {
		w, err := p.Int("width")
		if err != nil {
			return nil, err
		}
		if w < 1 {
			return nil, p.Invalid("width", ">= 1")
		}
		label, err := p.StringOr("label", "x")
		if err != nil {
			return nil, err
		}
		return accountant.FuncMech{Name: fmt.Sprintf("custom:width=%d:label=%s", w, label)}, nil
	}
	r := NewRegistry()
	if err := r.Register("custom-rr_2", custom); err != nil {
		t.Fatalf("Register: %v", err)
	}
	m, err := r.Parse("joint(custom-rr_2:width=3:label=a,krr:k=2)")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := m.(accountant.JointMech).Parts[0].String(); got != "custom:width=3:label=a" {
		t.Errorf("custom part = %q", got)
	}
	_, err = r.Parse("custom-rr_2:width=0")
	if err == nil || !strings.Contains(err.Error(), "at 18 ") || !strings.Contains(err.Error(), "custom-rr_2: width must be >= 1, got 0") {
		t.Errorf("custom error = %v", err)
	}
	for _, tt := range []struct {
		name string
		ctor Constructor
		msg  string
	}{
		{"krr", KRR, "already registered"},
		{"joint", KRR, "built-in combinator"},
		{"", KRR, "a name is a letter"},
		{"1rr", KRR, "a name is a letter"},
		{"a:b", KRR, "a name is a letter"},
		{"nil", nil, "nil constructor"},
	} {
		err := r.Register(tt.name, tt.ctor)
		if !errors.Is(err, ErrRegister) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("Register(%q) = %v, want ErrRegister containing %q", tt.name, err, tt.msg)
		}
	}
	if got, want := r.Names(), []string{"custom-rr_2", "generic", "krr", "matrix"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	// A plain error from a constructor is reported at the mechanism name.
	plain := errors.New("boom")
	if err := r.Register("fails", func(Params) (accountant.Mechanism, error) { return nil, plain }); err != nil {
		t.Fatal(err)
	}
	_, err = r.Parse("joint(krr:k=2,fails)")
	if !errors.Is(err, plain) || !errors.Is(err, ErrParam) || !strings.HasPrefix(err.Error(), `mechspec: at 14 in "joint(krr:k=2,fails)": fails: boom`) {
		t.Errorf("plain constructor error = %v", err)
	}
}

func TestParseInt(t *testing.T) {
	tests := []struct {
		in   string
		want int
		err  error
	}{
		{"1000000", 1000000, nil},
		{"1_000_000", 1000000, nil},
		{"1e6", 1000000, nil},
		{"1E6", 1000000, nil},
		{"2.5e3", 2500, nil},
		{"+7", 7, nil},
		{"-3", -3, nil},
		{"1.0", 1, nil},
		{"1.5", 0, errNotInteger},
		{"1.0000000000000001", 0, errNotInteger},
		{"1e-3", 0, errNotInteger},
		{"NaN", 0, errNotFinite},
		{"inf", 0, errNotFinite},
		{"-Infinity", 0, errNotFinite},
		{"0x10", 0, errNotNumber},
		{"010x", 0, errNotNumber},
		{"", 0, errNotNumber},
		{"1__0", 0, errNotNumber},
		{"e5", 0, errNotNumber},
		{"1e19", 0, errRange},
		{"1e999999999", 0, errRange},
		{"1e-999999999", 0, errRange},
		{"9223372036854775807", math.MaxInt64, nil},
		{"9223372036854775808", 0, errRange},
	}
	for _, tt := range tests {
		got, err := ParseInt(tt.in)
		if !errors.Is(err, tt.err) || got != tt.want {
			t.Errorf("ParseInt(%q) = %d, %v, want %d, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}
