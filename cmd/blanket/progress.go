package main

import (
	"fmt"
	"io"
	"time"
)

// progress draws a one-line progress indicator on a terminal.
type progress struct {
	w     io.Writer
	what  string
	total int
	start time.Time
	last  time.Time
}

// progressInterval throttles redraws.
const progressInterval = 100 * time.Millisecond

func newProgress(w io.Writer, what string, total int) *progress {
	return &progress{w: w, what: what, total: total, start: time.Now()}
}

// update redraws the line with done of total finished.
func (p *progress) update(done int) {
	now := time.Now()
	if done < p.total && now.Sub(p.last) < progressInterval {
		return
	}
	p.last = now
	fmt.Fprintf(p.w, "\r\x1b[K%s: %d/%d points (%d%%), %s elapsed", p.what, done, p.total, 100*done/p.total,
		now.Sub(p.start).Round(100*time.Millisecond))
}

// finish erases the line.
func (p *progress) finish() { fmt.Fprint(p.w, "\r\x1b[K") }
