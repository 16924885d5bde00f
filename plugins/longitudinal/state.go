package longitudinal

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/blanket-dp/blanket/sdk"
)

// A user's state: the client of Algorithm 1 keeps its random choices (the
// change j it reports and its level h) and two counters for the whole tree.
// Encoded in stateBytes bytes, big-endian:
//
//	0      version (stateVersion)
//	1      log2 of the tree's periods
//	2      k, the changes parameter
//	3..10  eps0 (IEEE 754 bits): a state is used at one budget only
//	11..18 tree number (period / H)
//	19..26 last period stepped
//	27     j, in [1, k]
//	28     h, in [1, L]
//	29     the state bit at the last period stepped
//	30     changes seen in this tree, capped at k+1
//	31..32 position in the tree of the j-th change, 0 before it
//
// Nothing in a state leaves the device.

const (
	stateVersion = 1
	stateBytes   = 33
)

// userState is the decoded state.
type userState struct {
	logTree int
	k       int
	eps0    float64
	tree    int64
	last    int64
	j, h    int
	bit     int
	changes int
	jPos    int
}

func (s *userState) encode() []byte {
	b := make([]byte, stateBytes)
	b[0] = stateVersion
	b[1] = byte(s.logTree)
	b[2] = byte(s.k)
	binary.BigEndian.PutUint64(b[3:], math.Float64bits(s.eps0))
	binary.BigEndian.PutUint64(b[11:], uint64(s.tree))
	binary.BigEndian.PutUint64(b[19:], uint64(s.last))
	b[27] = byte(s.j)
	b[28] = byte(s.h)
	b[29] = byte(s.bit)
	b[30] = byte(s.changes)
	binary.BigEndian.PutUint16(b[31:], uint16(s.jPos))
	return b
}

// decodeState reads a state written by a randomizer with this tree, k
// and eps0. Errors wrap sdk.ErrBadState.
func decodeState(b []byte, t tree, k int, eps0 float64) (*userState, error) {
	if len(b) != stateBytes {
		return nil, fmt.Errorf("%w: %d bytes, a version %d state has %d", sdk.ErrBadState, len(b), stateVersion, stateBytes)
	}
	if b[0] != stateVersion {
		return nil, fmt.Errorf("%w: version %d, this plugin reads version %d", sdk.ErrBadState, b[0], stateVersion)
	}
	s := &userState{
		logTree: int(b[1]),
		k:       int(b[2]),
		eps0:    math.Float64frombits(binary.BigEndian.Uint64(b[3:])),
		tree:    int64(binary.BigEndian.Uint64(b[11:])),
		last:    int64(binary.BigEndian.Uint64(b[19:])),
		j:       int(b[27]),
		h:       int(b[28]),
		bit:     int(b[29]),
		changes: int(b[30]),
		jPos:    int(binary.BigEndian.Uint16(b[31:])),
	}
	if 1<<s.logTree != t.periods || s.k != k {
		return nil, fmt.Errorf("%w: written for a tree of %d periods and %d changes, this randomizer has %d and %d", sdk.ErrBadState, 1<<s.logTree, s.k, t.periods, k)
	}
	if s.eps0 != eps0 {
		return nil, fmt.Errorf("%w: written at eps0 = %v, asked at %v (a new budget starts a new state)", sdk.ErrBadState, s.eps0, eps0)
	}
	switch {
	case s.tree < 0 || s.last < 0 || s.last/int64(t.periods) != s.tree:
		return nil, fmt.Errorf("%w: tree %d does not hold period %d", sdk.ErrBadState, s.tree, s.last)
	case s.j < 1 || s.j > k || s.h < 1 || s.h > t.levels:
		return nil, fmt.Errorf("%w: choices j = %d, h = %d outside [1, %d] and [1, %d]", sdk.ErrBadState, s.j, s.h, k, t.levels)
	case s.bit > 1 || s.changes > k+1:
		return nil, fmt.Errorf("%w: bit %d, changes %d", sdk.ErrBadState, s.bit, s.changes)
	case s.jPos > t.periods || (s.jPos == 0) != (s.changes < s.j):
		return nil, fmt.Errorf("%w: change %d at position %d after %d changes", sdk.ErrBadState, s.j, s.jPos, s.changes)
	}
	return s, nil
}

// change records a change of the state bit at position pos of the tree.
func (s *userState) change(pos int) {
	if s.changes <= s.k {
		s.changes++
	}
	if s.changes == s.j {
		s.jPos = pos
	}
	s.bit ^= 1
}

// value returns the node value of (h, m): the sign of the j-th change
// (+1 for odd j, a step up from 0; -1 for even j) when it lies in the
// node, else 0.
func (s *userState) value(h, m int) int {
	if s.jPos == 0 || s.jPos <= end(h, m)-span(h) || s.jPos > end(h, m) {
		return 0
	}
	if s.j%2 == 1 {
		return 1
	}
	return -1
}
