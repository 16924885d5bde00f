package accountant

// The key of an atom set: the string under which the decompositions and
// the profile sampler keep each distinct candidate set once.

import (
	"math"
	"strconv"
)

// key returns a canonical string of a merged set, used to evaluate each
// distinct candidate only once. Sets that agree to 15 significant digits in
// every field share a key; the engine's relative safety margin (the
// "safety" factor in window) covers the difference.
func (s AtomSet) key() string {
	var k keyer // formats every field: one key remembers nothing worth keeping
	return k.key(s)
}

// keyer builds keys (AtomSet.key) for one goroutine. Made by newKeyer, it
// remembers how it formatted each float64 it has seen: a matrix
// decomposition keys every ordered pair of inputs (4032 sets for
// hadamard:k=64, at every eps0 a calibration tries), and their fields take
// a handful of distinct values, each formatted once instead of about
// 190,000 times. A float64's text depends only on its bits, so a key is the
// same string either way. The zero keyer remembers nothing.
type keyer struct {
	text map[uint64]string // nil: format every field
	buf  []byte
}

// newKeyer returns a keyer that remembers the texts it formats.
func newKeyer() *keyer {
	return &keyer{text: map[uint64]string{}}
}

// keyerMemo bounds the formatted values a keyer keeps.
const keyerMemo = 1 << 12

// key returns s.key().
func (k *keyer) key(s AtomSet) string {
	k.buf = k.buf[:0]
	for _, a := range s {
		k.buf = append(k.buf, k.format(a.R)...)
		k.buf = append(k.buf, ',')
		k.buf = append(k.buf, k.format(a.P)...)
		k.buf = append(k.buf, ',')
		k.buf = append(k.buf, k.format(a.Q)...)
		k.buf = append(k.buf, ';')
	}
	return string(k.buf)
}

// format returns strconv.FormatFloat(x, 'g', 15, 64).
func (k *keyer) format(x float64) string {
	b := math.Float64bits(x)
	if t, ok := k.text[b]; ok {
		return t
	}
	t := strconv.FormatFloat(x, 'g', 15, 64)
	if k.text != nil && len(k.text) < keyerMemo {
		k.text[b] = t
	}
	return t
}
