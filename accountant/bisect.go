package accountant

// bisectFirst narrows (no, yes] to the yes end of the last step: it takes
// pred(no) false and pred(yes) true without evaluating either, and halves
// with mid = no + (yes-no)/2 until the two are adjacent. Where pred is
// monotone that is the first index in (no, yes] where it holds; where it
// is not (computed values near a threshold) it is some index whose
// predecessor failed and which held, which is what each caller's argument
// uses. The window's band end, the sparse path's first counting leaf and
// the cut's first kept leaf each bisect this way.
func bisectFirst(no, yes int, pred func(int) bool) int {
	for yes-no > 1 {
		if mid := no + (yes-no)/2; pred(mid) {
			yes = mid
		} else {
			no = mid
		}
	}
	return yes
}

// bisectLast is bisectFirst mirrored: it narrows [yes, no) with pred(yes)
// true and pred(no) false (neither evaluated), halving with mid = yes +
// (no-yes)/2, and returns the yes end.
func bisectLast(yes, no int, pred func(int) bool) int {
	for no-yes > 1 {
		if mid := yes + (no-yes)/2; pred(mid) {
			yes = mid
		} else {
			no = mid
		}
	}
	return yes
}
