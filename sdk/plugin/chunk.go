package plugin

// wireOverhead bounds the protobuf bytes a repeated bytes or string element
// adds to its content (a tag and a length varint up to 2^28).
const wireOverhead = 5

// split returns the ranges [start, end) in which a batch of n elements goes
// to a plugin process, one call each: consecutive and covering [0, n), each
// of one element at least and, beyond its first element, of at most limit
// bytes, cost(i) being element i's bytes on the wire (its request and
// answer). A batch of no element is one empty range: one call, whose
// answer is the plugin's (its error for an invalid batch). Every batched
// call of a subprocess (Randomize, Step, Accumulate, Outputs) splits with
// it.
func split(n, limit int, cost func(i int) int) [][2]int {
	out := make([][2]int, 0, 1)
	for start := 0; start < n || len(out) == 0; {
		end, size := start, 0
		for end < n && (end == start || size+cost(end) <= limit) {
			size += cost(end)
			end++
		}
		out = append(out, [2]int{start, end})
		if n == 0 {
			break
		}
		start = end
	}
	return out
}

// reportCost is the cost function of a batch of reports (Accumulate,
// Outputs): each report's bytes and its wire overhead.
func reportCost(reports [][]byte) func(i int) int {
	return func(i int) int { return len(reports[i]) + wireOverhead }
}
