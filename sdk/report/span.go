package report

import (
	"time"
)

// PeriodSpan is a reporting period in the servers' JSON APIs: [Start,
// End) in UTC.
type PeriodSpan struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// NewPeriodSpan returns p's span, nil for the zero period (no period).
func NewPeriodSpan(p Period) *PeriodSpan {
	if p.IsZero() {
		return nil
	}
	return &PeriodSpan{Start: time.Unix(p.Start, 0).UTC(), End: time.Unix(p.End(), 0).UTC()}
}
