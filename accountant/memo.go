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

// generations is a map bounded to limit key bytes: two generations of at
// most limit/2 each. When the current one fills it becomes the old one
// and the old one is dropped; a hit in the old one is copied to the
// current one. get, put and forget take its lock; the Locked methods
// are for callers that hold it.
type generations[V any] struct {
	sync.Mutex
	cur, old map[string]V
	bytes    int // key bytes in cur
	limit    int
}

// get returns the value recorded for key, if any.
func (m *generations[V]) get(key []byte) (V, bool) {
	m.Lock()
	defer m.Unlock()
	return m.getLocked(key)
}

// put records v for key.
func (m *generations[V]) put(key []byte, v V) {
	m.Lock()
	defer m.Unlock()
	m.putLocked(key, v)
}

// forget drops every entry.
func (m *generations[V]) forget() {
	m.Lock()
	defer m.Unlock()
	m.cur, m.old, m.bytes = nil, nil, 0
}

func (m *generations[V]) getLocked(key []byte) (V, bool) {
	if v, ok := m.cur[string(key)]; ok {
		return v, true
	}
	v, ok := m.old[string(key)]
	if ok {
		m.putLocked(key, v)
	}
	return v, ok
}

func (m *generations[V]) putLocked(key []byte, v V) {
	if len(key) > m.limit/2 {
		return
	}
	if m.cur == nil || m.bytes+len(key) > m.limit/2 {
		m.old, m.cur, m.bytes = m.cur, map[string]V{}, 0
	}
	if _, ok := m.cur[string(key)]; !ok {
		m.bytes += len(key)
	}
	m.cur[string(key)] = v
}

// evalMemo is a memo bounded to limit key bytes.
type evalMemo struct {
	generations[bracket]
	// running holds the evaluations under way, so that a second caller of
	// the same key waits for the first instead of computing it again: a
	// composition's bound and its baselines run side by side and sample
	// the same profile points (a fifth of the evaluations of account eps
	// --rounds 365 were such duplicates).
	running map[string]*evaluation
}

// evaluation is one computation under way; done is closed when b is set,
// or when the computation panicked (ok false: a waiter computes it
// itself).
type evaluation struct {
	done chan struct{}
	b    bracket
	ok   bool
}

var memo = newEvalMemo(memoBytes)

// newEvalMemo returns an empty memo bounded to limit key bytes.
func newEvalMemo(limit int) *evalMemo {
	return &evalMemo{generations: generations[bracket]{limit: limit}}
}

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

// do returns the bracket recorded for key, else the one another caller is
// computing for it (waiting for it), else compute's, which it records.
// compute must not call do: a caller waits only for computations that
// wait for nothing.
func (m *evalMemo) do(key []byte, compute func() bracket) bracket {
	for {
		m.Lock()
		if b, ok := m.getLocked(key); ok {
			m.Unlock()
			return b
		}
		if e, ok := m.running[string(key)]; ok {
			m.Unlock()
			<-e.done
			if e.ok {
				return e.b
			}
			continue // it panicked: try again
		}
		e := &evaluation{done: make(chan struct{})}
		if m.running == nil {
			m.running = map[string]*evaluation{}
		}
		m.running[string(key)] = e
		m.Unlock()
		return m.run(key, e, compute)
	}
}

// run computes e for key and records it; a panic in compute releases the
// waiters (without a bracket) and goes on up.
func (m *evalMemo) run(key []byte, e *evaluation, compute func() bracket) bracket {
	defer func() {
		m.Lock()
		delete(m.running, string(key))
		if e.ok {
			m.putLocked(key, e.b)
		}
		m.Unlock()
		close(e.done)
	}()
	e.b = compute()
	e.ok = true
	return e.b
}

// ForgetMemo drops every recorded evaluation and lattice scale
// (sd_memo.go), the sparse path's tables of log factorials and binomial
// masses, the remembered matrix decompositions (decompose_memo.go) and
// the windows' pooled scratch slices (slicepool.go).
// Results do not change; the next evaluations take their full time again,
// which is what a benchmark of a first call (a process's start) measures.
func ForgetMemo() {
	memo.forget()
	sdMemo.forget()
	forgetSparseTables()
	forgetDecompositions()
	forgetSlicePools()
}
