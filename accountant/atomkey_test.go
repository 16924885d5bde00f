package accountant

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// plainKey is the key as the project first wrote it: each field formatted
// to 15 significant digits afresh.
func plainKey(s AtomSet) string {
	var b strings.Builder
	for _, a := range s {
		b.WriteString(strconv.FormatFloat(a.R, 'g', 15, 64))
		b.WriteByte(',')
		b.WriteString(strconv.FormatFloat(a.P, 'g', 15, 64))
		b.WriteByte(',')
		b.WriteString(strconv.FormatFloat(a.Q, 'g', 15, 64))
		b.WriteByte(';')
	}
	return b.String()
}

// TestKeyerMatchesPlainKey: a keyer used for many sets in a row (its
// remembered texts and its buffer reused, past its memo's bound) gives
// every set the plain key, on values that repeat (as a matrix's entries
// do), values one ulp apart (distinct bits, often the same text), the
// special values, and the empty set.
func TestKeyerMatchesPlainKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	pool := []float64{0, math.Copysign(0, -1), 1, 0.5, 1.0 / 3, math.Exp(-3.7), math.Inf(1), math.Inf(-1), math.NaN(),
		math.SmallestNonzeroFloat64, math.MaxFloat64, 1e-300, 123456789012345678}
	for i := range 40 {
		x := rng.Float64() * math.Pow(10, float64(rng.IntN(40)-20))
		pool = append(pool, x, math.Nextafter(x, 2*x+1), math.Nextafter(x, -1))
		_ = i
	}
	k := newKeyer()
	sets := 0
	for round := range 3000 {
		n := rng.IntN(12)
		s := make(AtomSet, n)
		for i := range s {
			pick := func() float64 {
				if round > 2000 && rng.IntN(2) == 0 {
					return rng.NormFloat64() // fresh values: the memo fills past its bound
				}
				return pool[rng.IntN(len(pool))]
			}
			s[i] = Atom{R: pick(), P: pick(), Q: pick()}
		}
		want := plainKey(s)
		if got := k.key(s); got != want {
			t.Fatalf("set %d: keyer %q, plain %q", round, got, want)
		}
		if got := s.key(); got != want {
			t.Fatalf("set %d: key %q, plain %q", round, got, want)
		}
		sets++
	}
	if len(k.text) > keyerMemo {
		t.Fatalf("the keyer kept %d texts, more than its bound %d", len(k.text), keyerMemo)
	}
	if len(k.text) < keyerMemo {
		t.Fatalf("the test never filled the keyer's memo (%d of %d): its bound went unexercised", len(k.text), keyerMemo)
	}
}

// TestKeyerKeysDoNotAlias: a key returned earlier is not changed by the
// keyer's later work (it reuses its buffer).
func TestKeyerKeysDoNotAlias(t *testing.T) {
	var k keyer
	a := k.key(AtomSet{{R: 0.25, P: 0.5, Q: 0.125}})
	b := k.key(AtomSet{{R: 0.75, P: 0.0625, Q: 0.5}})
	if a != "0.25,0.5,0.125;" || b != "0.75,0.0625,0.5;" {
		t.Fatalf("keys %q and %q", a, b)
	}
	if k.text != nil {
		t.Fatalf("the zero keyer remembered %d texts", len(k.text))
	}
}
