package mechspec

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/blanket-dp/blanket/accountant"
)

// MaxLen is the longest spec Parse accepts, in bytes.
const MaxLen = 4096

// MaxDepth is the deepest nesting of combinators (joint, parallel,
// subsample) Parse accepts.
const MaxDepth = 32

// Constructor builds a mechanism from the parameters of a leaf. It asks p
// for the parameters it knows (p.Int("k"), p.FloatOr("eps0", 0), ...);
// Parse rejects any other parameter given. Errors should come from p
// (p.Invalid, p.Wrap) so that they point at the value; other errors are
// reported at the mechanism's name.
type Constructor func(p Params) (accountant.Mechanism, error)

// combinatorNames lists the names the parser handles itself.
const combinatorNames = "joint, parallel, subsample"

// isCombinator reports whether name is handled by the parser itself.
func isCombinator(name string) bool {
	switch name {
	case "joint", "parallel", "subsample":
		return true
	}
	return false
}

// Registry maps leaf names to constructors. The zero value is an empty
// registry; NewRegistry returns one with the built-in mechanisms. A Registry
// is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	ctors map[string]Constructor
}

// NewRegistry returns a registry with the built-in mechanisms: krr (KRR),
// generic (Generic) and matrix (Matrix reading files with ReadFile).
func NewRegistry() *Registry {
	r := &Registry{}
	for _, b := range []struct {
		name string
		ctor Constructor
	}{
		{"krr", KRR},
		{"generic", Generic},
		{"matrix", Matrix(ReadFile)},
	} {
		if err := r.Register(b.name, b.ctor); err != nil {
			panic(err) // the built-in names are valid and distinct
		}
	}
	return r
}

// Register adds a leaf mechanism. The name must be a valid name of the
// grammar (a letter, then letters, digits, '_' or '-'), must not be a
// combinator (joint, parallel, subsample) and must not be registered yet.
func (r *Registry) Register(name string, ctor Constructor) error {
	if ctor == nil {
		return fmt.Errorf("%w %q: nil constructor", ErrRegister, name)
	}
	if n := scanName(name, 0); n != len(name) || n == 0 {
		return fmt.Errorf("%w %q: a name is a letter followed by letters, digits, '_' or '-'", ErrRegister, name)
	}
	if isCombinator(name) {
		return fmt.Errorf("%w %q: the name is a built-in combinator", ErrRegister, name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.ctors[name]; ok {
		return fmt.Errorf("%w %q: already registered", ErrRegister, name)
	}
	if r.ctors == nil {
		r.ctors = map[string]Constructor{}
	}
	r.ctors[name] = ctor
	return nil
}

// Names returns the registered leaf names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.ctors))
	for n := range r.ctors {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (r *Registry) lookup(name string) (Constructor, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.ctors[name]
	return c, ok
}

// Parse parses spec (see the package documentation for the grammar) into a
// mechanism. Errors are *Error values wrapping ErrSyntax, ErrUnknown,
// ErrParam or ErrLimit.
func (r *Registry) Parse(spec string) (accountant.Mechanism, error) {
	if len(spec) > MaxLen {
		return nil, &Error{Spec: spec[:64] + "...", Pos: MaxLen, Kind: ErrLimit,
			Msg: fmt.Sprintf("spec is %d bytes, longer than the limit %d", len(spec), MaxLen)}
	}
	p := &parser{reg: r, spec: spec}
	m, err := p.mech()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.pos < len(spec) {
		return nil, p.expected("end of input")
	}
	return m, nil
}

// asError returns err as an *Error at pos, keeping it if it already is one.
func asError(spec string, pos int, name string, err error) error {
	var e *Error
	if errors.As(err, &e) && e.Spec == spec {
		return err
	}
	return &Error{Spec: spec, Pos: pos, Kind: ErrParam, Msg: fmt.Sprintf("%s: %v", name, err), Cause: err}
}
