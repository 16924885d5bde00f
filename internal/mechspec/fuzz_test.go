package mechspec

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, that every error is an *Error
// with a position inside the spec (or at its end), and that a parsed
// mechanism's String parses back to the same mechanism.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"krr:k=100",
		"generic:eps0=2",
		`matrix:"my file,1.json"`,
		"joint(krr:k=10,krr:k=10:eps0=1.5)",
		"parallel(0.5:krr:k=10,0.5:subsample(0.1,generic))",
		"joint(krr:k=10,",
	} {
		f.Add(s)
	}
	r := testRegistry(f)
	f.Fuzz(func(t *testing.T, spec string) {
		m, err := r.Parse(spec)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse(%q) error %v (%T) is not an *Error", spec, err, err)
			}
			if e.Pos < 0 || e.Pos > len(spec) {
				t.Fatalf("Parse(%q) error position %d outside [0, %d]", spec, e.Pos, len(spec))
			}
			if !strings.HasPrefix(err.Error(), "mechspec: at ") {
				t.Fatalf("Parse(%q) error %q lacks the position prefix", spec, err)
			}
			return
		}
		s := m.String()
		m2, err := r.Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q does not parse: %v", spec, s, err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("Parse(%q) = %#v, Parse(String()) = %#v", spec, m, m2)
		}
	})
}
