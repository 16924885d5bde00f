package accountant

import (
	"encoding/binary"
	"math"
	"sync"
)

// The memo of evaluate.
//
// evaluate is a pure function of its arguments: the atoms' bits, n, eps,
// the lattice step hRel and wantLo. Everything else it reads is a constant
// (maxLattice, windowSD, sparseMaxTerms, ...) or a cache of values that do
// not depend on the call (the twiddle tables, the FFT plans). So a call
// whose arguments equal an earlier call's, bit for bit, may return the
// earlier bracket: the result is the one the computation would give again,
// and the memo cannot change a figure, only skip work. The key holds every
// argument's bits in full (no hash, so no collision), and two keys are
// equal only when every argument is.
//
// Repeats are common: a calibration and the horizon evaluate the same
// parts at the same points, the collector states each batch's guarantee
// at the same n, and a solver's refinements revisit points. They were
// about a quarter of the evaluations in the test suites.
//
// Memory is bounded: two generations of at most memoBytes/2 of keys each
// (a key is 25 bytes and 24 per atom); with the maps' own storage the
// memo holds about three times its key bytes at most (a second engineer
// measured 94 MB for one-atom keys).
// When the current one fills it becomes the old one and the old one is
// dropped; a hit in the old one is copied to the current one.
const memoBytes = 32 << 20

// evalMemo is a memo bounded to limit key bytes.
type evalMemo struct {
	sync.Mutex
	cur, old map[string]bracket
	bytes    int // key bytes in cur
	limit    int
}

var memo = evalMemo{limit: memoBytes}

// memoKey returns the bits of evaluate's arguments.
func memoKey(s AtomSet, n int, eps, hRel float64, wantLo bool) []byte {
	b := make([]byte, 0, 25+24*len(s))
	b = binary.LittleEndian.AppendUint64(b, uint64(n))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(eps))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(hRel))
	if wantLo {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	for _, a := range s {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(a.R))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(a.P))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(a.Q))
	}
	return b
}

// get returns the bracket recorded for key, if any.
func (m *evalMemo) get(key []byte) (bracket, bool) {
	m.Lock()
	defer m.Unlock()
	if b, ok := m.cur[string(key)]; ok {
		return b, true
	}
	b, ok := m.old[string(key)]
	if ok {
		m.putLocked(key, b)
	}
	return b, ok
}

// put records b for key.
func (m *evalMemo) put(key []byte, b bracket) {
	m.Lock()
	defer m.Unlock()
	m.putLocked(key, b)
}

func (m *evalMemo) putLocked(key []byte, b bracket) {
	if len(key) > m.limit/2 {
		return
	}
	if m.cur == nil || m.bytes+len(key) > m.limit/2 {
		m.old, m.cur, m.bytes = m.cur, map[string]bracket{}, 0
	}
	if _, ok := m.cur[string(key)]; !ok {
		m.bytes += len(key)
	}
	m.cur[string(key)] = b
}

// forget drops every entry.
func (m *evalMemo) forget() {
	m.Lock()
	defer m.Unlock()
	m.cur, m.old, m.bytes = nil, nil, 0
}

// ForgetMemo drops every recorded evaluation. Results do not change; the
// next evaluations take their full time again, which is what a benchmark of
// a first call (a process's start) measures.
func ForgetMemo() { memo.forget() }
