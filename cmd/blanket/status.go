package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// status draws a one-line "still working" indicator on a terminal for
// commands that compute one long answer (a composition over many rounds,
// a horizon calibration, a plan): what is running and for how long. It
// appears only after delay, so quick answers print nothing extra, and is
// erased before the answer is written.
type status struct {
	w     io.Writer
	what  string
	start time.Time
	stop  chan struct{}
	done  sync.WaitGroup
}

// statusInterval is the redraw period of the elapsed time.
const statusInterval = 200 * time.Millisecond

// startStatus starts the indicator on w if it is a terminal (per e) and
// returns the function that erases it; what names the work.
func (e *env) startStatus(w io.Writer, what string) (finish func()) {
	if !e.isTerminal(w) {
		return func() {}
	}
	s := &status{w: w, what: what, start: time.Now(), stop: make(chan struct{})}
	drawn := e.statusDelay <= 0
	if drawn {
		s.draw()
	}
	s.done.Add(1)
	go s.run(e.statusDelay, drawn)
	var once sync.Once
	return func() { once.Do(s.finish) }
}

// draw writes the line.
func (s *status) draw() {
	fmt.Fprintf(s.w, "\r\x1b[K%s: working, %s elapsed", s.what, time.Since(s.start).Round(100*time.Millisecond))
}

// run redraws the line every statusInterval, from delay on (the line is
// already there if drawn), until finish, then erases it.
func (s *status) run(delay time.Duration, drawn bool) {
	defer s.done.Done()
	if !drawn {
		select {
		case <-s.stop:
			return
		case <-time.After(delay):
		}
		s.draw()
	}
	t := time.NewTicker(statusInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			fmt.Fprint(s.w, "\r\x1b[K")
			return
		case <-t.C:
			s.draw()
		}
	}
}

// finish stops the indicator and erases its line (if it was drawn).
func (s *status) finish() {
	close(s.stop)
	s.done.Wait()
}
