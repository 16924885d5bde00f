package mechspec

import (
	"fmt"
	"io"
	"os"

	"github.com/blanket-dp/blanket/accountant"
)

// MaxFileSize is the largest declaration file ReadFile reads, in bytes.
const MaxFileSize = 256 << 20

// KRR constructs k-ary randomized response: krr:k=K, optionally with its own
// local budget krr:k=K:eps0=E. k must be an integer >= 2.
func KRR(p Params) (accountant.Mechanism, error) {
	k, err := p.Int("k")
	if err != nil {
		return nil, err
	}
	if k < 2 {
		return nil, p.Invalid("k", ">= 2")
	}
	eps0, err := ownEps0(p)
	if err != nil {
		return nil, err
	}
	return accountant.KRRMech{K: k, Eps0: eps0}, nil
}

// Generic constructs the generic pure eps0-LDP mechanism: generic, or
// generic:eps0=E with its own local budget.
func Generic(p Params) (accountant.Mechanism, error) {
	eps0, err := ownEps0(p)
	if err != nil {
		return nil, err
	}
	return accountant.GenericMech{Eps0: eps0}, nil
}

// ownEps0 returns the optional eps0 parameter, 0 when absent.
func ownEps0(p Params) (float64, error) {
	if !p.Has("eps0") {
		return 0, nil
	}
	e, err := p.Float("eps0")
	if err != nil {
		return 0, err
	}
	if !(e > 0 && e <= accountant.MaxEps0) {
		return 0, p.Invalid("eps0", fmt.Sprintf("in (0, %g]", accountant.MaxEps0))
	}
	return e, nil
}

// Matrix returns the constructor of matrix:FILE.json, which reads a
// declaration with read (a full declaration or a bare matrix, see
// accountant.DecodeDeclaration), validates it, and wraps it as an
// accountant.DeclaredMech named after the spec. A matrix without eps0 gets
// the eps0 computed by validation (its largest log likelihood ratio), so
// that joint composition charges it correctly. A longitudinal declaration
// (with a tree) is validated through its node's law.
func Matrix(read func(name string) ([]byte, error)) Constructor {
	return func(p Params) (accountant.Mechanism, error) {
		file, err := p.Arg()
		if err != nil {
			return nil, err
		}
		data, err := read(file)
		if err != nil {
			return nil, p.Wrap("", err)
		}
		d, err := accountant.DecodeDeclaration(data)
		if err != nil {
			return nil, p.Wrap("", err)
		}
		dec, err := decomposeDeclaration(d)
		if err != nil {
			return nil, p.Wrap("", err)
		}
		if d.Eps0 == 0 {
			d.Eps0 = dec.LocalEps
		}
		return accountant.DeclaredMech{Decl: d, Name: p.Mechanism() + ":" + Quote(file)}, nil
	}
}

// ReadFile reads a declaration file of at most MaxFileSize bytes.
func ReadFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, MaxFileSize)
	}
	return data, nil
}

// Quote returns v as a value of the grammar: unchanged if it is a valid bare
// value, else as a Go double-quoted string.
func Quote(v string) string {
	if v == "" {
		return `""`
	}
	for i := 0; i < len(v); i++ {
		if !isBare(v[i]) {
			return fmt.Sprintf("%q", v)
		}
	}
	return v
}
