package accountant

import (
	"encoding/binary"
	"math"
)

// The memo of tiltedSD.
//
// The lattice's step is a fraction of the standard deviation of Z under
// the tilt that centres it (tiltedSD), found by bisecting the tilt to the
// last float over the exact atoms: about sixty passes of exp over them.
// It depends on the atoms' values and masses (and maxZ, its start) alone,
// and the searches evaluate one set at one eps more than once (each
// lattice refinement, each n, each side): at 365 rounds of Laplace it was
// a sixth of a calibration, and about a fifth of its calls repeat. Like
// evaluate's memo (memo.go), this one is keyed by every input's bits in
// full and returns the value the computation gives again, so it changes
// no figure. Two generations bound it to sdMemoBytes of keys.
const sdMemoBytes = 8 << 20

var sdMemo = generations[float64]{limit: sdMemoBytes}

// tiltedSD is the standard deviation of Z under the tilt that centres it,
// computed on the exact atoms (tiltedSDOf), remembered by the bits of
// everything it reads: the atoms and maxZ.
func tiltedSD(p prepared) float64 {
	key := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+16*len(p.z)), math.Float64bits(p.maxZ))
	for j := range p.z {
		key = binary.LittleEndian.AppendUint64(key, math.Float64bits(p.z[j]))
		key = binary.LittleEndian.AppendUint64(key, math.Float64bits(p.w[j]))
	}
	if v, ok := sdMemo.get(key); ok {
		return v
	}
	v := tiltedSDOf(p)
	sdMemo.put(key, v)
	return v
}
