package shuffler

import (
	"context"
	"errors"

	"github.com/blanket-dp/blanket/internal/health"
)

// Checks are the shuffler's readiness checks: "shuffler store" (its database
// answers) and "shuffler" (not shutting down).
func (s *Shuffler) Checks() []health.Check {
	return []health.Check{
		{Name: "shuffler store", Ready: s.st.ready},
		{Name: "shuffler", Ready: func(context.Context) error {
			s.runMu.Lock()
			defer s.runMu.Unlock()
			if s.isClosed {
				return errors.New("shutting down")
			}
			return nil
		}},
	}
}

// Ready returns nil when the relay holds a plan of the collector's to
// serve, else why not. It never fetches (the relay's refresh does), so
// it answers at once: a shuffler takes and stores uploads whether or not
// its collector is reachable, and once a plan was fetched the relay
// serves it even when the collector is down.
func (pr *PlanRelay) Ready(context.Context) error {
	if !pr.held.Load() {
		return errors.New("no plan fetched from the collector yet")
	}
	return nil
}
