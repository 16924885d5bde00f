package longitudinal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

var ctx = context.Background()

type pcg struct{ r *rand.Rand }

func (p pcg) Uint64() uint64 { return p.r.Uint64() }

func seeded(seed uint64) pcg { return pcg{rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))} }

func labels(bits ...int) []string {
	out := make([]string, len(bits))
	for i, b := range bits {
		out[i] = map[int]string{0: "false", 1: "true"}[b]
	}
	return out
}

func TestTreeCover(t *testing.T) {
	for _, H := range []int{1, 2, 8, 64} {
		tr := newTree(H)
		for i := 0; i < tr.size(); i++ {
			h, m := tr.node(i)
			if tr.index(h, m) != i {
				t.Fatalf("H=%d: node(%d) = (%d,%d), index back %d", H, i, h, m, tr.index(h, m))
			}
		}
		for p := 1; p <= H; p++ {
			covered := make([]int, H+1)
			levels := map[int]bool{}
			for _, n := range tr.cover(p) {
				if levels[n[0]] {
					t.Errorf("H=%d p=%d: two cover nodes at level %d", H, p, n[0])
				}
				levels[n[0]] = true
				for q := end(n[0], n[1]) - span(n[0]) + 1; q <= end(n[0], n[1]); q++ {
					covered[q]++
				}
			}
			for q := 1; q <= H; q++ {
				if want := map[bool]int{true: 1, false: 0}[q <= p]; covered[q] != want {
					t.Errorf("H=%d p=%d: position %d covered %d times", H, p, q, covered[q])
				}
			}
		}
	}
}

// transcriptLaw returns, from the protocol's definition alone (not the
// package's code), the law of one tree's transcript for a state sequence
// x (x[t-1] the state at position t, starting from 0): keys "h:bits" with
// the bits of the level-h nodes in order.
func transcriptLaw(H, k int, eps0 float64, x []int) map[string]float64 {
	L := 0
	for 1<<L <= H {
		L++
	}
	// positions of changes
	var changes []int
	prev := 0
	for t, v := range x {
		if v != prev {
			changes = append(changes, t+1)
		}
		prev = v
	}
	e := math.Exp(eps0)
	law := map[string]float64{}
	for j := 1; j <= k; j++ {
		for h := 1; h <= L; h++ {
			w := 1 << (h - 1)
			nodes := H / w
			vals := make([]int, nodes)
			if j <= len(changes) {
				sign := 1
				if j%2 == 0 {
					sign = -1
				}
				vals[(changes[j-1]-1)/w] = sign
			}
			for mask := 0; mask < 1<<nodes; mask++ {
				p := 1.0 / float64(k*L)
				var key strings.Builder
				fmt.Fprintf(&key, "%d:", h)
				for m := 0; m < nodes; m++ {
					b := mask >> m & 1
					key.WriteByte(byte('0' + b))
					switch vals[m] {
					case 0:
						p *= 0.5
					case 1:
						p *= map[int]float64{1: e / (e + 1), 0: 1 / (e + 1)}[b]
					case -1:
						p *= map[int]float64{0: e / (e + 1), 1: 1 / (e + 1)}[b]
					}
				}
				law[key.String()] += p
			}
		}
	}
	return law
}

// TestTheorem5 checks that a tree's whole transcript is eps0-LDP, by exact
// enumeration of the law of every state sequence of a small tree, and that
// the bound is attained (the level is eps0, not less).
// The tree of 8 periods (256 state sequences) runs in make audit
// (TestTheorem5Deep).
func TestTheorem5(t *testing.T) {
	theorem5(t, []theorem5Case{{4, 1, 1}, {4, 2, 0.7}, {2, 2, 3}, {1, 1, 1.5}})
}

// theorem5Case is a tree of H periods, k changes and eps0.
type theorem5Case struct {
	H, k int
	eps0 float64
}

// theorem5 checks TestTheorem5's cases.
func theorem5(t *testing.T, cases []theorem5Case) {
	for _, c := range cases {
		var laws []map[string]float64
		for s := 0; s < 1<<c.H; s++ {
			x := make([]int, c.H)
			for t := range x {
				x[t] = s >> t & 1
			}
			laws = append(laws, transcriptLaw(c.H, c.k, c.eps0, x))
		}
		worst := 0.0
		for _, a := range laws {
			for _, b := range laws {
				for key, pa := range a {
					worst = math.Max(worst, math.Log(pa/b[key]))
				}
			}
		}
		want := accountant.TranscriptLocalEps(c.H, c.eps0)
		if worst > want*(1+1e-12) {
			t.Errorf("H=%d k=%d eps0=%g: transcript ratio e^%.6f exceeds e^%g", c.H, c.k, c.eps0, worst, want)
		}
		// With k = 1 the level is in the transcript and nothing else is
		// mixed, so the bound is attained; with k > 1 the mixture over j
		// may dilute it.
		if c.k == 1 && worst < want*(1-1e-9) {
			t.Errorf("H=%d k=%d eps0=%g: worst ratio e^%.6f, TranscriptLocalEps says %g", c.H, c.k, c.eps0, worst, want)
		}
	}
}

// TestStepMatchesDefinition samples the package's client over a whole tree
// and tests the transcript frequencies against the definition's law. The
// chi-square threshold holds at any sample size; make audit draws four
// times as many users (TestStepMatchesDefinitionDeep), for more power.
func TestStepMatchesDefinition(t *testing.T) {
	stepMatchesDefinition(t, 50000)
}

// stepMatchesDefinition is TestStepMatchesDefinition with users users.
func stepMatchesDefinition(t *testing.T, users int) {
	const H, k, eps0 = 4, 2, 1.0
	r, err := New(Options{Tree: H, Changes: k, Rand: seeded(7)})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range [][]int{{0, 1, 1, 0}, {1, 1, 1, 1}, {0, 0, 0, 0}, {1, 0, 1, 0}} {
		law := transcriptLaw(H, k, eps0, x)
		states := make([][]byte, users)
		keys := make([]strings.Builder, users)
		base := int64(1000 * H) // a tree boundary
		for pos := 0; pos < H; pos++ {
			in := make([]string, users)
			for i := range in {
				in[i] = labels(x[pos])[0]
			}
			reps, next, err := r.Step(ctx, eps0, base+int64(pos), states, sdk.Inputs{Categories: in})
			if err != nil {
				t.Fatal(err)
			}
			states = next
			for i, rep := range reps {
				if rep == nil {
					continue
				}
				if keys[i].Len() == 0 {
					fmt.Fprintf(&keys[i], "%d:", rep[0])
				}
				keys[i].WriteByte('0' + rep[3])
			}
		}
		index := map[string]int{}
		var probs []float64
		for key, p := range law {
			index[key] = len(probs)
			probs = append(probs, p)
		}
		counts := make([]int64, len(probs))
		for i := range keys {
			j, ok := index[keys[i].String()]
			if !ok {
				t.Fatalf("x=%v: transcript %q is not in the law", x, keys[i].String())
			}
			counts[j]++
		}
		ldptest.CheckChiSquare(t, fmt.Sprintf("transcripts of %v", x), counts, probs, 1e-4)
	}
}

// TestEstimateUnbiased simulates a population through the package's client
// and server and checks, over repetitions, that the estimates average to
// the truth and that the variance estimate matches their spread. Both
// checks hold at any population size (the estimate is unbiased and its
// variance exact for every n); make audit simulates 2000 users
// (TestEstimateUnbiasedDeep) where make test simulates 600.
func TestEstimateUnbiased(t *testing.T) {
	estimateUnbiased(t, 600)
}

// estimateUnbiased is TestEstimateUnbiased with users users.
func estimateUnbiased(t *testing.T, users int) {
	const H, k, eps0, reps = 8, 2, 1.5, 300
	r, err := New(Options{Tree: H, Changes: k, Rand: seeded(11)})
	if err != nil {
		t.Fatal(err)
	}
	// User i's state sequence: on from position 1+i%5 for some, off again
	// at position 6 for a third (two changes), three changes for a few
	// (counted as frozen after the second).
	x := func(i, pos int) int {
		switch i % 6 {
		case 0:
			return 0
		case 1, 2:
			if pos >= 1+i%5 {
				return 1
			}
			return 0
		case 3:
			if pos >= 2 && pos < 6 {
				return 1
			}
			return 0
		case 4:
			return 1
		default: // three changes: on at 2, off at 4, on at 7; frozen off after 4
			if (pos >= 2 && pos < 4) || pos >= 7 {
				return 1
			}
			return 0
		}
	}
	truth := make([]float64, H+1)
	for pos := 1; pos <= H; pos++ {
		for i := 0; i < users; i++ {
			v := x(i, pos)
			if i%6 == 5 && pos >= 7 {
				v = 0 // past k = 2 changes the estimate follows the frozen state
			}
			truth[pos] += float64(v)
		}
	}
	sum, sumSq, sumVar := make([]float64, H+1), make([]float64, H+1), make([]float64, H+1)
	for rep := 0; rep < reps; rep++ {
		states := make([][]byte, users)
		var merged *sdk.Statistic
		for pos := 1; pos <= H; pos++ {
			in := make([]string, users)
			for i := range in {
				in[i] = labels(x(i, pos))[0]
			}
			out, next, err := r.Step(ctx, eps0, int64(pos-1), states, sdk.Inputs{Categories: in})
			if err != nil {
				t.Fatal(err)
			}
			states = next
			var sent [][]byte
			for _, o := range out {
				if o != nil {
					sent = append(sent, o)
				}
			}
			st, err := r.Accumulate(ctx, eps0, sent)
			if err != nil {
				t.Fatal(err)
			}
			if merged == nil {
				merged = st
			} else if err := merged.Merge(st); err != nil {
				t.Fatal(err)
			}
			est, err := r.Estimate(ctx, merged)
			if err != nil {
				t.Fatal(err)
			}
			if p, _ := r.Position(merged); p != pos {
				t.Fatalf("position %d, want %d", p, pos)
			}
			v := est.Items[0].Value
			sum[pos] += v
			sumSq[pos] += v * v
			sumVar[pos] += est.Items[0].Variance
		}
	}
	for pos := 1; pos <= H; pos++ {
		mean := sum[pos] / reps
		empVar := sumSq[pos]/reps - mean*mean
		estVar := sumVar[pos] / reps
		// The mean of reps estimates has sd sqrt(var/reps).
		if z := (mean - truth[pos]) / math.Sqrt(estVar/reps); math.Abs(z) > 4.5 {
			t.Errorf("position %d: mean estimate %.1f, truth %.0f (z = %.2f)", pos, mean, truth[pos], z)
		}
		// The sample variance of reps draws is within ~25% of the truth
		// with overwhelming probability at reps = 300 (sd ~ sqrt(2/reps)).
		if ratio := empVar / estVar; ratio < 0.7 || ratio > 1.4 {
			t.Errorf("position %d: empirical variance %.0f, estimated %.0f (ratio %.2f)", pos, empVar, estVar, ratio)
		}
	}
}

func TestStateRules(t *testing.T) {
	r, err := New(Options{Tree: 8, Changes: 2, Rand: seeded(3)})
	if err != nil {
		t.Fatal(err)
	}
	step := func(period int64, st []byte, v int) ([]byte, []byte, error) {
		reps, next, err := r.Step(ctx, 1, period, [][]byte{st}, sdk.Inputs{Categories: labels(v)})
		if err != nil {
			return nil, nil, err
		}
		return reps[0], next[0], nil
	}
	_, s1, err := step(16, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	d1, err := decodeState(s1, r.tree, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d1.tree != 2 || d1.last != 16 || d1.changes != 1 || d1.bit != 1 {
		t.Errorf("first step: %+v", d1)
	}
	// Replays and the past are refused.
	for _, p := range []int64{16, 15} {
		if _, _, err := step(p, s1, 1); !errors.Is(err, sdk.ErrBadState) {
			t.Errorf("period %d after 16: %v, want ErrBadState", p, err)
		}
	}
	// Another budget, another tree size, garbage: refused.
	if _, _, err := r.Step(ctx, 2, 17, [][]byte{s1}, sdk.Inputs{Categories: labels(1)}); !errors.Is(err, sdk.ErrBadState) {
		t.Errorf("other eps0: %v", err)
	}
	r16, _ := New(Options{Tree: 16, Changes: 2})
	if _, _, err := r16.Step(ctx, 1, 17, [][]byte{s1}, sdk.Inputs{Categories: labels(1)}); !errors.Is(err, sdk.ErrBadState) {
		t.Errorf("other tree: %v", err)
	}
	bad := append([]byte(nil), s1...)
	bad[0] = 9
	if _, _, err := step(17, bad, 1); !errors.Is(err, sdk.ErrBadState) {
		t.Errorf("other version: %v", err)
	}
	if _, _, err := step(17, s1[:10], 1); !errors.Is(err, sdk.ErrBadState) {
		t.Errorf("short state: %v", err)
	}
	// A gap in the same tree carries the bit: no change, same choices.
	_, s2, err := step(20, s1, 1)
	if err != nil {
		t.Fatal(err)
	}
	d2, _ := decodeState(s2, r.tree, 2, 1)
	if d2.changes != 1 || d2.j != d1.j || d2.h != d1.h || d2.last != 20 {
		t.Errorf("gap: %+v from %+v", d2, d1)
	}
	// A new tree: new choices drawn, the carried on-state is a change at
	// the tree's first position.
	_, s3, err := step(27, s2, 1)
	if err != nil {
		t.Fatal(err)
	}
	d3, _ := decodeState(s3, r.tree, 2, 1)
	if d3.tree != 3 || d3.changes != 1 || d3.bit != 1 || (d3.j == 1 && d3.jPos != 1) {
		t.Errorf("new tree: %+v", d3)
	}
	// Reports go out only at the ends of the level's nodes.
	st := []byte(nil)
	for p := int64(32); p < 40; p++ {
		rep, next, err := step(p, st, 0)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := decodeState(next, r.tree, 2, 1)
		if want := int(p-32+1)%span(d.h) == 0; (rep != nil) != want {
			t.Errorf("period %d level %d: report %v", p, d.h, rep)
		}
		st = next
	}
}

func TestAccumulateMalformed(t *testing.T) {
	r, _ := New(Options{Tree: 4, Changes: 1})
	st, err := r.Accumulate(ctx, 1, [][]byte{
		{1, 0, 4, 1}, // leaf 4, +1
		{3, 0, 1, 0}, // root, -1
		{3, 0, 2, 0}, // root has one node
		{4, 0, 1, 0}, // no level 4
		{1, 0, 1, 2}, // bit 2
		{1, 0, 1},    // short
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.N != 2 || st.Malformed != 4 {
		t.Errorf("N = %d, malformed = %d", st.N, st.Malformed)
	}
	if st.Counts[2*r.tree.index(1, 4)] != 1 || st.Counts[2*r.tree.index(3, 1)+1] != 1 {
		t.Errorf("counts %v", st.Counts)
	}
}

func TestConfig(t *testing.T) {
	for _, c := range []sdk.Config{
		{Params: map[string]string{"tree": "12"}},
		{Params: map[string]string{"tree": "8", "changes": "9"}},
		{Params: map[string]string{"colour": "red"}},
		{Categories: []string{"a", "b", "c"}},
		{Categories: []string{"a", "b"}, Other: "x"},
		{Lo: 0, Hi: 1},
	} {
		if _, err := FromConfig(c); !errors.Is(err, sdk.ErrBadConfig) {
			t.Errorf("%+v: %v, want ErrBadConfig", c, err)
		}
	}
	r, err := FromConfig(sdk.Config{Categories: []string{"light", "dark"}, Params: map[string]string{"tree": "16", "changes": "3"}})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := r.Describe(ctx)
	if !d.Stateful || d.Span != 16 || d.Categories[1] != "dark" || r.Changes() != 3 {
		t.Errorf("description %+v", d)
	}
	if _, err := r.Randomize(ctx, 1, sdk.Inputs{Categories: []string{"dark"}}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Randomize: %v", err)
	}
	decl, err := r.Declare(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := accountant.Decompose(decl); !errors.Is(err, accountant.ErrLongitudinal) {
		t.Errorf("a longitudinal declaration decomposed as independent reports: %v", err)
	}
	node, err := decl.Node()
	if err != nil {
		t.Fatal(err)
	}
	if err := accountant.Validate(node); err != nil {
		t.Errorf("node declaration: %v", err)
	}
}
