package laplace

// Why the pair (Lo, Hi) is the worst under the blanket (Su, Cheng, Wang
// 2025, Section 8, leave it open for Laplace on [0, 1]; this settles it for
// the upper bound the accountant computes, not for the exact shuffled
// divergence).
//
// Setting. Inputs are grid centres a in {0..m} (the library rounds every
// input to one), outputs j in Z, P_a(j) = t·u^|j-a| with u = e^-lam. The
// blanket r(j) = min_a P_a(j) = t·u^d(j), d(j) = max(|j|, |j-m|), is the
// same for every pair, with mass gamma. For a pair (a, b) and c = e^eps > 0
// the amplification variable is Z = P_a/r - c·P_b/r under r (and 0 on the
// residual 1 - gamma); the upper bound (1/n)E[(Z_1+...+Z_n)_+] grows in the
// convex order of Z, and every pair's Z has the same mean 1 - c. So it
// suffices that for all (a, b), c > 0 and s in R the stop-loss
//
//	H_ab(c, s) = sum_j (P_a - c·P_b - s·r)_+(j) = sup_S [P_a(S) - c·P_b(S) - s·r(S)]
//
// is at most H_0m(c, s). With h = m/2 and f_x = d - |j - x| (so that
// P_x/r = e^(lam·f_x)): for x <= h, f_x = m - x on j <= x, m + x - 2j on
// [x, h], x on j >= h (non-increasing; mirrored for x >= h).
//
// Symmetries. (R) j -> m - j keeps r and maps P_x to P_(m-x): H_ab =
// H_(m-a)(m-b), so H_m0 = H_0m. (D) The terms sum to 1 - c - s·gamma for
// every pair and v_+ = v + (-v)_+, so H_ab(c, s) = 1 - c - s·gamma +
// G_ab(c, s) with G_ab = sum_j (s·r - P_a + c·P_b)_+ = c·H_ba(1/c, -s/c):
// the claim for (a, b) at (c, s) is the claim for (b, a) at (1/c, -s/c).
//
// Half-line. If S = {Z > s} is {j <= J}, P_x(S) = Pr[x + noise <= J] is
// non-increasing in x, so P_a(S) <= P_0(S), P_b(S) >= P_m(S), and
// H_ab = P_a(S) - c·P_b(S) - s·r(S) <= P_0(S) - c·P_m(S) - s·r(S) <= H_0m.
// {j >= J} likewise gives H_m0 = H_0m.
//
// Reflection. If s <= 0 and T = {Z < s} lies in j <= h, map j to
// phi(j) = b + m - j: P_m(phi(j)) = P_b(j); P_0(phi(j)) = t·u^(b+m-j) <=
// P_a(j) since b + m - j >= |j - a| when 2j <= m; and phi(j) >= h with
// d(phi(j)) = b + m - j >= d(j), so r(phi(j)) <= r(j) and s·r(phi(j)) >=
// s·r(j). Termwise (s·r - P_0 + c·P_m)(phi(j)) >= (s·r - P_a + c·P_b)(j),
// so G_0m >= G_ab and H_ab <= H_0m (the mirror for T in j >= h uses
// phi(j) = b - j and (m, 0)).
//
// Cases. a = b: Z = (1-c)e^(lam·f_a) is monotone: half-line. a <= h <= b
// (or the mirror): f_a, f_b are monotone in opposite directions, Z is
// monotone: half-line. a < b <= h: Z is constant on j <= a, decreasing on
// [a, b], equal to e^(lam(m-2j))·K on [b, h] and K on j >= h, with
// K = e^(lam·a) - c·e^(lam·b). K >= 0: Z non-increasing, half-line. K < 0:
// for s >= K, {Z > s} is a left half-line inside j < b; for s < K, s < 0
// and {Z < s} misses j >= h: reflection. b < a <= h: by (D), the case
// a < b <= h at (1/c, -s/c), proved for every c > 0. The cases at or
// above h are the mirrors (R). So Z of (a, b) is below Z of (0, m) in the
// convex order at every eps, negative ones included.
//
// Compositions. In a joint product atom the other component contributes a
// point (alpha, beta) with alpha, beta >= 1 (or the residual, Z = 0 for
// both pairs); the product's Z is alpha·Z_1 at c' = c·beta/alpha, any
// c' > 0, so the order holds atom by atom, and mixtures with equal weights
// (the other component's atoms, parallel travel, subsampling) keep it.
// The unchanged-attribute sets of a joint product, (r, P_a, P_a) against
// (r, P_0, P_0) (or P_m for a >= h, equal by (R)), are covered too: there
// Z = (1 - c)·P_a/r. For c < 1 its superlevel sets are those of f_a,
// half-lines, where P_a(S) <= P_0(S). For c > 1 only s < 0 matters, and
// H = (1 - c) - s·gamma + (c - 1)·sum_j (P_a - s'·r)_+ with s' = -s/(c-1)
// (as in (D)), whose sum is over the half-lines {P_a/r > s'} again.
// Declaring (Lo, Hi) alone (the accountant also evaluates it swapped) is
// sound in every composition, and the segments split only raises its
// bound.
//
// Checks: worstpair_test.go compares the stop-loss of every pair with that
// of (0, m) at every kink, exactly, on small grids (m = 4..9) over eps in
// [-eps0, eps0]; numerically (a separate study) no pair's accountant bound
// came within 4% of (0, m)'s.
